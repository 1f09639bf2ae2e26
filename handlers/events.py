"""Events API plumbing: each delivery is processed once, however often Slack retries it."""

from __future__ import annotations

import logging

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.deps import Deps
from handlers.registry import Middleware, Next

log = logging.getLogger(__name__)

# Slack retries for up to about an hour and a half; keep the claim a little longer.
EVENT_CLAIM_TTL_S = 2 * 3600
# Events whose handling is idempotent by itself and claims the delivery in the same atomic
# write as its effect (bot/backends/highlight_store.py): claiming here first would lose the
# event if Redis failed between the claim and the write.
SELF_DEDUPLICATING = frozenset({"reaction_added", "reaction_removed", "message"})


def dedup_middleware(deps: Deps) -> Middleware:
    async def dedup(request: AsyncBoltRequest, next: Next) -> BoltResponse | None:
        body = request.body
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if not event_id or (body.get("event") or {}).get("type") in SELF_DEDUPLICATING:
            await next()
            return None  # as Bolt's own middleware before it: next() carries on
        team = str(body.get("team_id", ""))
        # If the store is down this raises, Bolt answers 500 and Slack retries later, which
        # is what we want: the event is then processed once the store is back.
        first = await deps.store.claim(team, "event", str(event_id), EVENT_CLAIM_TTL_S)
        if not first:
            deps.telemetry.duplicate_events.inc()
            retry = request.headers.get("x-slack-retry-num", ["0"])[0]
            log.info("duplicate event dropped", extra={"event_id": event_id, "retry": retry})
            return BoltResponse(status=200, body="")
        await next()
        return None

    return Middleware(dedup, "meowbot.dedup")
