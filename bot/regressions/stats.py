"""Across jobs: the effect, its interval, the margin from the data, the verdict. No I/O.

- The effect is the trimmed mean of the jobs' effects (the middle 60 %: a fifth cut from
  either end): one job that restarted or shared a flaky link moves a mean, not a trimmed one;
  and with every job's pace wandering on its own over hours, it is the tighter of the robust
  centres (a median wastes a third of the jobs; docs/benchmarks.md compares the two).
- Its 95 % interval is a bootstrap over jobs (jobs are the independent units; a job's samples
  are not: its pace wanders for reasons of its own), widened for few jobs as Student's t
  would be (a plain percentile bootstrap over a handful of jobs holds the truth less often
  than it says).
- The margin is the same estimate made where no rollout was: every crossing job measured again
  at its switch shifted by one common amount (bot/regressions/effects.py); each resample draws
  a shift, then as many jobs as crossed among those measured there, and the margin is the 95th
  percentile of those estimates' size. It holds the spread of the estimate over that many jobs,
  what moves every job at once at some hours and any drift they share (a fleet slowly slowing
  shows at every shift, rollout or not). Resampling the jobs of one shift counts their spread
  twice (once in which jobs ran then, once in the draw), so the margin errs wide: the interval
  holds the truth more often than 95 % (docs/benchmarks.md).
- The interval reaches at least the margin either side of the effect (a bootstrap over jobs
  alone misses what moves every job at once, and would cover the truth less often than it
  says), and a regression (or an improvement) is claimed only when it excludes zero: the
  effect is further from zero than the margin and than the jobs' spread allows. Otherwise
  there is no effect this data can show, and the answer says so.

The resamples are drawn from a fixed seed, so the same data always gives the same answer.
This is the CPU-heavy part of an answer: plain synchronous functions, for a worker thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from bot.regressions.models import Verdict

Floats = npt.NDArray[np.float64]
TRIM = 0.2
"""The share of the jobs' effects cut from either end before their mean is taken."""


@dataclass(frozen=True)
class StatsConfig:
    resamples: int = 2000
    level: float = 0.95
    min_jobs: int = 5
    """Fewer crossing jobs than this: too few to say anything."""
    seed: int = 20


@dataclass(frozen=True)
class Estimate:
    effect: float
    low: float
    high: float
    margin: float
    verdict: Verdict
    placebo_measured: bool
    """False when no shift had `min_jobs` jobs to measure: the margin is then the interval's
    width (a stand-in that only makes a claim harder)."""


def centre(values: Floats, trim: float = TRIM) -> Floats:
    """The trimmed mean along the last axis: the mean of what is left once the `trim` share
    of the values is cut from either end."""
    ordered = np.sort(values, axis=-1)
    n = ordered.shape[-1]
    cut = min(int(n * trim), (n - 1) // 2)
    return np.asarray(ordered[..., cut : n - cut].mean(axis=-1), dtype=np.float64)


def t_quantile(level: float, df: int) -> float:
    """Student's t two-sided `level` quantile with `df` degrees of freedom (Cornish-Fisher from
    the normal's: within 0.3 % from 4 degrees of freedom, 3 % at 2)."""
    z = NormalDist().inv_cdf(0.5 + level / 2)
    v = max(df, 1)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def small_sample_widening(n: int, level: float) -> float:
    """How much wider a percentile bootstrap interval over `n` jobs must be to hold the truth
    as often as it says: the bootstrap draws from the jobs seen, whose spread is (n-1)/n of
    the true one, and a normal quantile where Student's belongs. For a mean of normal values
    this makes it the t interval exactly; over 6 jobs it is 1.44, over 44 1.04."""
    if n < 2:
        return 1.0
    z = NormalDist().inv_cdf(0.5 + level / 2)
    return t_quantile(level, n - 1) / z * math.sqrt(n / (n - 1))


def centre_interval(
    effects: Floats, rng: np.random.Generator, resamples: int, level: float
) -> tuple[float, float]:
    """The bootstrap percentile interval of the trimmed mean over jobs, widened about it for
    the few jobs it may rest on (`small_sample_widening`)."""
    draws = effects[rng.integers(0, len(effects), (resamples, len(effects)))]
    centres = centre(draws)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(centres, [tail, 100 - tail])
    mid = float(centre(effects))
    k = small_sample_widening(len(effects), level)
    return mid - k * (mid - float(low)), mid + k * (float(high) - mid)


def placebo_margin(
    placebos: Floats, jobs: int, rng: np.random.Generator, resamples: int, level: float, least: int
) -> float | None:
    """The `level` percentile of |centre| of `jobs` placebo effects all at one shift: a shift
    drawn among those where at least `least` jobs have one, then `jobs` of those jobs with
    replacement. `placebos` is jobs x shifts, NaN where a job has none. None: no such shift."""
    have = np.count_nonzero(~np.isnan(placebos), axis=0)
    shifts = np.flatnonzero(have >= least)
    if not len(shifts):
        return None
    draws = np.bincount(rng.integers(0, len(shifts), resamples), minlength=len(shifts))
    centres = []
    for shift, count in zip(shifts, draws, strict=True):
        if count:
            values = placebos[:, shift][~np.isnan(placebos[:, shift])]
            centres.append(centre(values[rng.integers(0, len(values), (count, jobs))]))
    return float(np.percentile(np.abs(np.concatenate(centres)), level * 100))


def estimate(effects: Sequence[float], placebos: Sequence[Floats], cfg: StatsConfig) -> Estimate:
    """The verdict on one rollout from its crossing jobs' effects and placebo effects (one row
    a job, one column a shift)."""
    values = np.asarray(effects, dtype=np.float64)
    if len(values) == 0:
        return Estimate(0.0, 0.0, 0.0, 0.0, Verdict.TOO_FEW, False)
    rng = np.random.default_rng(cfg.seed)
    effect = float(centre(values))
    low, high = centre_interval(values, rng, cfg.resamples, cfg.level)
    if len(values) < cfg.min_jobs:
        return Estimate(effect, low, high, 0.0, Verdict.TOO_FEW, False)
    margin = placebo_margin(
        np.vstack(placebos), len(values), rng, cfg.resamples, cfg.level, cfg.min_jobs
    )
    measured = margin is not None
    if margin is None:
        margin = high - low
    # The interval holds both the jobs' spread (the bootstrap) and what moves the estimate at
    # moments with no rollout (the margin): the wider of the two on each side.
    low, high = min(low, effect - margin), max(high, effect + margin)
    if low > 0:
        verdict = Verdict.REGRESSION
    elif high < 0:
        verdict = Verdict.IMPROVEMENT
    else:
        verdict = Verdict.NO_EFFECT
    return Estimate(effect, low, high, margin, verdict, measured)
