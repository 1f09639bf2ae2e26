"""What moves every job's pace at once, taken out before any job is judged. No I/O.

Shared storage and network have their days: a daily cycle of other tenants' I/O, an afternoon
the filesystem was slow. A rollout begins at some hour and the first node of almost every job
takes it within the hour, so a job's before-and-after straddles the same part of that day for
every job, and a daily cycle of a few tenths of a percent would read as a regression (or an
improvement) of the same size in all of them, agreeing perfectly.

So the fleet's common pace is measured and divided out: each job's log pace less its own level
(the level of each stretch between the changes on its nodes, so no rollout's step leaks in)
and the fleet's pace at each moment are fitted together (least squares by turns, leaving out
samples far from their stretch's median: checkpoint spikes). Moments with fewer than
`min_jobs` jobs running are left alone.

What it cannot do: a slowdown of the whole fleet that begins within the rollout's first hour
and stays (the shared filesystem degraded that hour) looks like the rollout in every job that
switched then, and about half of it is blamed on the rollout (bench/regressions.py
`--fleet-step`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from bot.regressions.effects import Series

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
MAD_TO_SIGMA = 1.4826
OUTLIER_SIGMAS = 4.0


def _group_medians(groups: Ints, values: Floats, size: int) -> Floats:
    order = np.lexsort((values, groups))
    g, v = groups[order], values[order]
    keys, starts, counts = np.unique(g, return_index=True, return_counts=True)
    out = np.zeros(size)
    out[keys] = (v[starts + (counts - 1) // 2] + v[starts + counts // 2]) / 2
    return out


def without_fleet_time(
    jobs: Sequence[tuple[Series, Sequence[float]]], *, min_jobs: int = 5, passes: int = 40
) -> list[Series]:
    """Each job's pace divided by the fleet's common pace at each moment. `jobs` pairs each
    job's pace with the moments its nodes changed anything."""
    if len(jobs) < min_jobs:
        return [s for s, _ in jobs]
    steps = [float(np.median(np.diff(s.t))) for s, _ in jobs if len(s.t) > 1]
    width = max(float(np.median(steps)), 1.0)
    logy = np.log(np.concatenate([s.y for s, _ in jobs]))
    bins_abs = np.floor(np.concatenate([s.t for s, _ in jobs]) / width).astype(np.int64)
    bins = bins_abs - bins_abs.min()
    stretches, first = [], 0
    for s, cuts in jobs:
        inside = np.asarray(sorted(c for c in cuts if s.first < c < s.last), dtype=np.float64)
        stretches.append(first + np.searchsorted(inside, s.t, side="right"))
        first += len(inside) + 1
    stretch = np.concatenate(stretches)
    # Checkpoint steps and stalls are far from their stretch's level: left out of the means.
    level = _group_medians(stretch, logy, first)
    dev = np.abs(logy - level[stretch])
    spread = _group_medians(stretch, dev, first) * MAD_TO_SIGMA
    w = (dev <= OUTLIER_SIGMAS * np.maximum(spread[stretch], 1e-6)).astype(np.float64)
    per_bin = np.bincount(bins, w)
    enough = per_bin >= min_jobs
    per_stretch = np.maximum(np.bincount(stretch, w, minlength=first), 1.0)
    common = np.zeros(len(per_bin))
    # Least squares by turns (job levels, then the common pace), stopped after `passes` on
    # purpose. Solved to the end (conjugate gradients), the fit also tells a fleet-wide step at
    # the rollout's first hour from the rollout, through the few jobs that switched later, but
    # with a variance common to every job that neither the bootstrap nor the margin sees, and
    # claims effects where there are none (docs/benchmarks.md). Stopped early, the intervals
    # stay honest, and such a step is partly blamed on the rollout (said in the module's
    # docstring and docs/benchmarks.md).
    for _ in range(passes):
        level = np.bincount(stretch, w * (logy - common[bins]), minlength=first) / per_stretch
        sums = np.bincount(bins, w * (logy - level[stretch]))
        common = np.where(enough, sums / np.maximum(per_bin, 1.0), 0.0)
    out, at = [], 0
    for s, _ in jobs:
        n = len(s.t)
        out.append(Series(s.job, s.t, s.y * np.exp(-common[bins[at : at + n]])))
        at += n
    return out
