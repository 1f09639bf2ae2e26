"""Each job's effect at a rollout: its pace before and after the moment it crossed. No I/O.

Synchronous training runs at the pace of its slowest node, so a job's step time moves the
moment the FIRST of its nodes joins the new cohort, not when most of them have: that moment is
the job's switch. Its effect is the median pace in a window after the switch over the median
pace in a window before (medians: checkpoint steps and stalls are spikes a mean would follow),
leaving out a guard either side (the recorded pace is a rate over the last minutes, so the
samples next to the switch mix both sides) and the job's first minutes (warm-up).

The same estimate at moments no change touched the job is its placebo: every crossing job
measured again at its switch shifted by the same amount (hours or days earlier or later, where
no change on its nodes is inside the windows), so that what moves many jobs at once (a slow
afternoon of the shared filesystem) shows in the placebo as it would at the switch. The margin
a claim must clear is made of these (bot/regressions/stats.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from bot.regressions.cohorts import RolloutKey, rollout_key
from bot.regressions.models import JobPace, NodeChange, Rollout

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class EffectConfig:
    window: timedelta = timedelta(hours=24)
    """How far before and after its switch a job's pace is read: whole days, so that a job's
    own share of the daily cycle (shared storage's other tenants; each job feels it more or
    less than the fleet's common pace that is divided out) falls alike on both sides: fewer
    false claims and a smaller error than 12 h (docs/benchmarks.md); a job shorter than that
    reads what it has."""
    guard: timedelta = timedelta(minutes=15)
    """Left out either side of a switch: the recorded pace mixes both sides there."""
    warmup: timedelta = timedelta(minutes=30)
    """A job's first minutes (compilation, caches filling) are not its pace."""
    min_side: timedelta = timedelta(hours=1)
    """The least pace a side must span to count."""
    min_samples: int = 6
    """The least samples a side must hold."""
    line_up: timedelta = timedelta(hours=1)
    """A job's own changepoint this close to its switch lines up with it."""
    placebo_step: timedelta = timedelta(hours=6)
    placebo_reach: timedelta = timedelta(days=7)
    """Every job is measured again at its switch shifted by multiples of `placebo_step` (the
    same shift for all, so what moves every job at once moves these too), out to
    `placebo_reach` either way."""


@dataclass(frozen=True)
class Series:
    """A job's pace as arrays: seconds since the epoch and step seconds, warm-up left out."""

    job: JobPace
    t: Floats
    y: Floats

    @property
    def first(self) -> float:
        return float(self.t[0])

    @property
    def last(self) -> float:
        return float(self.t[-1])


def series(job: JobPace, cfg: EffectConfig) -> Series | None:
    if not job.samples:
        return None
    t = np.fromiter((s.at.timestamp() for s in job.samples), np.float64, len(job.samples))
    y = np.fromiter((s.seconds for s in job.samples), np.float64, len(job.samples))
    keep = np.isfinite(y) & (y > 0) & (t >= t[0] + cfg.warmup.total_seconds())
    if np.count_nonzero(keep) < 2 * cfg.min_samples:
        return None
    order = np.argsort(t[keep], kind="stable")
    return Series(job, t[keep][order], y[keep][order])


@dataclass(frozen=True)
class Crossing:
    """A job that crossed a rollout with enough pace either side of its switch."""

    job_id: str
    switch_at: datetime
    """When the first of its nodes joined the new cohort."""
    effect: float
    """Median pace after / before - 1 (positive: slower)."""
    nodes: tuple[str, ...]
    others: tuple[str, ...]
    """Other changes on its nodes inside its window ("image v42"): empty if it is clean."""
    placebo: Floats
    """Its effect at its switch shifted by each of `placebo_offsets`, where no change touched
    it (NaN elsewhere)."""
    changepoint_at: datetime | None = None
    """Where its own pace steps most in its window, found without knowing the switch."""

    @property
    def clean(self) -> bool:
        return not self.others

    def stepped_at_switch(self, within: timedelta) -> bool:
        return (
            self.changepoint_at is not None and abs(self.changepoint_at - self.switch_at) <= within
        )


def effect_at(s: Series, at: float, before: float, after: float, cfg: EffectConfig) -> float | None:
    """The job's effect at `at`: samples from `before` s to the guard, and from the guard to
    `after` s past it; None if either side is too thin."""
    guard = cfg.guard.total_seconds()
    lo, mid_lo, mid_hi = np.searchsorted(s.t, [at - before, at - guard, at + guard])
    hi = int(np.searchsorted(s.t, at + after, side="right"))
    pre, post = s.y[lo:mid_lo], s.y[mid_hi:hi]
    if len(pre) < cfg.min_samples or len(post) < cfg.min_samples:
        return None
    span = cfg.min_side.total_seconds()
    if s.t[mid_lo - 1] - s.t[lo] < span or s.t[hi - 1] - s.t[mid_hi] < span:
        return None
    return float(np.median(post) / np.median(pre) - 1.0)


def placebo_offsets(cfg: EffectConfig) -> Floats:
    """The shifts (seconds) at which every crossing job is measured again, all by the same
    shift: far enough from the switch that the windows cannot reach it."""
    step = cfg.placebo_step.total_seconds()
    least = cfg.window.total_seconds() + cfg.guard.total_seconds()
    k = np.arange(1, int(cfg.placebo_reach.total_seconds() // step) + 1) * step
    far = k[k > least]
    return np.concatenate((-far[::-1], far))


def changepoint(s: Series, at: float, window: float) -> float | None:
    """The moment in `at` +- `window` where the job's pace steps most: the split that
    maximises the standardised difference of the means either side (CUSUM), on the pace with
    its spikes clipped to 4 deviations of the median."""
    lo, hi = np.searchsorted(s.t, [at - window, at + window])
    t, y = s.t[lo:hi], s.y[lo:hi]
    n = len(y)
    if n < 4:
        return None
    med = np.median(y)
    spread = max(float(np.median(np.abs(y - med))) * 1.4826, 1e-12)
    y = np.clip(y, med - 4 * spread, med + 4 * spread)
    k = np.arange(1, n)
    total = np.cumsum(y)
    stat = np.abs(total[:-1] - k / n * total[-1]) / np.sqrt(k * (n - k) / n)
    best = int(np.argmax(stat))
    return float((t[best] + t[best + 1]) / 2)


def _placebos(s: Series, switch: float, events: Sequence[float], cfg: EffectConfig) -> Floats:
    """The job's effect at its switch shifted by each of `placebo_offsets` (NaN where its pace
    does not reach or a change on its nodes falls inside the windows)."""
    window, guard = cfg.window.total_seconds(), cfg.guard.total_seconds()
    offsets = placebo_offsets(cfg)
    out = np.full(len(offsets), np.nan)
    for i, shift in enumerate(offsets):
        at = switch + shift
        if not s.first < at < s.last or any(
            at - window - guard < e < at + window + guard for e in events
        ):
            continue
        effect = effect_at(s, at, window, window, cfg)
        if effect is not None:
            out[i] = effect
    return out


def _stamp(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def first_changes(
    s: Series, changes_by_node: Mapping[str, Sequence[NodeChange]]
) -> dict[RolloutKey, float]:
    """When the job's nodes first went through each rollout (seconds since the epoch)."""
    firsts: dict[RolloutKey, float] = {}
    for node in s.job.nodes:
        for change in changes_by_node.get(node, ()):
            at, k = change.at.timestamp(), rollout_key(change)
            if k not in firsts or at < firsts[k]:
                firsts[k] = at
    return firsts


def crossings(
    rollout: Rollout, jobs: Sequence[tuple[Series, Mapping[RolloutKey, float]]], cfg: EffectConfig
) -> list[Crossing]:
    """Every job that crossed `rollout`: its switch (its first node's change), its effect,
    the other changes its nodes went through inside its window, and its placebo effects.
    `jobs` pairs each job's pace with its `first_changes`."""
    key = rollout_key(rollout)
    window = cfg.window.total_seconds()
    found: list[Crossing] = []
    for s, firsts in jobs:
        switch = firsts.get(key)
        if switch is None or not s.first < switch < s.last:
            continue
        effect = effect_at(s, switch, window, window, cfg)
        if effect is None:
            continue
        lo, hi = max(s.first, switch - window), min(s.last, switch + window)
        others = sorted(
            f"{component} {new}"
            for (component, old, new), at in firsts.items()
            if (component, old, new) != key and lo <= at <= hi
        )
        found.append(
            Crossing(
                job_id=s.job.job_id,
                switch_at=_stamp(switch),
                effect=effect,
                nodes=s.job.nodes,
                others=tuple(others),
                placebo=_placebos(s, switch, list(firsts.values()), cfg),
                changepoint_at=_stamp(step) if (step := changepoint(s, switch, window)) else None,
            )
        )
    return found
