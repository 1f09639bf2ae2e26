"""/playground: the modal, the side-by-side streamed message, Cancel, Re-run, Watch.

The command acks at once; the modal opens within the trigger's 3 s before any discovery
and is filled with `views.update` once the checkpoints are known.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.playground.catalog import newer_than
from bot.playground.models import Checkpoint, Output, Prompt, Watch
from bot.playground.naming import valid_run
from bot.playground.service import Playground, PostWatch, Publish, UserError
from bot.render.blocks import error as error_message
from bot.render.blocks import success
from bot.render.playground import (
    CANCEL_ACTION,
    MODAL_CALLBACK,
    RERUN_ACTION,
    RUN_PICK_ACTION,
    WATCH_ACTION,
    parse_submission,
    render_full_text,
    render_modal,
    render_session,
    render_watch_answer,
    render_watches,
)
from bot.slack_message import SlackMessage
from handlers.registry import Registry
from handlers.reply import (
    Asker,
    Misread,
    OpenView,
    Posted,
    Private,
    post_ephemeral,
    post_line,
    post_message,
    redraw_message,
    respond_message,
    update_modal,
    upload_file,
)

log = logging.getLogger(__name__)

NOT_CONFIGURED = (
    "No checkpoint server is configured (set PLAYGROUND_ENDPOINTS). To try the playground "
    "on this machine, start a tiny run and its server with one command: "
    "`meowbot demo-checkpoints --serve`, then set the PLAYGROUND_ENDPOINTS it prints."
)
FULL_TEXT_CHARS = 39_000


def opens_form(deps: Deps, text: str) -> bool:
    """`/playground` alone answers with the form, where a checkpoint server is configured."""
    return not text.split() and deps.playground is not None


async def command(pg: Playground | None, client: AsyncWebClient, text: str, asker: Asker) -> None:
    """`/playground [run prompt | watches | unwatch <id>]` asked in the asker's channel."""
    private, user_id, channel = asker.private, asker.user_id, asker.channel
    if pg is None:
        await private(error_message(NOT_CONFIGURED))
        return
    words = text.split(maxsplit=1)
    if not words:
        await open_modal(pg, client, open_view=asker.open_view, channel=channel)
        return
    verb = words[0].lower()
    if verb == "watches":
        mine = [w for w in await pg.store.watches() if w.user_id == user_id]
        await private(render_watches(mine))
        return
    if verb == "unwatch":
        wid = words[1].strip() if len(words) > 1 else ""
        watch = next((w for w in await pg.store.watches() if w.id == wid), None)
        if watch is None or watch.user_id != user_id:
            await private(
                error_message(f"You have no watch `{wid[:20]}`; `/playground watches` lists yours.")
            )
            return
        await pg.store.remove_watch(wid)
        await private(success(f"Stopped watch `{wid}` on run `{watch.prompt.run}`."))
        return
    run = words[0]
    if len(words) < 2:
        hint = f"`/playground {run[:40]} Once upon a time`"
        await private(
            error_message(
                f"Add a prompt after the run: {hint}. `/playground` alone opens the form."
            )
        )
        return
    if not valid_run(run):
        await private(
            error_message("A run name is letters, digits and `._/@:+-`, like `tiny-gpt`.")
        )
        return
    steps, rest = _steps(words[1])
    if not rest:
        raise Misread("Add a prompt after the steps: `/playground tiny-gpt --steps 400,500 Hi`.")
    cfg = pg.cfg
    prompt = Prompt(
        run=run, prompt=rest[:8000], max_tokens=cfg.max_tokens, temperature=cfg.temperature
    )
    await start_chosen(
        pg,
        client,
        prompt,
        steps,
        user_id=user_id,
        channel=channel,
        private=private,
        thread_ts=asker.thread_ts,
    )


def _steps(text: str) -> tuple[list[int] | None, str]:
    """`--steps 400,500 the prompt` -> ([400, 500], "the prompt"); without it, (None, text)."""
    words = text.split(maxsplit=2)
    if not words or words[0] != "--steps":
        return None, text
    if len(words) < 2 or not all(p.isdigit() for p in words[1].split(",")):
        raise Misread("`--steps` takes checkpoint steps separated by commas: `--steps 400,500`.")
    return [int(p) for p in words[1].split(",")], words[2] if len(words) > 2 else ""


async def start_chosen(
    pg: Playground,
    client: AsyncWebClient,
    prompt: Prompt,
    steps: Sequence[int] | None,
    *,
    user_id: str,
    channel: str,
    private: Private,
    thread_ts: str | None = None,
) -> None:
    """Starts `prompt` on the run's checkpoints at `steps` (None: the newest two), or tells the
    asker why not: the command and the form both ask this way."""
    catalog = await pg.catalog()
    picked = pg.choose(catalog, prompt.run, steps)
    if isinstance(picked, UserError):
        await private(error_message(picked.sentence))
        return
    await start(
        pg,
        client,
        prompt,
        picked,
        user_id=user_id,
        channel=channel,
        thread_ts=thread_ts,
        private=private,
        down=catalog.down,
    )


