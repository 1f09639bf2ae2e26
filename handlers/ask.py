"""Questions in plain words: a mention in a channel (`app_mention`) or a DM (`message.im`).

The question is read in the core (bot/ask/service.py: read_question), then answered through
the one command table (handlers/commands.py: dispatch) with an `Asker` whose answers go into
the question's thread, so a question is answered by the same services and renderers as the
command it amounts to. A conversation is a thread: what a thread asked is remembered
(deps.threads) for the replies in it, a new top-level mention starts afresh, and the top of a
DM carries its last question only into a message that reads as a follow-up (bot/ask/
understand.py: carried); a reply in the thread of a DM's question or of its answer carries it.
Where the reading is unsure, one short question with a button per reading; a button runs its
reading through the same dispatch. A question meowbot cannot answer gets the menu.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot import drain_reason
from bot.ask.entities import Vocabulary
from bot.ask.models import DrainAsk, Intent, Menu, MyJob, Route, Understanding, Unsure
from bot.ask.service import read_question
from bot.ask.understand import Context, carried
from bot.deps import Deps
from bot.errors import BackendError
from bot.models import JobState
from bot.render.ask import (
    HELP_LEAD,
    render_drain_offer,
    render_drain_which,
    render_job_choice,
    render_menu,
    render_no_job,
    render_unsure,
    render_which_job,
)
from bot.render.picks import ASK_PICK_ACTION, read_pick
from bot.slack_message import SlackMessage
from handlers import commands
from handlers.events import EVENT_CLAIM_TTL_S
from handlers.registry import Registry
from handlers.reply import Asker, Misread, post_message

log = logging.getLogger(__name__)

_DONE = BoltResponse(status=200, body="")
DM_THREAD = "dm"  # the thread key of a DM's top level: the conversation is the thread
# What a person may add to a question's subtypes: a file shared with the question.
ASKED_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})


class Vocabularies:
    """What the site knows, for reading names, built again only when the inventory changed."""

    def __init__(self) -> None:
        self._key: tuple[int, str, str, tuple[str, ...]] | None = None
        self._vocab = Vocabulary()

    async def get(self, deps: Deps) -> Vocabulary:
        inv = deps.triage.inventory
        await inv.load()
        names = inv.names()
        runs = await _runs(deps)
        key = (len(names), names[0] if names else "", names[-1] if names else "", runs)
        if key != self._key:
            places: dict[str, tuple[str, str]] = {}
            for name in names:
                place = inv.place(name)
                if place is not None:
                    places[name] = (place.rack, place.leaf_switch)
            self._vocab = Vocabulary.build(names, places, runs, deps.regressions.components)
            self._key = key
        return self._vocab


async def _runs(deps: Deps) -> tuple[str, ...]:
    if deps.playground is None:
        return ()
    try:
        catalog = await deps.playground.catalog()
    except BackendError:
        return ()
    return tuple(catalog.runs)


def thread_asker(
    client: AsyncWebClient,
    *,
    team: str,
    channel: str,
    user: str,
    thread_ts: str | None,
    posted: Callable[[str], Awaitable[None]] | None = None,
) -> Asker:
    """An asker whose every answer goes into the question's thread (or the DM); `posted` is
    told each answer's ts as soon as it is out."""

    async def private(message: SlackMessage) -> None:
        sent = await post_message(client, channel, message, thread_ts=thread_ts)
        if posted is not None:
            await posted(sent.ts)

    async def open_view(view: dict[str, Any]) -> dict[str, Any]:
        raise Misread("A form opens only from its command: type `/playground` for it.")

    return Asker(
        user_id=user,
        channel=channel,
        team=team,
        private=private,
        open_view=open_view,
        thread_ts=thread_ts,
        headings=True,
    )


def _intent_of(found: Understanding) -> Intent | None:
    if isinstance(found, Route | MyJob):
        return found.intent
    if isinstance(found, DrainAsk):
        return Intent.NODE_HEALTH
    if isinstance(found, Unsure):
        return found.candidates[0].intent
    return None


