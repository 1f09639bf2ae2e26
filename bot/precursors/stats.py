"""The exact tests behind a claim: Fisher's one-sided test and Wilson's interval. No I/O.

The counts are small (a few to a few dozen events) against thousands of ordinary windows, so
the test is exact rather than a normal approximation: a precursor seen before 5 of 6 events is
told apart from one seen before 5 of 6 by chance only by the exact tail.
"""

from __future__ import annotations

import math


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_greater(hits: int, n: int, crossed: int, m: int) -> float:
    """One-sided Fisher's exact test: the chance that `hits` or more of `n` events would have
    crossed if events were no likelier to cross than the `m` ordinary windows (`crossed` of
    them did). The hypergeometric tail: of the `hits + crossed` crossings among `n + m`
    windows, at least `hits` falling on the events."""
    if n <= 0 or hits <= 0:
        return 1.0
    total, marked = n + m, hits + crossed
    denom = _log_choose(total, n)
    top = min(n, marked)
    p = 0.0
    for x in range(hits, top + 1):
        if n - x > total - marked:
            continue
        p += math.exp(_log_choose(marked, x) + _log_choose(total - marked, n - x) - denom)
    return min(1.0, p)


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share: honest at 7 of 8, where the normal one is
    not."""
    if n <= 0:
        return (0.0, 1.0)
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))
