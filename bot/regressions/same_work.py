"""Per-node compute time by cohort, at the same work: the rollout's effect without the jobs'
own weather. No I/O.

A job's pace moves for reasons of its own (its data, the shared filesystem's day, a checkpoint):
before/after comparisons of it carry all of that. But while a rollout is under way, a job can
run on nodes of both cohorts at once; where it exports each rank's compute time (the work
before the collective, which names the node, unlike the step time every rank of a synchronous
job shares), its new-cohort nodes and its old-cohort nodes do the same work at the same steps.
Their ratio at one instant is free of everything that moves the whole job, so:

- per job, at each instant where some of its nodes run the new value and some the old (a node
  within `guard` of its switch is left out: the exporter averages over minutes), the median
  compute time of the new nodes over that of the old; the job's effect is the median of those
  ratios over its instants (at least `min_samples`);
- across jobs, the trimmed mean of the jobs' effects (as the pace's, bot/regressions/stats.py),
  with a bootstrap interval over jobs (the jobs are the independent units; a job's instants
  are not), widened for few jobs as Student's t would be (most rollouts leave only a handful
  of jobs on both versions at once). No margin is added: nothing that moves a whole job
  moves this ratio, so the jobs' spread is all there is.

What it cannot see: a job whose nodes all switched together, or before it started, has no
instant with both cohorts; nodes doing different work in one job (pipeline stages) differ by
more than the effect, but a rollout's order does not follow the stages, so across jobs that
averages out and widens the interval rather than moving it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from bot.regressions.models import NodeCompute, Rollout, SameWork, Verdict, VersionSpan
from bot.regressions.stats import StatsConfig, centre, centre_interval

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SameWorkConfig:
    guard: timedelta = timedelta(minutes=15)
    """A node this close to its switch is in neither cohort: its average mixes both."""
    min_samples: int = 6
    """The least instants with both cohorts a job needs to count."""


@dataclass(frozen=True)
class JobSplit:
    """One job's new-cohort nodes against its old-cohort nodes."""

    job_id: str
    effect: float
    """Median over its instants of new / old compute time - 1 (positive: slower)."""
    instants: int
    nodes_new: frozenset[str]
    nodes_old: frozenset[str]


def cohort_spans(
    spans: Sequence[VersionSpan], rollout: Rollout
) -> dict[str, list[tuple[float, float, int]]]:
    """Node -> (from, to, +1 new / -1 old) in seconds since the epoch: when each node ran the
    rollout's old or new value (other values are neither)."""
    out: defaultdict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for s in spans:
        if s.component != rollout.component or s.value not in (rollout.old, rollout.new):
            continue
        side = 1 if s.value == rollout.new else -1
        out[s.node].append((s.start.timestamp(), s.end.timestamp(), side))
    return dict(out)


def _sides(t: Floats, runs: Sequence[tuple[float, float, int]], guard: float) -> Floats:
    """At each instant of `t`: +1 new, -1 old, 0 neither (or within `guard` of a change)."""
    side = np.zeros(len(t))
    for start, end, value in runs:
        # The guard also trims the window's edges: a few instants, nothing more.
        side[(t >= start + guard) & (t <= end - guard)] = value
    return side


def job_split(
    job_id: str,
    rows: Sequence[NodeCompute],
    cohorts: Mapping[str, Sequence[tuple[float, float, int]]],
    cfg: SameWorkConfig,
) -> JobSplit | None:
    """The job's new-cohort nodes over its old-cohort nodes at the same instants; None when
    it had too few instants with both."""
    rows = [r for r in rows if r.node in cohorts and r.samples]
    if len(rows) < 2:
        return None
    times = np.unique(np.concatenate([[s.at.timestamp() for s in r.samples] for r in rows]))
    values = np.full((len(rows), len(times)), np.nan)
    sides = np.zeros((len(rows), len(times)))
    guard = cfg.guard.total_seconds()
    for i, r in enumerate(rows):
        t = np.fromiter((s.at.timestamp() for s in r.samples), np.float64, len(r.samples))
        y = np.fromiter((s.seconds for s in r.samples), np.float64, len(r.samples))
        ok = np.isfinite(y) & (y > 0)
        values[i, np.searchsorted(times, t[ok])] = y[ok]
        sides[i] = _sides(times, cohorts[r.node], guard)
    seen = ~np.isnan(values)
    new, old = seen & (sides > 0), seen & (sides < 0)
    both = new.any(axis=0) & old.any(axis=0)
    if np.count_nonzero(both) < cfg.min_samples:
        return None
    cols = np.flatnonzero(both)
    ratios = np.empty(len(cols))
    for k, c in enumerate(cols):
        ratios[k] = np.median(values[new[:, c], c]) / np.median(values[old[:, c], c])
    nodes = [r.node for r in rows]
    return JobSplit(
        job_id=job_id,
        effect=float(np.median(ratios) - 1.0),
        instants=len(cols),
        nodes_new=frozenset(nodes[i] for i in np.flatnonzero(new[:, cols].any(axis=1))),
        nodes_old=frozenset(nodes[i] for i in np.flatnonzero(old[:, cols].any(axis=1))),
    )


def job_splits(
    computes: Sequence[NodeCompute],
    spans: Sequence[VersionSpan],
    rollout: Rollout,
    cfg: SameWorkConfig,
) -> list[JobSplit]:
    """Every job that ran on both of the rollout's cohorts at once, split by cohort."""
    cohorts = cohort_spans(spans, rollout)
    by_job: defaultdict[str, list[NodeCompute]] = defaultdict(list)
    for row in computes:
        by_job[row.job_id].append(row)
    found = (job_split(job, rows, cohorts, cfg) for job, rows in sorted(by_job.items()))
    return [s for s in found if s is not None]


def same_work(
    splits: Sequence[JobSplit],
    pace_low_pct: float,
    pace_high_pct: float,
    stats: StatsConfig,
) -> SameWork | None:
    """The jobs' splits pooled: their trimmed mean, its bootstrap interval over jobs, and
    whether it meets the pace's interval. None without a job."""
    if not splits:
        return None
    effects = np.asarray([s.effect for s in splits], dtype=np.float64)
    rng = np.random.default_rng(stats.seed)
    effect = float(centre(effects))
    low, high = centre_interval(effects, rng, stats.resamples, stats.level)
    if len(effects) < stats.min_jobs:
        verdict = Verdict.TOO_FEW
    elif low > 0:
        verdict = Verdict.REGRESSION
    elif high < 0:
        verdict = Verdict.IMPROVEMENT
    else:
        verdict = Verdict.NO_EFFECT
    low_pct, high_pct = low * 100, high * 100
    return SameWork(
        verdict=verdict,
        effect_pct=effect * 100,
        low_pct=low_pct,
        high_pct=high_pct,
        jobs=len(splits),
        nodes_new=len({n for s in splits for n in s.nodes_new}),
        nodes_old=len({n for s in splits for n in s.nodes_old}),
        agrees=low_pct <= pace_high_pct and pace_low_pct <= high_pct,
    )
