"""A small, pure generator of fleet histories for the regression finder's tests and bench.

Not the simulator (bot/backends/sim has the full one): just what bot.regressions reads, drawn
from a seed. A fleet of nodes is cut into blocks of 8 to 256 nodes; each block runs synchronous
jobs back to back (12 h to 3 days each). A kernel moves from OLD to NEW node by node at moments
drawn uniformly over the rollout; optionally an image moves on the same nodes at the same
moments (a confound no statistics can undo). A job's pace (its slowest rank's step time) is:

    base x (1 + effect_j once ANY of its nodes runs NEW)   synchronous: the first node counts
         x (1 + its own wander over hours)                 AR(1), `wander` (0.5-1.5 x, per job)
                                                           over `wander_hours`: what its data does
         x (1 + its own slow drift)                        a random walk, `drift` a day
         x (1 + the fleet's daily cycle)                   shared storage, `diurnal` (0.5-1.5 x
                                                           per job, its phase within an hour)
         x (1 + sampling noise)                            `noise` at most, drawn per job
         x checkpoint spikes (+20 %, `spikes` of samples) and a slower first 20 minutes.

effect_j is the true effect spread across jobs (`effect_spread`, relative): workloads differ.
Each job's level (`base`) is its own, 0.5-5 s a step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

from bot.regressions.models import JobPace, PaceSample, VersionSpan

START = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
OLD, NEW = "5.15.0-105-generic", "5.15.0-113-generic"
IMAGE_OLD, IMAGE_NEW = "v41", "v42"
BLOCKS = (8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class FleetSpec:
    nodes: int = 4096
    days: float = 7.0
    rollout_at: timedelta | None = None
    """When the kernel rollout begins; None: drawn between day 2 and day 4."""
    rollout_hours: float = 24.0
    effect: float = 0.01
    effect_spread: float = 0.1
    coverage: float = 1.0
    """The share of nodes that take the new kernel."""
    image_effect: float | None = None
    """An image rollout on the same nodes at the same moments, with this effect."""
    image_share: float = 1.0
    """The share of the fleet (its first nodes) the image rollout reaches."""
    fleet_step: float = 0.0
    """A step in every job's pace when the rollout begins, nothing to do with it (the shared
    filesystem degraded that hour)."""
    step: timedelta = timedelta(minutes=10)
    noise: float = 0.015
    wander: float = 0.005
    """The standard deviation of a job's own wander over hours (each job 0.5-1.5 times it)."""
    wander_hours: float = 4.0
    """Its correlation time: the AR(1) keeps exp(-1) of itself after this long."""
    drift: float = 0.003
    diurnal: float = 0.003
    spikes: float = 0.01
    block_sizes: tuple[int, ...] = BLOCKS
    job_hours: tuple[float, float] = (12.0, 72.0)


@dataclass(frozen=True)
class Fleet:
    spec: FleetSpec
    spans: list[VersionSpan]
    paces: list[JobPace]
    switch: dict[str, datetime] = field(default_factory=dict)
    """Each node's kernel change (nodes that never changed are absent)."""
    rollout_start: datetime = START
    true_effects: dict[str, float] = field(default_factory=dict)
    """Each job's own true effect (the spec's, spread across jobs), as a fraction."""

    @property
    def start(self) -> datetime:
        return START

    @property
    def end(self) -> datetime:
        return START + timedelta(days=self.spec.days)


def node_name(i: int) -> str:
    return f"gpu-{i:04d}"


def ar1(rng: np.random.Generator, t: np.ndarray, sd: float, hours: float) -> np.ndarray:
    """An AR(1) of standard deviation `sd` and correlation time `hours` at the instants `t`
    (seconds): drawn hourly, interpolated between."""
    if sd <= 0 or len(t) == 0:
        return np.zeros(len(t))
    knots = np.arange(t[0] - 3600.0, t[-1] + 7200.0, 3600.0)
    keep = float(np.exp(-1.0 / hours))
    shocks = rng.standard_normal(len(knots)) * sd * np.sqrt(1 - keep * keep)
    x = np.empty(len(knots))
    x[0] = rng.standard_normal() * sd
    for k in range(1, len(knots)):
        x[k] = keep * x[k - 1] + shocks[k]
    return np.interp(t, knots, x)


