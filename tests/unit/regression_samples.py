"""Hand-built regression reports for the renderer and chart tests: the shapes the finder
answers with (bot/regressions/models.py), with paces drawn from a seeded generator."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from bot.regressions.aligned import align
from bot.regressions.models import (
    Finding,
    JobPace,
    PaceSample,
    RegressionReport,
    Rollout,
    Verdict,
)

END = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
START = END - timedelta(days=7)
BEGAN = datetime(2026, 12, 1, 3, 10, tzinfo=UTC)  # a Tuesday


def rollout(component: str, old: str, new: str, nodes: int, *, hours: float = 26.0) -> Rollout:
    return Rollout(
        component=component,
        old=old,
        new=new,
        start=BEGAN,
        end=BEGAN + timedelta(hours=hours),
        nodes=tuple(f"gpu-{i:04d}" for i in range(1, nodes + 1)),
        coverage=0.93,
    )


def paces(jobs: int, effect_pct: float, seed: int = 1) -> tuple[list[JobPace], dict[str, datetime]]:
    """`jobs` synchronous jobs, each switching at its own moment of the rollout, their pace
    `effect_pct` slower after it, with 1 % noise a sample and a slow drift."""
    rng = random.Random(seed)
    out, switches = [], {}
    for j in range(jobs):
        job_id = str(4_200_000 + j)
        base = rng.uniform(0.8, 6.0)
        switched = BEGAN + timedelta(hours=rng.uniform(0, 26))
        samples = []
        at = switched - timedelta(hours=48)
        while at <= switched + timedelta(hours=48):
            drift = 1 + 0.002 * ((at - switched).total_seconds() / 86400)
            after = 1 + effect_pct / 100 if at >= switched else 1.0
            samples.append(PaceSample(at, base * drift * after * rng.gauss(1, 0.01)))
            at += timedelta(minutes=30)
        out.append(JobPace(job_id, (f"gpu-{j:04d}",), tuple(samples)))
        switches[job_id] = switched
    return out, switches


def finding(
    verdict: Verdict,
    effect: float,
    low: float,
    high: float,
    *,
    component: str = "kernel",
    old: str = "5.15.0-105-generic",
    new: str = "5.15.0-113-generic",
    jobs: int = 37,
    nodes: int = 1912,
    clean: int = 31,
    confounded: tuple[str, ...] = (),
    gpu_days: float = 0.0,
    aligned: bool = True,
    seed: int = 1,
) -> Finding:
    job_paces, switches = paces(jobs, effect, seed)
    rng = random.Random(seed)
    lines = [align(p, switches[p.job_id]) for p in job_paces] if aligned else []
    return Finding(
        rollout=rollout(component, old, new, nodes),
        verdict=verdict,
        effect_pct=effect,
        low_pct=low,
        high_pct=high,
        margin_pct=0.4,
        jobs=jobs,
        nodes=nodes,
        clean_jobs=clean,
        confounded_with=confounded,
        gpu_days_per_week=gpu_days,
        job_effects=tuple((p.job_id, effect + rng.gauss(0, 0.8)) for p in job_paces),
        aligned=tuple(a for a in lines if a is not None),
    )


def monday_report() -> RegressionReport:
    """A week with a kernel regression, a confounded driver one, an improvement, a rollout
    with no effect and one too thin to judge."""
    return RegressionReport(
        start=START,
        end=END,
        component=None,
        findings=(
            finding(Verdict.REGRESSION, 2.1, 1.7, 2.5, gpu_days=6.1),
            finding(
                Verdict.REGRESSION,
                1.2,
                0.6,
                1.8,
                component="driver",
                old="550.54.15",
                new="550.90.07",
                jobs=14,
                nodes=300,
                clean=0,
                confounded=("image v42",),
                gpu_days=1.4,
                seed=2,
            ),
            finding(
                Verdict.IMPROVEMENT,
                -0.9,
                -1.3,
                -0.5,
                component="image",
                old="v41",
                new="v42",
                jobs=52,
                nodes=900,
                clean=40,
                gpu_days=-2.3,
                seed=3,
            ),
            finding(
                Verdict.NO_EFFECT,
                0.1,
                -0.3,
                0.4,
                component="firmware",
                old="96.00.89.00.01",
                new="96.00.99.00.01",
                jobs=60,
                nodes=2048,
                clean=55,
                seed=4,
            ),
            finding(
                Verdict.TOO_FEW,
                0.0,
                0.0,
                0.0,
                component="nccl",
                old="2.20.5",
                new="2.21.5",
                jobs=2,
                nodes=16,
                clean=2,
                seed=5,
            ),
        ),
        jobs_read=412,
        nodes_read=4096,
        notes=("VBIOS was not exported by 12 nodes: their firmware is unknown.",),
    )


def quiet_report() -> RegressionReport:
    """A week whose only rollout moved nothing."""
    return RegressionReport(
        start=START,
        end=END,
        component="kernel",
        findings=(finding(Verdict.NO_EFFECT, 0.05, -0.35, 0.4, gpu_days=0.1),),
        jobs_read=300,
        nodes_read=4096,
    )
