"""The weekly regressions post: once a week, the last seven days' answer in a channel.

Every replica's loop looks at the schedule; the first to claim the week's firing in the shared
store posts it, the others see the claim and do nothing. A firing missed while no replica ran
is posted late, up to `catch_up`. The claim is taken before the post: a post that fails (Slack
or the history down) is logged and that week's is not tried again, so a flapping backend
cannot post the same week twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.highlights.schedule import DigestSchedule
from bot.ports import StateStore
from bot.regressions.models import RegressionReport
from bot.regressions.ports import FleetHistory
from bot.regressions.service import Compute, find_regressions

log = logging.getLogger(__name__)

WEEK = timedelta(days=7)
CLAIM_KIND = "regressions-weekly"
CLAIM_TTL_S = 8 * 86400  # longer than a week: a replica started late still sees the claim
TEAM = "-"  # the claim is the fleet's, whatever the workspace


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class WeeklyRegressions:
    history: FleetHistory
    components: tuple[str, ...]
    schedule: DigestSchedule
    claims: StateStore
    post: Callable[[RegressionReport], Awaitable[None]]
    """Posts the answer, its detail and chart (built at the edge)."""
    clock: Callable[[], datetime] = field(default=_now)
    compute: Compute | None = None
    """Runs the statistics off the event loop (`find_regressions`)."""
    catch_up: timedelta = timedelta(hours=6)
    tick_s: float = 60.0

    def due(self, now: datetime) -> datetime | None:
        """The firing due at `now`, unless it is too late to post it."""
        fire = self.schedule.last_fire(now)
        return fire if now - fire <= self.catch_up else None

    async def run_once(self) -> bool:
        """One look at the schedule; True when this replica posted the week's answer."""
        fire = self.due(self.clock())
        if fire is None:
            return False
        if not await self.claims.claim(TEAM, CLAIM_KIND, fire.isoformat(), CLAIM_TTL_S):
            return False
        report = await find_regressions(
            self.history, self.components, start=fire - WEEK, end=fire, compute=self.compute
        )
        await self.post(report)
        log.info("weekly regressions posted", extra={"week_end": fire.isoformat()})
        return True

    async def loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception:  # the history, Redis or Slack down: logged; next week's comes
                log.exception("weekly regressions failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.tick_s)
