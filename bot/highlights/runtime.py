"""The weekly digest running: every replica's scheduler fires, one digest a week gets posted.

Exactly once, whatever the number of replicas:

1. a replica whose week is already marked `posted` does nothing;
2. otherwise it takes the lock `digest:<channel>` (Redis, with a fencing token: the same lock
   code as the alert notifier's) and looks again under the lock;
3. it marks the week `posting` (a fenced write), posts, then marks it `posted:<ts>` (fenced).

A replica that dies between 3's two marks leaves `posting` behind; whoever takes the lock next
(after its TTL) looks for the digest in the channel, by the week carried in the message's
metadata, before posting: a crash after the post does not post again, a crash before it posts
on restart. A digest missed while no replica ran is posted late, up to `catch_up_hours`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.highlights.ports import DigestPoster, DigestRenderer
from bot.highlights.schedule import Week
from bot.highlights.service import Highlights

log = logging.getLogger(__name__)

LOCK_TTL_MS = 120_000
TICK_S = 30.0
POSTED = "posted"
POSTING = "posting"


@dataclass
class DigestRunner:
    hl: Highlights
    poster: DigestPoster
    team: Callable[[], Awaitable[str]]
    render: DigestRenderer  # the digest's messages, built at the edge
    lock_ttl_ms: int = LOCK_TTL_MS
    tick_s: float = TICK_S

    async def post_digest(self, team: str, channel: str, week: Week, *, tag: bool) -> str | None:
        """Builds and posts one digest (the rest in its thread); None when an empty week is
        configured to post nothing."""
        cfg = self.hl.cfg
        own_only = channel in cfg.private_opt_in  # a private channel's own digest
        digest, names = await self.hl.digest(team, week, channel, own_only=own_only)
        if digest.empty and cfg.empty_week == "skip":
            return None
        main, replies = self.render(digest, names, emoji=cfg.emoji[0], zone=cfg.schedule.zone)
        ts = await self.poster.post(channel, main, week=week.id if tag else None)
        for reply in replies:
            await self.poster.post(channel, reply, thread_ts=ts)
        return ts

    def due(self, now: datetime) -> Week | None:
        """The week whose digest is due at `now`, if it is not too late to post it."""
        schedule = self.hl.cfg.schedule
        fire = schedule.last_fire(now)
        if now - fire > timedelta(hours=self.hl.cfg.catch_up_hours):
            return None
        return schedule.week_ending(fire)

    async def run_once(self) -> list[str]:
        """One look at the schedule; returns the ts of the digests this replica posted."""
        targets = self.hl.cfg.digest_targets()
        week = self.due(self.hl.clock())
        if not targets or week is None:
            return []
        team = await self.team()
        posted: list[str] = []
        for channel in targets:
            ts = await self.once(team, channel, week)
            if ts:
                posted.append(ts)
        return posted

    async def once(self, team: str, channel: str, week: Week) -> str | None:
        store = self.hl.store
        state = await store.digest_state(team, channel, week.id)
        if state and state.startswith(POSTED):
            return None
        fence = await store.acquire(team, f"digest:{channel}", self.lock_ttl_ms)
        if fence is None:
            return None  # another replica is at it
        try:
            state = await store.digest_state(team, channel, week.id)
            if state and state.startswith(POSTED):
                return None
            if state == POSTING:
                # The last holder died mid-way: did its post reach Slack?
                found = await self.poster.find_digest(channel, week.id, week.end)
                if found:
                    await store.set_digest_state(team, channel, week.id, f"{POSTED}:{found}", fence)
                    log.info("digest found already posted", extra={"week": week.id})
                    return None
            await store.set_digest_state(team, channel, week.id, POSTING, fence)
            ts = await self.post_digest(team, channel, week, tag=True)
            await store.set_digest_state(team, channel, week.id, f"{POSTED}:{ts or '-'}", fence)
            log.info("digest posted", extra={"week": week.id, "channel": channel, "ts": ts})
            return ts
        finally:
            with contextlib.suppress(Exception):
                await store.release(team, fence)

    async def loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception:  # Redis or Slack down: the next tick tries again
                log.exception("digest run failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.tick_s)
