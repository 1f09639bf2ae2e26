"""Cohorts and rollouts from node histories, and what an effect costs a week."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.regressions.cohorts import find_rollouts, node_changes
from bot.regressions.cost import gpu_days_per_week
from bot.regressions.effects import EffectConfig, series
from bot.regressions.models import JobPace, NodeChange, PaceSample, Rollout, VersionSpan

T0 = datetime(2026, 12, 1, tzinfo=UTC)
END = T0 + timedelta(days=7)
H = timedelta(hours=1)


def span(
    node: str, value: str, start: timedelta, end: timedelta, comp: str = "kernel"
) -> VersionSpan:
    return VersionSpan(node, comp, value, T0 + start, T0 + end)


def test_a_change_is_dated_at_the_first_sample_of_the_new_value_after_the_reboot() -> None:
    spans = [
        # Out of order, with the reboot's gap between the spans.
        span("n1", "B", 10 * H, 7 * 24 * H),
        span("n1", "A", 0 * H, 9.9 * H),
        # The same value read twice (a scrape gap) is no change.
        span("n2", "A", 0 * H, 5 * H),
        span("n2", "A", 6 * H, 7 * 24 * H),
    ]
    assert node_changes(spans) == [NodeChange("n1", "kernel", "A", "B", T0 + 10 * H)]


def test_a_rollout_has_its_start_pace_order_and_coverage() -> None:
    spans = []
    # n0..n7 move from A to B one every 3 hours from hour 24; n8 and n9 never do.
    for i in range(8):
        at = (24 + 3 * i) * H
        spans += [span(f"n{i}", "A", 0 * H, at - 0.1 * H), span(f"n{i}", "B", at, 168 * H)]
    spans += [span("n8", "A", 0 * H, 168 * H), span("n9", "A", 0 * H, 168 * H)]
    # n7 is rolled back to A a day later: it counts as moved, not as running B now.
    spans[-3] = span("n7", "B", 45 * H, 70 * H)
    spans.append(span("n7", "A", 71 * H, 168 * H))
    # Another component changing on the same nodes is another rollout.
    spans += [
        span("n0", "550", 0 * H, 30 * H, "driver"),
        span("n0", "555", 31 * H, 168 * H, "driver"),
    ]
    rollouts = find_rollouts(spans, node_changes(spans))
    [forward] = [r for r in rollouts if r.component == "kernel" and r.new == "B"]
    assert forward.start == T0 + 24 * H and forward.end == T0 + 45 * H
    assert forward.nodes == tuple(f"n{i}" for i in range(8))
    assert forward.coverage == pytest.approx(7 / 10)
    assert forward.per_hour == pytest.approx(8 / 21)
    [back] = [r for r in rollouts if r.component == "kernel" and r.new == "A"]
    assert back.nodes == ("n7",) and back.start == T0 + 71 * H
    [driver] = [r for r in rollouts if r.component == "driver"]
    assert (driver.old, driver.new, driver.nodes, driver.coverage) == ("550", "555", ("n0",), 1.0)
    assert [r.start for r in rollouts] == sorted(r.start for r in rollouts)


def test_the_cost_is_the_slowdown_share_of_todays_gpu_time_on_upgraded_nodes() -> None:
    """A 16-GPU job on an upgraded node ran the whole last day, 2 % slower: of its 16
    GPU-days a day, 0.02/1.02 were the slowdown; a job on nodes that kept the old kernel and
    one that ended before the last day cost nothing."""
    rollout = Rollout("kernel", "A", "B", T0 + 24 * H, T0 + 48 * H, ("n1",), 0.5)

    def job(job_id: str, nodes: tuple[str, ...], until: timedelta, gpus: int) -> JobPace:
        step = timedelta(minutes=10)
        n = int(until / step)
        return JobPace(job_id, nodes, tuple(PaceSample(T0 + i * step, 1.0) for i in range(n)), gpus)

    jobs = [
        job("upgraded", ("n1", "n2"), 7 * 24 * H, 16),
        job("kept", ("n3",), 7 * 24 * H, 64),
        job("ended", ("n1",), 5 * 24 * H, 64),
    ]
    cfg = EffectConfig()
    ready = [s for s in (series(j, cfg) for j in jobs) if s is not None]
    assert gpu_days_per_week(0.02, rollout, ready, END) == pytest.approx(
        16 * 7 * 0.02 / 1.02, rel=0.01
    )
    assert gpu_days_per_week(-0.02, rollout, ready, END) == pytest.approx(
        -16 * 7 * 0.02 / 0.98, rel=0.01
    )
    # Without a GPU count, 8 a node.
    unknown = series(job("u", ("n1", "n2"), 7 * 24 * H, 0), cfg)
    assert unknown is not None
    assert gpu_days_per_week(0.02, rollout, [unknown], END) == pytest.approx(
        16 * 7 * 0.02 / 1.02, rel=0.01
    )
