"""The per-node evidence of /regressions: within each job that ran on both cohorts at once, its
new-cohort nodes' compute time over its old-cohort nodes' at the same instants, pooled over
jobs (bot/regressions/same_work.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from bot.regressions.analysis import analyse
from bot.regressions.models import (
    JobPace,
    NodeCompute,
    PaceSample,
    Rollout,
    Verdict,
    VersionSpan,
)
from bot.regressions.same_work import SameWorkConfig, job_split, job_splits, same_work
from bot.regressions.stats import StatsConfig

START = datetime(2026, 11, 30, tzinfo=UTC)
END = START + timedelta(days=4)
OLD, NEW = "5.15.0-105-generic", "5.15.0-113-generic"
STEP = timedelta(minutes=10)


def _rollout(nodes: list[str]) -> Rollout:
    return Rollout("kernel", OLD, NEW, START, END, tuple(nodes), 1.0)


def _spans(switch: dict[str, datetime]) -> list[VersionSpan]:
    out = []
    for node, at in switch.items():
        out.append(VersionSpan(node, "kernel", OLD, START, at - timedelta(minutes=1)))
        out.append(VersionSpan(node, "kernel", NEW, at, END))
    return out


def _fleet(
    jobs: int, effect: float, seed: int, *, nodes: int = 8, wander: float = 0.01
) -> tuple[list[VersionSpan], list[NodeCompute], dict[str, datetime], list[JobPace]]:
    """`jobs` jobs of `nodes` nodes over 4 days; each job's nodes switch one by one over a few
    hours around day 2; compute time `effect` longer on a switched node; every node of a job
    wanders together (`wander`, hours-long), each with its own level and jitter."""
    rng = np.random.default_rng(seed)
    times = [START + k * STEP for k in range(int((END - START) / STEP))]
    t_h = np.arange(len(times)) * STEP.total_seconds() / 3600
    switch: dict[str, datetime] = {}
    computes: list[NodeCompute] = []
    paces: list[JobPace] = []
    for j in range(jobs):
        names = [f"gpu-{j * nodes + k:04d}" for k in range(nodes)]
        begin = 40 + rng.uniform(0, 16)
        for name in names:
            switch[name] = START + timedelta(hours=begin + rng.uniform(0, 6))
        drift = np.interp(t_h, np.arange(0, 100, 3.0), rng.normal(0, wander, 34))
        base = rng.uniform(0.5, 4.0)
        first = min(switch[n] for n in names)
        pace = base * (1 + drift) * np.where([t >= first for t in times], 1 + effect, 1.0)
        paces.append(
            JobPace(
                str(100 + j),
                tuple(names),
                tuple(PaceSample(t, float(v)) for t, v in zip(times, pace, strict=True)),
            )
        )
        for name in names:
            level = base * 0.75 * (1 + rng.normal(0, 0.003))
            moved = np.array([t >= switch[name] for t in times])
            y = level * (1 + drift) * np.where(moved, 1 + effect, 1.0)
            y = y * (1 + rng.normal(0, 0.004, len(times)))
            computes.append(
                NodeCompute(
                    str(100 + j),
                    name,
                    tuple(PaceSample(t, float(v)) for t, v in zip(times, y, strict=True)),
                )
            )
    return _spans(switch), computes, switch, paces


def test_a_job_on_both_cohorts_shows_the_effect_free_of_its_own_wander() -> None:
    spans, computes, switch, _ = _fleet(1, 0.02, 1, wander=0.03)
    [split] = job_splits(computes, spans, _rollout(list(switch)), SameWorkConfig())
    # A 3 % wander of the whole job moves both cohorts alike: the ratio is the effect.
    assert split.effect == pytest.approx(0.02, abs=0.002)
    # The first node to switch is never old beside a new one, the last never new (nor one
    # that switched within the guard of them): the rest are both in turn.
    assert split.nodes_new | split.nodes_old == frozenset(switch)
    assert 5 <= len(split.nodes_new) <= 7 and 5 <= len(split.nodes_old) <= 7
    assert split.instants >= 6


def test_a_job_whose_nodes_switched_together_or_never_has_no_split() -> None:
    _, computes, switch, _ = _fleet(1, 0.02, 2)
    at = START + timedelta(days=2)
    together = _spans(dict.fromkeys(switch, at))
    assert job_splits(computes, together, _rollout(list(switch)), SameWorkConfig()) == []
    # Nodes the spans do not name are in neither cohort.
    assert job_split("100", computes, {}, SameWorkConfig()) is None


def test_nodes_next_to_their_switch_are_left_out() -> None:
    spans, computes, switch, _ = _fleet(1, 0.02, 3)
    rollout = _rollout(list(switch))
    wide = job_splits(computes, spans, rollout, SameWorkConfig(guard=timedelta(hours=2)))
    narrow = job_splits(computes, spans, rollout, SameWorkConfig(guard=timedelta(0)))
    assert narrow and (not wide or wide[0].instants < narrow[0].instants)


def test_pooled_over_jobs_with_an_interval_that_holds_the_truth() -> None:
    spans, computes, switch, _ = _fleet(14, 0.02, 4)
    splits = job_splits(computes, spans, _rollout(list(switch)), SameWorkConfig())
    assert len(splits) == 14
    sw = same_work(splits, 1.5, 2.5, StatsConfig())
    assert sw is not None and sw.verdict is Verdict.REGRESSION
    assert sw.low_pct < 2.0 < sw.high_pct and sw.high_pct - sw.low_pct < 1.0
    assert sw.jobs == 14 and min(sw.nodes_new, sw.nodes_old) >= 14 * 5
    assert max(sw.nodes_new, sw.nodes_old) <= 14 * 7
    assert sw.agrees
    # A pace interval it does not meet: the two lines disagree.
    assert not same_work(splits, -0.5, 0.5, StatsConfig()).agrees  # type: ignore[union-attr]
    assert same_work(splits[:3], 1.5, 2.5, StatsConfig()).verdict is Verdict.TOO_FEW  # type: ignore[union-attr]
    assert same_work([], 1.5, 2.5, StatsConfig()) is None


def test_its_interval_covers_the_truth_about_as_often_as_it_says() -> None:
    held = 0
    for seed in range(40):
        spans, computes, switch, _ = _fleet(12, 0.01, 100 + seed)
        splits = job_splits(computes, spans, _rollout(list(switch)), SameWorkConfig())
        sw = same_work(splits, 0.0, 2.0, StatsConfig(resamples=500))
        assert sw is not None
        held += sw.low_pct <= 1.0 <= sw.high_pct
    assert held >= 34  # 95 % nominal; 40 seeds


def test_the_finding_carries_it_and_a_disagreement_is_said() -> None:
    spans, computes, _, paces = _fleet(14, 0.02, 5)
    report = analyse(spans, paces, ["kernel"], START, END, computes=computes)
    [f] = report.findings
    assert f.verdict is Verdict.REGRESSION and f.same_work is not None
    assert f.same_work.effect_pct == pytest.approx(2.0, abs=0.3) and f.same_work.agrees
    # Compute times that did not move: the nodes contradict the pace, and the notes say so.
    flat = [
        NodeCompute(c.job_id, c.node, tuple(PaceSample(s.at, 1.0) for s in c.samples))
        for c in computes
    ]
    report = analyse(spans, paces, ["kernel"], START, END, computes=flat)
    [f] = report.findings
    assert f.same_work is not None and not f.same_work.agrees
    assert f.same_work.effect_pct == 0.0 and f.same_work.verdict is Verdict.NO_EFFECT
    assert any("two lines of evidence disagree" in n for n in report.notes)
    # Without per-node compute times there is no such evidence.
    assert analyse(spans, paces, ["kernel"], START, END).findings[0].same_work is None