async def my_job(deps: Deps, client: AsyncWebClient, asker: Asker) -> None:
    """ "My job": the asker's running one; a choice of several; else the last that finished."""
    scheduler = deps.triage.scheduler
    user = await deps.users.cluster_user(asker.user_id, client)
    if scheduler is None or user is None:
        note = "no scheduler is configured" if scheduler is None else "your cluster user is unknown"
        await asker.private(render_no_job(note))
        return
    try:
        running = [j for j in await scheduler.jobs(user=user) if j.state is JobState.RUNNING]
        last = None if running else await scheduler.last_finished(user)
    except BackendError as exc:
        await asker.private(render_no_job(exc.user_text()))
        return
    if len(running) > 1:
        await asker.private(render_job_choice(sorted(running, key=lambda j: j.start, reverse=True)))
        return
    job = running[0] if running else last
    if job is None:
        await asker.private(render_no_job(f"`{user}` has no running or recent job"))
        return
    await asker.private(render_which_job(job, running=bool(running)))
    await commands.dispatch(deps, client, "/job-slow", job.job_id, asker)


async def act(deps: Deps, client: AsyncWebClient, found: Understanding, asker: Asker) -> None:
    """Answers what the question was read as, through the command table."""
    if isinstance(found, Route):
        await commands.dispatch(deps, client, found.command, found.text, asker)
    elif isinstance(found, MyJob):
        await my_job(deps, client, asker)
    elif isinstance(found, Unsure):
        await asker.private(render_unsure(found.candidates))
    elif isinstance(found, DrainAsk):
        node = found.node
        reason = drain_reason.by_user("asked", "")
        await asker.private(
            render_drain_which(found.entities.nodes)
            if node is None
            else render_drain_offer(node, reason)
        )
    elif isinstance(found, Menu):
        await asker.private(render_menu(HELP_LEAD if found.asked else None))


async def answer(
    deps: Deps,
    client: AsyncWebClient,
    vocabularies: Vocabularies,
    *,
    team: str,
    channel: str,
    user: str,
    text: str,
    reply_in: str | None,
    thread_key: str,
    in_thread: bool,
    also_keys: tuple[str, ...] = (),
    else_key: str | None = None,
) -> Understanding:
    """Reads `text` against the context of `thread_key` (a thread's, always; the top of a
    DM's, only for a follow-up) and answers it in `reply_in`. What it was read as is kept
    under `thread_key`, `also_keys` and every answer posted at the top of a DM, so a reply
    in the thread of the question or of an answer goes on from it; a thread with nothing kept
    reads against `else_key` (a DM's top) as a message there would."""
    threads = deps.threads
    recalled = await threads.recall(team, channel, thread_key) if threads else None
    if recalled is None and else_key is not None and threads is not None:
        # A DM thread of an answer not kept (a slow command's own post): read as the DM's top.
        recalled, in_thread = await threads.recall(team, channel, else_key), False
    context = carried(text, recalled, in_thread=in_thread)
    vocab = await vocabularies.get(deps)
    found = await read_question(
        text, vocab, context, deps.picker, deadline_s=deps.settings.ask_model_deadline_s
    )
    deps.telemetry.commands.labels(command=f"ask:{type(found).__name__.lower()}").inc()
    intent = _intent_of(found)
    kept: Context | None = None
    if threads is not None and intent is not None and not isinstance(found, Menu):
        entities = found.candidates[0].entities if isinstance(found, Unsure) else found.entities
        kept = Context(intent, entities)
        # Kept before answering: a reply sent once the answer shows finds it.
        for key in dict.fromkeys((thread_key, *also_keys)):
            await threads.remember(team, channel, key, kept)

    async def answered(ts: str) -> None:
        # At the top of a DM each answer starts a thread of its own that goes on from it.
        if threads is not None and kept is not None and reply_in is None:
            await threads.remember(team, channel, ts, kept)

    asker = thread_asker(
        client, team=team, channel=channel, user=user, thread_ts=reply_in, posted=answered
    )
    await act(deps, client, found, asker)
    return found


