"""Counts and numbers as people write them: "1 fault", "2 faults", "15,084 errors".

Plain text in, plain text out, no Slack and no domain: the checks, the services and every
renderer share it, so that no answer says "1 faults in 1 groups".
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

__all__ = ["count", "number", "ordinal", "plural", "when"]


def plural(n: float, singular: str, many: str | None = None) -> str:
    """`singular` when `n` is exactly one, else its plural (`many`, or the usual English one)."""
    if n == 1:
        return singular
    if many is not None:
        return many
    head, _, last = singular.rpartition(" ")
    if last.endswith("y") and last[-2:-1] not in tuple("aeiou"):
        word = last[:-1] + "ies"
    else:
        word = last + ("es" if last.endswith(("s", "x", "ch", "sh")) else "s")
    return f"{head} {word}" if head else word


def number(n: float, *, separators: bool = True) -> str:
    """`15,084`, `3`, `2.5`, `0.00012`: whole numbers with thousands separators, others with
    three significant digits, never an exponent (`1.53e+03` reads as a typo to most people).
    Without `separators`, for a metric's reading shown as a query would print it."""
    if not math.isfinite(n):
        return str(n)
    comma = "," if separators else ""
    if n == int(n):
        return f"{int(n):{comma}}"
    if abs(n) >= 100:
        return f"{n:{comma}.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(n))))  # three significant digits
    return f"{n:.{digits}f}".rstrip("0").rstrip(".")


def count(n: float, singular: str, many: str | None = None) -> str:
    """`1 fault`, `15,084 NVLink CRC flit errors`: the number and its noun, agreeing."""
    return f"{number(n)} {plural(n, singular, many)}"


def ordinal(n: int) -> str:
    """`1st`, `2nd`, `3rd`, `11th`, `22nd`: the place of a repeat ("3rd Xid 79")."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def when(t: datetime, now: datetime | None = None) -> str:
    """`2026-12-06 04:10 UTC`: every time an answer gives, with its date; beside `now`, the day
    named too (`2026-12-06 04:10 UTC, today`), so that "04:10" is never read as tonight's."""
    t = t.astimezone(UTC)
    out = f"{t:%Y-%m-%d %H:%M} UTC"
    if now is None:
        return out
    day = now.astimezone(UTC).date()
    if t.date() == day:
        return f"{out}, today"
    if t.date() == day - timedelta(days=1):
        return f"{out}, yesterday"
    return out
