"""The clock of caches, TTLs and rate windows, and the one way to say "never".

`time.monotonic()` counts from the machine's boot: a minute after boot it reads about 60, so
0.0 is not "long ago" (a cache last read at 0.0 with a one-hour life would stay "fresh" for the
first hour of a fresh machine). "Never" is None, which `since` reads as infinitely long ago.
The wall clock (`datetime.now`) is for points in time shared with others (Redis, Slack, the
schedules), never for how long ago something happened in this process: it can jump.
"""

from __future__ import annotations

import math
import time


def now() -> float:
    """Seconds on the monotonic clock: only differences between two readings mean anything."""
    return time.monotonic()


def since(at: float | None) -> float:
    """Seconds since `at` (a `now()` reading); infinite when `at` is None (never)."""
    return math.inf if at is None else now() - at
