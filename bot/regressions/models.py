"""What the regression finder reads and answers: the contract between its parts. No I/O.

Reads: each node's software over time (`VersionSpan`: a component's value on a node from one
time to another, as an info metric's history shows it) and each job's pace over time
(`JobPace`: its recorded pace, the slowest rank's step time, with the nodes it ran on).
Answers: the rollouts seen (`Rollout`) and, per rollout, the effect on the jobs that crossed
it (`Finding`), worst first, in a `RegressionReport`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class Component(StrEnum):
    """The software a node runs that a rollout changes. Configured info metrics add their own
    names (any string), so the finder takes components as strings; these are the built-in."""

    DRIVER = "driver"
    KERNEL = "kernel"
    FIRMWARE = "firmware"  # the GPU VBIOS


@dataclass(frozen=True)
class VersionSpan:
    """`component` was `value` on `node` from `start` to `end` (as far as the samples show)."""

    node: str
    component: str
    value: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class PaceSample:
    at: datetime
    seconds: float
    """The job's pace at `at`: its slowest rank's step time (synchronous training runs at it)."""


@dataclass(frozen=True)
class JobPace:
    job_id: str
    nodes: tuple[str, ...]
    """The nodes the job ran on in the window."""
    samples: tuple[PaceSample, ...]
    """In time order."""
    gpus: int = 0
    """GPUs the job holds (0: unknown; the cost estimate then takes 8 a node)."""


@dataclass(frozen=True)
class NodeCompute:
    """One node's compute time in one job over time: the mean over its ranks of the work before
    the collective, where the job exports it. Unlike the step time (the same on every rank of
    a synchronous job), it names the node."""

    job_id: str
    node: str
    samples: tuple[PaceSample, ...]
    """In time order."""


@dataclass(frozen=True)
class NodeChange:
    """`node` went from `old` to `new` of `component` at `at`."""

    node: str
    component: str
    old: str
    new: str
    at: datetime


@dataclass(frozen=True)
class Rollout:
    """One component moving from `old` to `new` across the fleet, node by node."""

    component: str
    old: str
    new: str
    start: datetime
    end: datetime
    """The last node's change seen so far."""
    nodes: tuple[str, ...]
    """The nodes that changed, in the order they did."""
    coverage: float
    """The share of the nodes running `old` before it began that now run `new` (0-1)."""

    @property
    def per_hour(self) -> float:
        hours = max((self.end - self.start).total_seconds() / 3600, 1 / 60)
        return len(self.nodes) / hours


@dataclass(frozen=True)
class AlignedPace:
    """One crossing job's pace around its switch, for the chart: `points` are (hours from the
    moment its first node joined the new cohort, pace / the job's median pace before it)."""

    job_id: str
    switched_at: datetime
    points: tuple[tuple[float, float], ...]


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_EFFECT = "no_effect"
    """The interval holds zero (or lies within the margin): no effect this data can show."""
    TOO_FEW = "too_few"
    """Too few jobs crossed the rollout to say anything."""


@dataclass(frozen=True)
class SameWork:
    """The per-node evidence on one rollout: within each job that ran on nodes of both cohorts
    at once, its new-cohort nodes' compute time over its old-cohort nodes' at the same steps
    (the same work, the same moment: nothing that moves the whole job moves the ratio), pooled
    over those jobs (bot/regressions/same_work.py)."""

    verdict: Verdict
    effect_pct: float
    """New-cohort nodes' compute time / old-cohort nodes' - 1, in percent, over the jobs (their
    trimmed mean, as the pace's)."""
    low_pct: float
    high_pct: float
    """Its 95 % interval (bootstrap over jobs)."""
    jobs: int
    nodes_new: int
    nodes_old: int
    agrees: bool
    """Its interval meets the pace's (`Finding.low_pct`-`high_pct`): the two lines of evidence
    are consistent; False when they are not."""


@dataclass(frozen=True)
class Finding:
    rollout: Rollout
    verdict: Verdict
    effect_pct: float
    """Step time after / before - 1, in percent (positive: slower), over the crossing jobs
    (their trimmed mean, bot/regressions/stats.py)."""
    low_pct: float
    high_pct: float
    """Its 95 % interval (bootstrap over jobs, and at least `margin_pct` either side of the
    effect); a regression or an improvement is claimed only when it excludes zero."""
    margin_pct: float
    """How far from zero the effect must lie to be claimed, from the data (the spread of the
    same estimate at moments no rollout touched: every job's switch shifted alike)."""
    jobs: int
    """Jobs that crossed the rollout with enough pace before and after."""
    nodes: int
    """Nodes those jobs ran on."""
    clean_jobs: int
    """Of `jobs`, those whose nodes changed nothing else in the window around their switch."""
    confounded_with: tuple[str, ...] = ()
    """Other changes every crossing job also went through at the same time ("image v42"): the
    effect cannot be told apart from them."""
    gpu_days_per_week: float = 0.0
    """What the effect costs (or saves) a week at the load of the window's last day."""
    job_effects: tuple[tuple[str, float], ...] = ()
    """(job id, effect %) of each crossing job, for the chart."""
    aligned: tuple[AlignedPace, ...] = ()
    """The crossing jobs' paces aligned on their switch (`bot/regressions/aligned.py: align`),
    for the chart; empty when the finder did not keep them."""
    same_work: SameWork | None = None
    """The per-node compute time of the new cohort against the old within the same jobs; None
    where no job that exports it ran on both cohorts at once."""


@dataclass(frozen=True)
class RegressionReport:
    start: datetime
    end: datetime
    component: str | None
    """The component asked about, None for every one."""
    findings: tuple[Finding, ...]
    """Regressions worst first, then improvements, then no effect, then too few."""
    jobs_read: int
    nodes_read: int
    notes: tuple[str, ...] = field(default=())
    """What could not be read or separated, in words."""
