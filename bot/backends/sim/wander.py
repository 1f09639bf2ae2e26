"""How a healthy simulated training job's pace wanders over hours and days.

A real job's step time is not flat between incidents: what the batches hold drifts over hours
(sequence lengths, data mixtures), the shared filesystem and network carry other tenants' load
with the time of day, and every checkpoint step writes for a while. Without this, a rollout's
effect read from the simulator would be exact to a hundredth of a percent, and so would the
intervals the regression finder puts around it: not what a fleet shows. So every job's pace is
multiplied by `PaceWander.factor`, seeded and deterministic (any minute can be asked, in any
order, by any snapshot):

- its own slow wander: three octaves of smooth noise (knots every 1 h, 4 h and 16 h, cosine-
  interpolated), in all `WANDER_SD` (a job's own, drawn between 0.3 and 0.7 %): a mean-
  reverting walk over hours, as an AR(1) would be;
- a daily cycle of the shared storage and network: the same phase for every job (the fleet's
  busy hours), within an hour of it, the amplitude each job's own (`DIURNAL`, 0.2-0.5 %: jobs
  read more or less data a step);
- checkpoint steps: the minute a checkpoint is written (about every 30 minutes of the job's
  steps, `JobSpec.checkpoint_every_steps`) is `CHECKPOINT_SLOWDOWN` slower; well under the 25 %
  a stall needs (`StragglerConfig.stall_ratio`), as a write to a fast store is.

Every rank of a job moves alike (the wander is the job's, not a node's), so a straggler, a
per-node signal or a comparison of a job's nodes with each other is untouched by it; a job's
pace compared with yesterday's moves by well under `StragglerConfig.slower_threshold` (3 %).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from bot.backends.sim.workload import JobSpec

WANDER_SD = (0.003, 0.007)
"""The range a job's own slow wander (its standard deviation) is drawn from."""
OCTAVES: tuple[tuple[float, float], ...] = ((3600.0, 0.2), (4 * 3600.0, 0.5), (16 * 3600.0, 0.3))
"""(knot spacing in seconds, share of the wander's variance): most of it over hours."""
DIURNAL = (0.002, 0.005)
"""The range a job's daily-cycle amplitude is drawn from."""
DIURNAL_PHASE_JITTER = 2 * math.pi / 24
"""A job's busy hours differ from the fleet's by at most an hour."""
CHECKPOINT_SLOWDOWN = 0.08
DAY_S = 86400.0
_MASK = (1 << 64) - 1
_UNIT_SD = math.sqrt(3.0)
"""A uniform value on (-1, 1) times this has a standard deviation of 1."""


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of `x`."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _knot(key: int, octave: int, k: int) -> float:
    """A value of standard deviation 1 at knot `k` of `octave` of the job keyed `key`."""
    h = _mix(key ^ _mix((octave << 48) ^ (k & ((1 << 48) - 1))))
    return ((h >> 11) * (2.0 / (1 << 53)) - 1.0) * _UNIT_SD


def _smooth(key: int, octave: int, spacing: float, t_s: float) -> float:
    """Cosine interpolation between the knots either side of `t_s`: standard deviation about
    0.87 mid-way, 1 at the knots."""
    x = t_s / spacing
    k = math.floor(x)
    w = (1.0 - math.cos(math.pi * (x - k))) / 2.0
    return _knot(key, octave, k) * (1.0 - w) + _knot(key, octave, k + 1) * w


@dataclass(frozen=True, slots=True)
class JobWander:
    key: int
    sd: float
    diurnal: float
    phase: float


class PaceWander:
    """The wander of every job of one fleet, from its seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.phase = random.Random(f"meowbot-sim-diurnal:{seed}").uniform(0.0, 2 * math.pi)
        self._jobs: dict[str, JobWander] = {}

    def job(self, job_id: str) -> JobWander:
        """The job's own draws (its key, wander, daily amplitude and phase)."""
        found = self._jobs.get(job_id)
        if found is None:
            tag = f"meowbot-sim-wander:{self.seed}:{job_id}"
            rng = random.Random(tag)
            key = int.from_bytes(hashlib.blake2b(tag.encode(), digest_size=8).digest(), "big")
            found = JobWander(
                key=key,
                sd=rng.uniform(*WANDER_SD),
                diurnal=rng.uniform(*DIURNAL),
                phase=self.phase + rng.uniform(-DIURNAL_PHASE_JITTER, DIURNAL_PHASE_JITTER),
            )
            self._jobs[job_id] = found
        return found

    def drift(self, job_id: str, t_s: float) -> float:
        """The job's slow wander and daily cycle at `t_s` (1.0: none), checkpoints left out."""
        w = self.job(job_id)
        slow = sum(
            math.sqrt(share) * _smooth(w.key, i, spacing, t_s)
            for i, (spacing, share) in enumerate(OCTAVES)
        )
        daily = w.diurnal * math.sin(2 * math.pi * t_s / DAY_S + w.phase)
        return (1.0 + w.sd * slow) * (1.0 + daily)

    def factor(self, spec: JobSpec, t_s: float) -> float:
        """What the job's step time is multiplied by at `t_s`: its drift, and a checkpoint
        step's write in the minute one falls in."""
        out = self.drift(spec.job.job_id, t_s)
        period = spec.checkpoint_every_steps * spec.base_step_s
        if period > 0 and 0.0 <= (t_s - spec.start_s) % period < 60.0:
            out *= 1.0 + CHECKPOINT_SLOWDOWN
        return out