def _asked(event: dict[str, Any], bot_user: str | None) -> bool:
    """A person's question: not the bot's own message, not an edit or a bot's post."""
    return (
        event.get("subtype") in ASKED_SUBTYPES
        and not event.get("bot_id")
        and bool(event.get("user"))
        and event.get("user") != bot_user
        and bool(str(event.get("text") or "").strip())
    )


def register(reg: Registry, deps: Deps) -> None:
    vocabularies = Vocabularies()  # one bot's: another bot in the process has its own fleet
    reg.event("app_mention", partial(on_mention, deps, vocabularies))
    reg.event("message", partial(on_dm, deps, vocabularies), before_ack=partial(dm_only, deps))
    reg.action(ASK_PICK_ACTION, partial(on_pick, deps))


def _team(body: dict[str, Any], event: dict[str, Any]) -> str:
    return str(body.get("team_id") or event.get("team") or "")


async def on_mention(
    deps: Deps,
    vocabularies: Vocabularies,
    event: dict[str, Any],
    body: dict[str, Any],
    context: Any,
    client: AsyncWebClient,
) -> None:
    if not _asked(event, context.get("bot_user_id")):
        return
    channel = str(event["channel"])
    thread = str(event.get("thread_ts") or event["ts"])
    await answer(
        deps,
        client,
        vocabularies,
        team=_team(body, event),
        channel=channel,
        user=str(event["user"]),
        text=str(event.get("text") or ""),
        reply_in=thread,
        thread_key=thread,
        in_thread=bool(event.get("thread_ts")),  # a new top-level mention starts afresh
    )


async def dm_only(
    deps: Deps, body: dict[str, Any], context: Any, next: Callable[[], Awaitable[Any]]
) -> BoltResponse | None:
    """Before the ack: only a person's question in a DM, claimed once across replicas."""
    event = body.get("event") or {}
    if event.get("channel_type") != "im" or not _asked(event, context.get("bot_user_id")):
        return _DONE  # a channel's message, an edit, the bot's own: nothing to answer
    # Message events pass the dedup middleware (handlers/events.py): claimed here.
    event_id = body.get("event_id")
    team = str(body.get("team_id", ""))
    if event_id and not await deps.store.claim(team, "event", str(event_id), EVENT_CLAIM_TTL_S):
        deps.telemetry.duplicate_events.inc()
        return _DONE
    await next()
    return None


async def on_dm(
    deps: Deps,
    vocabularies: Vocabularies,
    event: dict[str, Any],
    body: dict[str, Any],
    client: AsyncWebClient,
) -> None:
    channel = str(event["channel"])
    thread = str(event["thread_ts"]) if event.get("thread_ts") else None
    await answer(
        deps,
        client,
        vocabularies,
        team=_team(body, event),
        channel=channel,
        user=str(event["user"]),
        text=str(event.get("text") or ""),
        reply_in=thread,
        thread_key=thread or DM_THREAD,
        in_thread=thread is not None,
        # At the top of a DM: its question's own thread goes on from it too.
        also_keys=() if thread else (str(event["ts"]),),
        else_key=DM_THREAD if thread else None,
    )


async def on_pick(deps: Deps, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
    await ack()
    picked = read_pick(str(body["actions"][0].get("value", "")))
    channel = str((body.get("channel") or {}).get("id") or body["user"]["id"])
    message = body.get("message") or {}
    thread = message.get("thread_ts")
    asker = thread_asker(
        client,
        team=str((body.get("team") or {}).get("id") or ""),
        channel=channel,
        user=str(body["user"]["id"]),
        thread_ts=str(thread) if thread else None,
    )
    if picked is None:
        await asker.private(render_menu("That button is from another version of me."))
        return
    if picked == ("/job-slow", ""):
        # "why my job is slow": the asker's job, read as a question about it is.
        await my_job(deps, client, asker)
        return
    await commands.dispatch(deps, client, picked[0], picked[1], asker)