async def open_modal(
    pg: Playground, client: AsyncWebClient, *, open_view: OpenView, channel: str
) -> None:
    meta = json.dumps({"channel": channel})
    # A form must open within 3 s of the click (the trigger's life): open first, discover after.
    view = await open_view(render_modal(None, metadata=meta))
    catalog = await pg.catalog()
    await update_modal(
        client,
        view["id"],
        render_modal(
            catalog,
            metadata=meta,
            max_checkpoints=pg.cfg.max_checkpoints,
            max_tokens=pg.cfg.max_tokens,
            temperature=pg.cfg.temperature,
        ),
        view_hash=view.get("hash"),
    )


async def start(
    pg: Playground,
    client: AsyncWebClient,
    prompt: Prompt,
    checkpoints: list[Checkpoint],
    *,
    user_id: str,
    channel: str,
    thread_ts: str | None,
    private: Private,
    down: Sequence[str] = (),
) -> None:
    """Posts the side-by-side message, streams into it, and puts long answers in the thread:
    one request at a time per person (the store's limits)."""
    refused = await pg.store.acquire(user_id, pg.limits)
    if refused is not None:
        await private(error_message(refused.sentence))
        return
    try:
        await _stream(
            pg,
            client,
            prompt,
            checkpoints,
            user_id=user_id,
            channel=channel,
            thread_ts=thread_ts,
            private=private,
            down=down,
        )
    finally:
        await pg.store.release(user_id)


SessionMessage = Callable[[list[Output], bool], SlackMessage]


async def _stream(
    pg: Playground,
    client: AsyncWebClient,
    prompt: Prompt,
    checkpoints: list[Checkpoint],
    *,
    user_id: str,
    channel: str,
    thread_ts: str | None,
    private: Private,
    down: Sequence[str],
) -> None:
    sid = secrets.token_hex(8)
    message = _session_message(sid, prompt, user_id, pg.cfg.section_chars, down)
    first = message([Output(checkpoint=c) for c in checkpoints], False)
    posted = await _post_first(client, channel, first, thread_ts, private)
    if posted is None:
        return
    posted_at = time.monotonic()
    ts, channel = posted.ts, posted.channel
    session = {
        "prompt": prompt.model_dump(mode="json"),
        "steps": [c.step for c in checkpoints],
        "channel": channel,
        "ts": thread_ts or ts,
        "user": user_id,
    }
    await pg.store.save_session(sid, json.dumps(session))
    publish = _publisher(client, channel, ts, message)
    outputs = await pg.stream_all(sid, prompt, checkpoints, publish, last_call=posted_at)
    await _post_long_answers(
        client, pg.cfg.section_chars, prompt, outputs, channel, thread_ts or ts
    )


def _session_message(
    sid: str, prompt: Prompt, user_id: str, section_chars: int, down: Sequence[str]
) -> SessionMessage:
    def message(outputs: list[Output], final: bool) -> SlackMessage:
        return render_session(
            sid,
            prompt,
            outputs,
            user_id=user_id,
            final=final,
            section_chars=section_chars,
            down=down,
        )

    return message


async def _post_first(
    client: AsyncWebClient,
    channel: str,
    first: SlackMessage,
    thread_ts: str | None,
    private: Private,
) -> Posted | None:
    """The side-by-side message posted, or None (the asker told why) where the bot may not."""
    try:
        return await post_message(client, channel, first, thread_ts=thread_ts)
    except SlackApiError as exc:
        code = exc.response.get("error", "unknown")
        await private(
            error_message(
                f"I cannot post in this channel ({code}): invite me, "
                "or use the playground in a DM with me."
            )
        )
        return None


def _publisher(client: AsyncWebClient, channel: str, ts: str, message: SessionMessage) -> Publish:
    async def publish(outputs: list[Output], final: bool) -> None:
        try:
            await redraw_message(client, channel, ts, message(outputs, final))
        except SlackApiError as exc:  # the next edit carries everything anyway
            log.warning("playground update failed", extra={"error": exc.response.get("error")})

    return publish


async def _post_long_answers(
    client: AsyncWebClient,
    section_chars: int,
    prompt: Prompt,
    outputs: list[Output],
    channel: str,
    thread_ts: str,
) -> None:
    """Each answer longer than its section, whole, in the thread (a file past a message's)."""
    for o in outputs:
        if len(o.text) <= section_chars:
            continue
        if len(o.text) > FULL_TEXT_CHARS:
            await upload_file(
                client,
                channel,
                thread_ts,
                o.text,
                filename=f"{prompt.run}-step-{o.checkpoint.step}.txt",
                title=f"{prompt.run} {o.checkpoint.label}: the whole answer",
            )
        else:
            await post_line(client, channel, render_full_text(o), thread_ts=thread_ts)


async def _session(pg: Playground, sid: str) -> dict[str, Any] | None:
    raw = await pg.store.session(sid)
    return dict(json.loads(raw)) if raw else None


def watch_poster(client: AsyncWebClient) -> PostWatch:
    async def post(watch: Watch, out: Output) -> None:
        await post_message(
            client, watch.channel, render_watch_answer(watch, out), thread_ts=watch.thread_ts
        )

    return post


