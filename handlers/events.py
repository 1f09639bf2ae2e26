"""Events API plumbing: each delivery is processed once, however often Slack retries it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.deps import Deps

log = logging.getLogger(__name__)

# Slack retries for up to about an hour and a half; keep the claim a little longer.
EVENT_CLAIM_TTL_S = 2 * 3600
# Events whose handling is idempotent by itself and claims the delivery in the same atomic
# write as its effect (bot/backends/highlight_store.py): claiming here first would lose the
# event if Redis failed between the claim and the write.
SELF_DEDUPLICATING = frozenset({"reaction_added", "reaction_removed", "message"})


class _Dedup(AsyncMiddleware):
    """A middleware class, not a function: Bolt inspects a function middleware's argument
    names on every request, a cost every request paid here."""

    def __init__(self, run: Callable[..., Awaitable[BoltResponse | None]]) -> None:
        self.run = run

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[Any]],
    ) -> BoltResponse | None:
        return await self.run(req.body, req, resp, next)

    @property
    def name(self) -> str:
        return "meowbot.dedup"


def dedup_middleware(deps: Deps) -> AsyncMiddleware:
    async def dedup(
        body: dict[str, Any],
        request: AsyncBoltRequest,
        response: BoltResponse,
        next: Callable[[], Awaitable[None]],
    ) -> BoltResponse | None:
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if not event_id or (body.get("event") or {}).get("type") in SELF_DEDUPLICATING:
            await next()
            return response
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
        return response

    return _Dedup(dedup)
