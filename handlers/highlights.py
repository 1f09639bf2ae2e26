"""The :meow_party: highlights in Slack: reaction and message events, and `/highlights`.

Reaction events are stored before Slack gets its 200 (listener middleware, `before_ack`): when
Redis is down Bolt answers 500 and Slack delivers the event again later, so nothing is lost;
the store's claim on the event id drops the retries of a delivery that did get stored. Reading
the message (excerpt, thread, permalink) happens after the ack, once per message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps, HighlightsService
from bot.highlights.models import Reaction
from bot.highlights.rules import base_emoji
from bot.highlights.service import Outcome, Recorded
from bot.render.blocks import error as error_message
from bot.render.blocks import success as success_message
from bot.render.charts import highlights_chart
from bot.render.highlights import render_stats, render_week
from handlers.registry import Registry
from handlers.reply import Asker, Chart, Misread, post_message, upload_chart

log = logging.getLogger(__name__)

SUBCOMMANDS = ("", "last-week", "stats", "opt-out", "opt-in")
_DONE = BoltResponse(status=200, body="")


def reaction_of(body: dict[str, Any]) -> Reaction | None:
    """The domain's Reaction from a reaction_added / reaction_removed event; None for files."""
    event = body.get("event") or {}
    item = event.get("item") or {}
    if item.get("type") != "message" or not item.get("channel") or not item.get("ts"):
        return None
    return Reaction(
        team=str(body.get("team_id") or event.get("team") or ""),
        channel=str(item["channel"]),
        ts=str(item["ts"]),
        user=str(event.get("user") or ""),
        author=str(event["item_user"]) if event.get("item_user") else None,
        emoji=base_emoji(str(event.get("reaction") or "")),
        event_ts=str(event.get("event_ts") or "0"),
        added=event.get("type") == "reaction_added",
        event_id=str(body["event_id"]) if body.get("event_id") else None,
    )


def register(reg: Registry, deps: Deps) -> None:
    async def store_reaction(
        body: dict[str, Any], context: Any, next: Callable[[], Awaitable[Any]]
    ) -> BoltResponse | None:
        hl = deps.highlights.hl
        reaction = reaction_of(body)
        if hl is None or reaction is None or not reaction.user:
            return _DONE
        recorded = await hl.record(reaction)  # raises: Bolt answers 500, Slack retries
        if recorded.outcome is Outcome.DUPLICATE:
            deps.telemetry.duplicate_events.inc()
        if not recorded.needs_enrich:
            return _DONE
        context["highlight"] = recorded
        await next()
        return None

    async def on_reaction(body: dict[str, Any], context: dict[str, Any]) -> None:
        hl = deps.highlights.hl
        recorded: Recorded | None = context.get("highlight")
        reaction = reaction_of(body)
        if hl is None or recorded is None or reaction is None:
            return
        try:
            await hl.enrich(reaction.team, reaction.channel, reaction.ts)
        except Exception:  # read again when a digest needs it
            log.warning("could not read a highlighted message", exc_info=True)

    async def store_message_change(
        body: dict[str, Any], context: Any, next: Callable[[], Awaitable[Any]]
    ) -> BoltResponse | None:
        hl = deps.highlights.hl
        event = body.get("event") or {}
        subtype = event.get("subtype")
        if subtype not in ("message_changed", "message_deleted"):
            # Not an edit: the next message listener decides (handlers/ask.py, a DM question).
            return None
        if hl is None:
            return _DONE
        team = str(body.get("team_id") or "")
        channel = str(event.get("channel") or "")
        if subtype == "message_deleted" and event.get("deleted_ts"):
            await hl.deleted(team, channel, str(event["deleted_ts"]))
        elif subtype == "message_changed":
            msg = event.get("message") or {}
            edited = (msg.get("edited") or {}).get("ts") or event.get("event_ts") or "0"
            if msg.get("ts"):
                await hl.edited(
                    team, channel, str(msg["ts"]), str(msg.get("text") or ""), str(edited)
                )
        return _DONE

    async def on_message(body: dict[str, Any]) -> None:
        return None  # everything happened before the ack

    reg.event("reaction_added", on_reaction, before_ack=store_reaction)
    reg.event("reaction_removed", on_reaction, before_ack=store_reaction)
    reg.event("message", on_message, before_ack=store_message_change)


async def command(
    service: HighlightsService, client: AsyncWebClient, text: str, asker: Asker
) -> None:
    """`/highlights [last-week | stats | opt-out | opt-in]` asked in the asker's channel."""
    private, user_id, channel, team = asker.private, asker.user_id, asker.channel, asker.team
    hl = service.hl
    if hl is None:
        await private(error_message("Highlights need shared state: set REDIS_URL."))
        return
    words = text.split()
    sub = words[0].lower() if words else ""
    cfg = hl.cfg
    emoji, zone = cfg.emoji[0], cfg.schedule.zone
    if sub not in SUBCOMMANDS or len(words) > 1:
        raise Misread(f"I don't know `{' '.join(words)[:50]}`.")
    if sub in ("opt-out", "opt-in"):
        await hl.set_opt_out(team, user_id, sub == "opt-out")
        await private(
            success_message(
                "Your messages will no longer be shown in highlights; "
                "`/highlights opt-in` undoes it."
                if sub == "opt-out"
                else "Your messages may be shown in highlights again."
            )
        )
        return
    if sub in ("", "last-week"):
        now = hl.clock()
        week = cfg.schedule.current_week(now) if not sub else cfg.schedule.last_week(now)
        digest, names = await hl.digest(team, week, channel)
        title = "This week's highlights so far" if not sub else "Last week's highlights"
        await private(render_week(digest, names, emoji=emoji, zone=zone, title=title))
        return
    stats, names = await hl.stats(team, channel)
    now = hl.clock()
    message = render_stats(stats, names, emoji=emoji, zone=zone, now=now)
    if stats.total == 0:
        # Nothing to show the channel: the sentence to the asker, and no blank chart.
        await private(message)
        return
    try:
        posted = await post_message(client, channel, message, thread_ts=asker.thread_ts)
    except SlackApiError as exc:
        code = exc.response.get("error", "unknown")
        await private(message)
        await private(error_message(f"I cannot post in this channel ({code}): no chart here."))
        return
    chart = Chart(
        functools.partial(
            highlights_chart, stats.weeks, title="Highlights per week", now=now, zone=zone
        ),
        filename="highlights-per-week.png",
        title="Highlights per week",
    )
    # The stats stand in the channel already: a chart Slack will not take is only logged.
    thread = asker.thread_ts or posted.ts
    await upload_chart(client, service.cpu, channel, thread, chart, quiet=True)