def generate(spec: FleetSpec, seed: int) -> Fleet:
    rng = np.random.default_rng(seed)
    end = START + timedelta(days=spec.days)
    window_s = spec.days * 86400
    begin_h = (
        spec.rollout_at.total_seconds() / 3600
        if spec.rollout_at is not None
        else float(rng.uniform(48, 96))
    )
    names = [node_name(i) for i in range(spec.nodes)]
    moved = rng.random(spec.nodes) < spec.coverage
    at_s = (begin_h + rng.uniform(0, spec.rollout_hours, spec.nodes)) * 3600
    switch = {
        n: START + timedelta(seconds=float(s))
        for n, s, m in zip(names, at_s, moved, strict=True)
        if m
    }
    spans: list[VersionSpan] = []
    for n in names:
        spans.append(VersionSpan(n, "driver", "550.54.15", START, end))
        at = switch.get(n)
        if at is None:
            spans.append(VersionSpan(n, "kernel", OLD, START, end))
            continue
        # The node reboots into the new kernel: a few minutes without samples.
        spans.append(VersionSpan(n, "kernel", OLD, START, at - timedelta(minutes=5)))
        spans.append(VersionSpan(n, "kernel", NEW, at, end))
        if spec.image_effect is not None and int(n[4:]) < spec.image_share * spec.nodes:
            spans.append(VersionSpan(n, "image", IMAGE_OLD, START, at - timedelta(minutes=5)))
            spans.append(VersionSpan(n, "image", IMAGE_NEW, at, end))

    step_s = spec.step.total_seconds()
    grid_t = np.arange(0, window_s + 1, step_s)
    grid = [START + timedelta(seconds=float(s)) for s in grid_t]
    phase = rng.uniform(0, 2 * np.pi)
    node_switch = np.where(moved, at_s, np.inf)
    paces: list[JobPace] = []
    true_effects: dict[str, float] = {}
    first, job_no = 0, 0
    while first < spec.nodes:
        size = min(int(rng.choice(spec.block_sizes)), spec.nodes - first)
        block = slice(first, first + size)
        first += size
        block_switch = float(node_switch[block].min())
        clock = -float(rng.uniform(0, spec.job_hours[1])) * 3600
        while clock < window_s:
            hours = float(rng.uniform(*spec.job_hours))
            job_start, job_end = clock, clock + hours * 3600
            clock = job_end + float(rng.uniform(5, 60)) * 60
            lo = int(np.searchsorted(grid_t, max(job_start, 0.0)))
            hi = int(np.searchsorted(grid_t, min(job_end, window_s), side="right"))
            job_no += 1
            if hi - lo < 2:
                continue
            t = grid_t[lo:hi]
            effect = spec.effect * (1 + spec.effect_spread * float(rng.standard_normal()))
            true_effects[str(100000 + job_no)] = effect
            y = float(rng.uniform(0.5, 5.0)) * (1 + effect * (t >= block_switch))
            if spec.image_effect is not None and block.start < spec.image_share * spec.nodes:
                y = y * (1 + spec.image_effect * (t >= block_switch))
            walk = np.cumsum(rng.standard_normal(len(t))) * spec.drift * np.sqrt(step_s / 86400)
            own = ar1(rng, t, spec.wander * float(rng.uniform(0.5, 1.5)), spec.wander_hours)
            daily = (
                spec.diurnal
                * float(rng.uniform(0.5, 1.5))
                * np.sin(2 * np.pi * t / 86400 + phase + float(rng.uniform(-1, 1)) * np.pi / 12)
            )
            y = y * (1 + walk) * (1 + own) * (1 + daily)
            y = y * (1 + spec.fleet_step * (t >= begin_h * 3600))
            y = y * (
                1 + float(rng.uniform(spec.noise / 3, spec.noise)) * rng.standard_normal(len(t))
            )
            y = y * np.where(rng.random(len(t)) < spec.spikes, 1.2, 1.0)
            y = y * np.where(t - job_start < 1200, 1.1, 1.0)
            paces.append(
                JobPace(
                    job_id=str(100000 + job_no),
                    nodes=tuple(names[block]),
                    samples=tuple(
                        PaceSample(grid[i], float(v)) for i, v in zip(range(lo, hi), y, strict=True)
                    ),
                    gpus=8 * size,
                )
            )
    return Fleet(spec, spans, paces, switch, START + timedelta(hours=begin_h), true_effects)
