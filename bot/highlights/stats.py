"""Totals since the first record, per-week counts, top channels and authors."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from bot.highlights.models import Highlight
from bot.highlights.schedule import DigestSchedule

TOP = 5


class Stats(BaseModel):
    model_config = ConfigDict(frozen=True)

    total: int
    first_at: datetime | None
    weeks: tuple[tuple[datetime, int], ...]  # (end of each digest week, highlights), oldest first
    per_week: float
    top_channels: tuple[tuple[str, int], ...]
    top_authors: tuple[tuple[str, int], ...]


def build_stats(highlights: Sequence[Highlight], now: datetime, schedule: DigestSchedule) -> Stats:
    """Counts by the week each highlight was first tagged in (its digest's week)."""
    if not highlights:
        return Stats(
            total=0, first_at=None, weeks=(), per_week=0.0, top_channels=(), top_authors=()
        )
    first = min(h.first_tagged_at for h in highlights)
    # The end of every digest week from the first record's to the current one, then each
    # highlight into the first week ending after it (a binary search, not a date sum each).
    ends: list[datetime] = [schedule.next_fire(first)]
    last_end = schedule.next_fire(now)
    while ends[-1] < last_end:
        ends.append(schedule.next_fire(ends[-1]))
    counts: Counter[int] = Counter(
        min(bisect.bisect_right(ends, h.first_tagged_at), len(ends) - 1) for h in highlights
    )
    weeks = tuple((end, counts.get(i, 0)) for i, end in enumerate(ends))
    elapsed_weeks = max((now - first).total_seconds() / (7 * 86400), 1.0)
    return Stats(
        total=len(highlights),
        first_at=first,
        weeks=weeks,
        per_week=len(highlights) / elapsed_weeks,
        top_channels=tuple(Counter(h.channel for h in highlights).most_common(TOP)),
        top_authors=tuple(Counter(h.author for h in highlights).most_common(TOP)),
    )


def week_spans(weeks: Sequence[tuple[datetime, int]]) -> list[tuple[datetime, datetime, int]]:
    """(start, end, count) of each digest week from the ends `build_stats` gives: a week runs
    from the previous end (the first one, seven days before its own) to its end."""
    spans = []
    previous: datetime | None = None
    for end, n in weeks:
        start = previous if previous is not None else end - timedelta(days=7)
        spans.append((start, end, n))
        previous = end
    return spans
