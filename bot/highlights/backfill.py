"""`meowbot backfill-highlights`: existing reactions recorded from the channels' history.

Walks `conversations.history` from `--since` (newest first, a page at a time) of the public
channels the bot is in, or of those named, and the replies of every thread it meets, recording
each tracked reaction with the same rules as the live events. After every page its cursor and
counts are saved in Redis, so an interrupted run resumes where it stopped (the run is named by
its `--since` date). Rate limits: a pause between calls (`backfill_pace_s`; an internal app has
Tier 3, about 50 calls a minute, a distributed app far less), and 429s waited out by
slack_sdk's retry handler with Retry-After.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot import ticks
from bot.highlights.models import ChannelInfo, MessageInfo, Reaction, Visibility
from bot.highlights.ports import HistoryWalker, ProgressStore
from bot.highlights.rules import base_emoji, is_tracked
from bot.highlights.service import Highlights, Outcome


@dataclass
class Progress:
    since: datetime
    channels: int = 0
    index: int = 0  # channels finished
    channel: str = ""
    scanned: int = 0
    found: int = 0
    reached: float | None = None  # ts of the oldest message read in the current channel
    started: float = field(default_factory=lambda: ticks.now())  # when the walk began
    resumed: bool = False

    def fraction(self, now: datetime) -> float:
        if not self.channels:
            return 1.0
        span = max(now.timestamp() - self.since.timestamp(), 1.0)
        inside = 0.0 if self.reached is None else (now.timestamp() - self.reached) / span
        return min(1.0, (self.index + min(max(inside, 0.0), 1.0)) / self.channels)

    def eta_s(self, now: datetime) -> float | None:
        done = self.fraction(now)
        elapsed = ticks.since(self.started)
        if done <= 0.0 or elapsed <= 0.0:
            return None
        return elapsed * (1.0 - done) / done

    def line(self, now: datetime) -> str:
        eta = self.eta_s(now)
        when = "unknown" if eta is None else f"{eta / 60:.0f} min" if eta >= 90 else f"{eta:.0f} s"
        return (
            f"backfill: {self.channel} ({self.index + 1}/{self.channels}): "
            f"{self.scanned:,} messages scanned, {self.found:,} highlights found, ETA {when}"
        )


def _tracked_reactions(m: dict[str, Any], emoji: Sequence[str]) -> list[dict[str, Any]]:
    return [r for r in m.get("reactions") or [] if is_tracked(str(r.get("name", "")), emoji)]


async def record_message(
    hl: Highlights, walker: HistoryWalker, team: str, channel: str, m: dict[str, Any]
) -> bool:
    """Records the tracked reactions of one message; True when it became a new highlight."""
    reactions = _tracked_reactions(m, hl.cfg.emoji)
    if not reactions or not m.get("ts"):
        return False
    ts = str(m["ts"])
    if any(int(r.get("count", 0)) > len(r.get("users") or []) for r in reactions):
        # History lists only some of the people on a busy reaction; reactions.get lists all.
        reactions = _tracked_reactions(
            {"reactions": await walker.reactions(channel, ts)}, hl.cfg.emoji
        )
    posted = datetime.fromtimestamp(float(ts), UTC)
    created = False
    for r in reactions:
        for user in r.get("users") or []:
            reaction = Reaction(
                team=team,
                channel=channel,
                ts=ts,
                user=str(user),
                author=str(m["user"]) if m.get("user") else None,
                emoji=base_emoji(str(r["name"])),
                event_ts="0",
                added=True,
            )
            done = await hl.record(reaction, first_tagged_at=posted)
            if done.outcome is Outcome.STORED and done.reacted and done.reacted.created:
                created = True
    if created:
        info = MessageInfo(
            channel=channel,
            ts=ts,
            thread_ts=str(m["thread_ts"]) if m.get("thread_ts") else None,
            author=str(m["user"]) if m.get("user") else None,
            text=str(m.get("text") or ""),
            is_bot=bool(m.get("bot_id")) or m.get("subtype") == "bot_message",
        )
        await hl.enrich_from(team, info)
    return created


async def backfill(
    hl: Highlights,
    walker: HistoryWalker,
    progress_store: ProgressStore,
    *,
    team: str,
    since: datetime,
    channels: Sequence[str] = (),
    pace_s: float | None = None,
    report: Callable[[Progress], None] = lambda _: None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Progress:
    pace = hl.cfg.backfill_pace_s if pace_s is None else pace_s
    run = since.date().isoformat()
    targets: list[ChannelInfo] = []
    if channels:
        for cid in channels:
            info = await hl.directory.channel(cid)
            # Public channels only, as for the whole walk: a private one's history stays put.
            if info is not None and info.visibility is Visibility.PUBLIC:
                targets.append(info)
    else:
        targets = [c async for c in walker.member_public_channels()]
    progress = Progress(since=since, channels=len(targets))
    for index, ch in enumerate(targets):
        progress.index, progress.channel, progress.reached = index, f"#{ch.name}", None
        saved = await progress_store.backfill_progress(team, run, ch.id)
        scanned, found = int(saved.get("scanned", 0)), int(saved.get("found", 0))
        progress.scanned += scanned
        progress.found += found
        if saved.get("done") == "1":
            continue
        cursor: str | None = saved.get("cursor") or None
        progress.resumed = progress.resumed or bool(cursor)
        while True:
            page = await walker.history(ch.id, oldest=since.timestamp(), cursor=cursor)
            await sleep(pace)
            for m in page.messages:
                batch = [m]
                if int(m.get("reply_count") or 0) > 0 and m.get("thread_ts") == m.get("ts"):
                    batch += await walker.replies(ch.id, str(m["ts"]))
                    await sleep(pace)
                for one in batch:
                    scanned += 1
                    progress.scanned += 1
                    if await record_message(hl, walker, team, ch.id, one):
                        found += 1
                        progress.found += 1
                if m.get("ts"):
                    progress.reached = float(m["ts"])
            cursor = page.next_cursor
            await progress_store.save_backfill_progress(
                team,
                run,
                ch.id,
                {
                    "cursor": cursor or "",
                    "scanned": str(scanned),
                    "found": str(found),
                    "done": "0" if cursor else "1",
                },
            )
            report(progress)
            if not cursor:
                break
    progress.index = len(targets)
    return progress