def register(reg: Registry, deps: Deps) -> None:
    reg.action(CANCEL_ACTION, partial(on_cancel, deps))
    reg.action(RERUN_ACTION, partial(on_rerun, deps))
    reg.action(WATCH_ACTION, partial(on_watch, deps))
    reg.action(RUN_PICK_ACTION, partial(on_run_pick, deps))
    reg.view(MODAL_CALLBACK, partial(on_submit, deps))


async def _tell(respond: AsyncRespond, text: str) -> None:
    await respond(response_type="ephemeral", replace_original=False, text=text)


def _sid_of(body: dict[str, Any]) -> str:
    return str((body.get("actions") or [{}])[0].get("value") or "")


def _user_of(body: dict[str, Any]) -> str:
    return str(body.get("user", {}).get("id", ""))


async def _session_or_say(
    deps: Deps, body: dict[str, Any], respond: AsyncRespond
) -> tuple[Playground, dict[str, Any]] | None:
    """The playground and the pressed message's request, or None (said when expired)."""
    pg = deps.playground
    if pg is None:
        return None
    session = await _session(pg, _sid_of(body))
    if session is None:
        await _tell(respond, "That playground request expired; ask it again.")
        return None
    return pg, session


async def on_cancel(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    pg = deps.playground
    if pg is None:
        return
    session = await _session(pg, _sid_of(body))
    user = _user_of(body)
    if session is None:
        return await _tell(respond, "That playground request is over; nothing to cancel.")
    if session["user"] != user and not await deps.authz.allowed(user, client):
        return await _tell(respond, "Only the person who asked (or an admin) may cancel it.")
    await pg.store.cancel(_sid_of(body))
    await _tell(respond, "Cancelling: the streams stop within a second.")


async def on_rerun(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    found = await _session_or_say(deps, body, respond)
    if found is None:
        return
    pg, session = found
    prompt = Prompt.model_validate(session["prompt"])
    catalog = await pg.catalog(fresh=True)
    newer = newer_than(catalog.run(prompt.run), max(session["steps"]))
    if not newer:
        return await _tell(
            respond,
            f"No checkpoint of `{prompt.run}` is newer than step {max(session['steps']):,} yet.",
        )
    picked = sorted(newer, key=lambda c: -c.step)[: pg.cfg.max_checkpoints]

    async def private(msg: SlackMessage) -> None:
        await respond_message(respond, msg, replace_original=False)

    await start(
        pg,
        client,
        prompt,
        picked,
        user_id=_user_of(body),
        channel=session["channel"],
        thread_ts=session["ts"],
        private=private,
    )


async def on_watch(deps: Deps, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
    await ack()
    found = await _session_or_say(deps, body, respond)
    if found is None:
        return
    pg, session = found
    user = _user_of(body)
    mine = [w for w in await pg.store.watches() if w.user_id == user]
    if len(mine) >= pg.cfg.watch_limit:
        return await _tell(
            respond,
            f"You watch {len(mine)} prompts already, the limit: "
            "`/playground unwatch <id>` one first.",
        )
    prompt = Prompt.model_validate(session["prompt"])
    watch = Watch(
        id=secrets.token_hex(4),
        user_id=user,
        prompt=prompt,
        channel=session["channel"],
        thread_ts=session["ts"],
        last_step=max(session["steps"]),
        created=datetime.now(UTC),
    )
    await pg.store.add_watch(watch)
    await _tell(
        respond,
        f"Watching `{prompt.run}` (watch `{watch.id}`): each new checkpoint "
        "answers this prompt in the thread. `/playground unwatch "
        f"{watch.id}` stops it.",
    )


async def on_run_pick(
    deps: Deps, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient
) -> None:
    await ack()
    pg = deps.playground
    if pg is None:
        return
    view = body.get("view") or {}
    run = str(((body.get("actions") or [{}])[0].get("selected_option") or {}).get("value"))
    await update_modal(
        client,
        view.get("id"),
        render_modal(
            await pg.catalog(),
            metadata=view.get("private_metadata", "{}"),
            run=run,
            max_checkpoints=pg.cfg.max_checkpoints,
            max_tokens=pg.cfg.max_tokens,
            temperature=pg.cfg.temperature,
        ),
        view_hash=view.get("hash"),
    )


async def on_submit(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    view: dict[str, Any],
    client: AsyncWebClient,
) -> None:
    pg = deps.playground
    if pg is None:
        await ack()
        return
    parsed = parse_submission(
        view,
        max_tokens_cap=pg.cfg.max_tokens_cap,
        max_tokens=pg.cfg.max_tokens,
        temperature=pg.cfg.temperature,
    )
    if isinstance(parsed, dict):
        await ack(response_action="errors", errors=parsed)
        return
    await ack()
    _, steps, prompt = parsed  # the prompt names the run
    user = str(body["user"]["id"])
    channel = str(json.loads(view.get("private_metadata") or "{}").get("channel") or user)

    async def private(msg: SlackMessage) -> None:
        await post_ephemeral(client, channel, user, msg)

    await start_chosen(pg, client, prompt, steps, user_id=user, channel=channel, private=private)
