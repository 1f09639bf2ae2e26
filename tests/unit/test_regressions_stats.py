"""The statistics across jobs, and the service reading through the port."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import pytest

from bot.regressions.models import JobPace, NodeCompute, Verdict, VersionSpan
from bot.regressions.service import find_regressions
from bot.regressions.stats import (
    StatsConfig,
    centre,
    centre_interval,
    estimate,
    placebo_margin,
    small_sample_widening,
    t_quantile,
)
from tests.regressions_gen import FleetSpec, generate


def test_the_bootstrap_interval_of_the_centre_covers_the_truth_about_95_percent() -> None:
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(200):
        sample = rng.normal(0.01, 0.005, 40)
        low, high = centre_interval(sample, rng, 1000, 0.95)
        covered += low <= 0.01 <= high
    assert 0.88 <= covered / 200 <= 0.99


def test_over_few_jobs_the_interval_widens_as_students_t_would() -> None:
    # Student's t quantiles (tables): 5, 10 and 43 degrees of freedom.
    assert t_quantile(0.95, 5) == pytest.approx(2.5706, rel=0.002)
    assert t_quantile(0.95, 10) == pytest.approx(2.2281, rel=0.001)
    assert t_quantile(0.95, 43) == pytest.approx(2.0167, rel=0.001)
    assert small_sample_widening(6, 0.95) == pytest.approx(1.435, abs=0.01)
    assert 1.0 < small_sample_widening(44, 0.95) < 1.05
    assert small_sample_widening(1, 0.95) == 1.0
    # Six jobs of normal effects: widened, it holds the truth about 95 % of the time (the
    # percentile bootstrap alone about 85 %).
    rng = np.random.default_rng(7)
    held = 0
    for _ in range(400):
        sample = rng.normal(0.02, 0.004, 6)
        low, high = centre_interval(sample, rng, 500, 0.95)
        held += low <= 0.02 <= high
    assert 0.92 <= held / 400 <= 0.99


def test_the_centre_is_a_trimmed_mean_one_wild_job_does_not_move() -> None:
    values = np.array([0.01, 0.011, 0.009, 0.012, 0.008, 0.010, 0.010, 0.011, 0.009, 0.5])
    # A fifth cut from either end: two of ten each side, the wild job among them; the mean of
    # the middle six (0.009, 0.010, 0.010, 0.010, 0.011, 0.011).
    assert float(centre(values)) == pytest.approx(0.061 / 6)
    rows = np.vstack([values, values * 2])
    assert centre(rows) == pytest.approx([0.061 / 6, 0.122 / 6])
    # Too few to cut a fifth from (fewer than five): the mean of them all.
    assert float(centre(np.array([0.03]))) == 0.03
    assert float(centre(np.array([0.0, 0.01, 0.5]))) == pytest.approx(0.17, abs=0.01)


def test_the_margin_is_the_spread_of_the_median_at_shifted_moments() -> None:
    """40 jobs whose placebo effects are noise of 1 % around a shared shift per moment of
    +-0.5 %: the margin holds both, far more than the 1 % / sqrt(40) of the noise alone."""
    rng = np.random.default_rng(2)
    shared = rng.choice([-0.005, 0.005], 30)
    placebos = rng.normal(0, 0.01, (40, 30)) + shared
    placebos[rng.random((40, 30)) < 0.3] = np.nan
    margin = placebo_margin(placebos, 40, rng, 2000, 0.95, 5)
    assert margin is not None and 0.005 < margin < 0.012
    # No shift with enough jobs: no margin to measure.
    assert placebo_margin(np.full((40, 3), np.nan), 40, rng, 100, 0.95, 5) is None


def test_a_claim_needs_the_interval_to_exclude_zero_with_the_margin_in_it() -> None:
    cfg = StatsConfig()
    rng = np.random.default_rng(3)
    quiet = rng.normal(0, 0.001, (30, 20))
    clear = estimate(list(rng.normal(0.01, 0.002, 30)), list(quiet), cfg)
    assert clear.verdict is Verdict.REGRESSION and clear.low > 0 and clear.placebo_measured
    # The same jobs' effects, but their moments away from the rollout wander by 2 %.
    loud = estimate(list(rng.normal(0.01, 0.002, 30)), list(rng.normal(0, 0.03, (30, 20))), cfg)
    assert loud.verdict is Verdict.NO_EFFECT
    assert loud.low <= loud.effect - loud.margin and loud.low < 0 < loud.high
    better = estimate(list(rng.normal(-0.01, 0.002, 30)), list(quiet), cfg)
    assert better.verdict is Verdict.IMPROVEMENT and better.high < 0
    # Without any moment to compare with, the interval's own width stands in, doubled.
    blind = estimate(list(rng.normal(0.01, 0.002, 30)), list(np.full((30, 2), np.nan)), cfg)
    assert not blind.placebo_measured and blind.high - blind.low > 0
    few = estimate([0.05, 0.06, 0.05], list(quiet[:3]), cfg)
    assert few.verdict is Verdict.TOO_FEW
    assert estimate([], [], cfg).verdict is Verdict.TOO_FEW


def test_the_same_data_gives_the_same_answer() -> None:
    rng = np.random.default_rng(4)
    effects, placebos = list(rng.normal(0.003, 0.01, 25)), list(rng.normal(0, 0.01, (25, 10)))
    assert estimate(effects, placebos, StatsConfig()) == estimate(effects, placebos, StatsConfig())


class GeneratedHistory:
    """The port over a generated fleet (the simulator and Prometheus have their own)."""

    name = "generated"

    def __init__(self, spans: list[VersionSpan], paces: list[JobPace]) -> None:
        self._spans, self._paces = spans, paces
        self.asked: list[tuple[str, ...]] = []

    async def versions(
        self, components: Sequence[str], *, start: datetime, end: datetime
    ) -> list[VersionSpan]:
        self.asked.append(tuple(components))
        return [
            s for s in self._spans if s.component in components and s.start < end and s.end > start
        ]

    async def job_paces(self, *, start: datetime, end: datetime) -> list[JobPace]:
        return self._paces

    async def node_compute(self, *, start: datetime, end: datetime) -> list[NodeCompute]:
        return []  # the generated jobs export no per-node compute time


async def test_the_service_reads_through_the_port_says_its_progress_and_answers() -> None:
    fleet = generate(FleetSpec(nodes=1024, effect=0.02, image_effect=0.0), 9)
    history = GeneratedHistory(fleet.spans, fleet.paces)
    said: list[str] = []

    async def progress(text: str) -> None:
        said.append(text)

    report = await find_regressions(
        history,
        ["kernel"],
        start=fleet.start,
        end=fleet.end,
        progress=progress,
        confounders=["kernel", "image", "driver"],
    )
    assert history.asked == [("kernel", "image", "driver")]
    assert len(said) == 3 and "1,024 nodes" in said[1] and f"{len(fleet.paces)} jobs" in said[2]
    [kernel] = report.findings
    # The image moved with the kernel (with no effect of its own): named, not guessed apart.
    assert kernel.verdict is Verdict.REGRESSION and kernel.confounded_with == ("image v42",)
    # A dozen jobs cross on 1,024 nodes: the estimate is within about two of its spreads.
    assert kernel.effect_pct == pytest.approx(2.0, abs=0.5)
    assert kernel.low_pct < kernel.effect_pct < kernel.high_pct
    assert report.component == "kernel" and report.jobs_read == len(fleet.paces)
    assert report.nodes_read == 1024
    # Without progress and confounders, the same finding bar what it cannot see.
    quiet = await find_regressions(history, ["kernel"], start=fleet.start, end=fleet.end)
    assert quiet.findings[0].confounded_with == ()
