"""How an answer names the window its counters were read over.

Counter faults ("812 NVLink CRC flit errors") only mean something with their window, and the
surfaces read different ones (/node-health the health window, /hw-faults its `--since`): an
answer that says "in the window" leaves two honest counts looking like a contradiction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# What a check writes where its window belongs; the run replaces it with the named window.
IN_THE_WINDOW = "in the window"


def span(seconds: float) -> str:
    """`7 days`, `24 h`, `1 h`, `90 min`, `45 s`: whole days past a day as days (nobody says
    "the last 168 h"), whole hours as hours, else minutes, else seconds."""
    s = round(seconds)
    if s > 86400 and s % 86400 == 0:
        return f"{s // 86400} days"
    if s >= 3600 and s % 3600 == 0:
        return f"{s // 3600} h"
    if s >= 60 and s % 60 == 0:
        return f"{s // 60} min"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s} s"


def in_the_last(seconds: float) -> str:
    """`in the last 24 h`; `in the last hour` for the default health window."""
    return "in the last hour" if round(seconds) == 3600 else f"in the last {span(seconds)}"


def named(text: str, seconds: float) -> str:
    """`text` with its window named: `812 NVLink CRC flit errors in the last hour`."""
    return text.replace(IN_THE_WINDOW, in_the_last(seconds))


@dataclass(frozen=True)
class DataReach:
    """Where the metrics' own history begins, when that is after the start of the window an
    answer was asked over (a Prometheus started an hour ago, or keeping less than asked):
    "none in the last 7 days" must not be read from an hour of data."""

    source: str  # what holds the metrics: "Prometheus", "the simulated fleet"
    since: datetime  # an instant the data is there from (never before its first sample)
