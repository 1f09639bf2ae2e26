"""Rolling upgrades in the simulated fleet: node by node, shown in the exported versions, and a
true effect on each synchronous job's step time from the moment its first node is upgraded."""

from __future__ import annotations

import asyncio
import math
import statistics
from datetime import UTC, datetime, timedelta

import pytest

from bot import metric_names as m
from bot.backends.sim import SimFleet
from bot.backends.sim.history import SimFleetHistory, pace_step_s
from bot.backends.sim.inventory import KERNEL_VERSION
from bot.models import FaultKind
from bot.regressions.analysis import analyse

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
NEW_KERNEL = "5.15.0-113-generic"
START = NOW - timedelta(days=3)
WEEK = NOW - timedelta(days=7)


def kernel_rollout(effect: float = 0.02, seed: int = 3) -> SimFleet:
    fleet = SimFleet(256, seed=seed, now=NOW, fault_rate=0.0)
    fleet.add_rollout(
        "kernel", NEW_KERNEL, start=START, duration=timedelta(hours=24), effect=effect
    )
    return fleet


def test_nodes_upgrade_one_by_one_over_the_duration_and_all_of_them() -> None:
    fleet = kernel_rollout()
    times = sorted(fleet.rollouts[0].switch_s)
    assert times[0] == START.timestamp()
    assert times[-1] < (START + timedelta(hours=24)).timestamp()
    assert len(set(times)) > 200  # spread, not a step for all
    # In the middle of it, about half the fleet runs the new kernel; in the exposition too.
    mid = START + timedelta(hours=12)
    snap = fleet.snapshot(mid)
    kernels = [snap.versions(p)[1] for p in range(fleet.n_nodes)]
    assert 100 < kernels.count(NEW_KERNEL) < 156
    releases = {s.label(m.LABEL_RELEASE) for s in fleet.samples(mid, metrics=[m.NODE_UNAME_INFO])}
    assert releases == {KERNEL_VERSION, NEW_KERNEL}
    # After it, every node; the inventory says so as well.
    assert all(fleet.node(n).kernel_version == NEW_KERNEL for n in fleet.nodes[:20])
    assert fleet.node(fleet.nodes[0], at=START - timedelta(minutes=1)).kernel_version == (
        KERNEL_VERSION
    )


def test_a_driver_rollout_shows_on_the_dcgm_label_and_coverage_leaves_nodes_behind() -> None:
    fleet = SimFleet(64, seed=1, now=NOW, fault_rate=0.0)
    fleet.add_rollout("driver", "560.35.03", start=START, duration=timedelta(hours=2), coverage=0.5)
    drivers = [
        s.label(m.LABEL_DRIVER_VERSION)
        for s in fleet.samples(metrics=[m.DCGM_FI_DEV_GPU_TEMP])
        if s.label(m.LABEL_GPU) == "0"
    ]
    assert drivers.count("560.35.03") == 32
    assert sum(math.isinf(t) for t in fleet.rollouts[0].switch_s) == 32


def test_the_effect_moves_a_synchronous_job_at_its_first_upgraded_node() -> None:
    fleet = kernel_rollout(effect=0.02)
    rollout = fleet.rollouts[0]
    spec = max(
        (s for s in fleet.job_specs if s.running(START.timestamp()) and s.exports_step_time),
        key=lambda s: len(s.nodes),
    )
    assert len(spec.nodes) >= 8
    j = fleet.job_specs.index(spec)
    first = rollout.first_switch_s(spec.nodes)
    last = max(rollout.switch_s[n] for n in spec.nodes)
    assert last > first  # its nodes switch one by one, and the step moves at the first

    def pace(t_s: float) -> float:
        at = datetime.fromtimestamp(t_s, UTC)
        return max(it for _, _, _, _, it in fleet.snapshot(at).step_times(j))

    before = [pace(first - 60 * k) for k in range(1, 30)]
    after = [pace(first + 60 * k) for k in range(0, 29)]
    ratio = statistics.median(after) / statistics.median(before)
    assert ratio == pytest.approx(1.02, abs=0.002)
    # Per node: only the upgraded nodes compute longer.
    at = datetime.fromtimestamp(first, UTC)
    rows = fleet.snapshot(at).rank_times(j)
    upgraded = {n for n in spec.nodes if rollout.switched(n, first)}
    assert upgraded and upgraded != set(spec.nodes)
    slow = statistics.median(c for _, n, _, _, _, c, _ in rows if n in upgraded)
    rest = statistics.median(c for _, n, _, _, _, c, _ in rows if n not in upgraded)
    assert slow / rest == pytest.approx(1.02, abs=0.01)


def test_a_coinciding_image_rollout_reaches_every_node_at_the_same_minute() -> None:
    fleet = kernel_rollout()
    image = fleet.add_rollout(
        "image", "v42", old="v41", start=START, duration=timedelta(0), like=fleet.rollouts[0]
    )
    assert image.switch_s == fleet.rollouts[0].switch_s
    assert fleet.version_at(0, "image", START.timestamp() - 60) == "v41"
    assert fleet.version_at(0, "image", NOW.timestamp()) == "v42"
    assert fleet.version_at(0, "nccl", NOW.timestamp()) is None
    with pytest.raises(ValueError, match="old value"):
        fleet.add_rollout("nccl", "2.21", start=START, duration=timedelta(hours=1))


async def test_sim_history_spans_switch_at_the_rollouts_minute_and_drift_on_top() -> None:
    fleet = kernel_rollout()
    fleet.add_rollout("image", "v42", old="v41", start=START, duration=timedelta(0),
                      like=fleet.rollouts[0])  # fmt: skip
    drifted = fleet.nodes[5]
    drift_at = NOW - timedelta(days=1)
    fleet.inject(FaultKind.DRIVER_DRIFT, drifted, since=drift_at, version="535.104.05")
    history = SimFleetHistory(fleet)
    spans = await history.versions(["kernel", "image", "driver"], start=WEEK, end=NOW)
    node = fleet.nodes[0]
    switch = datetime.fromtimestamp(fleet.rollouts[0].switch_s[0], UTC)
    kernel = [s for s in spans if s.node == node and s.component == "kernel"]
    assert [(s.value, s.start, s.end) for s in kernel] == [
        (KERNEL_VERSION, WEEK, switch - timedelta(minutes=1)),
        (NEW_KERNEL, switch, NOW),
    ]
    image = [s.value for s in spans if s.node == node and s.component == "image"]
    assert image == ["v41", "v42"]
    driver = [(s.value, s.start) for s in spans if s.node == drifted and s.component == "driver"]
    assert driver == [("550.54.15", WEEK), ("535.104.05", drift_at)]
    assert history.components() == ("driver", "kernel", "firmware", "image")


async def test_sim_history_paces_are_the_recorded_pace_with_the_true_effect() -> None:
    fleet = kernel_rollout(effect=0.01)
    history = SimFleetHistory(fleet)
    start = NOW - timedelta(days=4)
    paces = await history.job_paces(start=start, end=NOW)
    step = pace_step_s(4 * 86400)
    assert step == 360 and history.reads <= 4 * 86400 // step + 1
    crossed = 0
    for pace in paces:
        spec = fleet.job_spec(pace.job_id)
        assert pace.nodes == spec.job.nodes and pace.gpus == len(spec.nodes) * 8
        first = fleet.rollouts[0].first_switch_s(spec.nodes)
        # The pace wanders on its own (bot/backends/sim/wander.py); taken out, the effect is
        # the rollout's alone.
        steady = [
            (s.at.timestamp(), s.seconds / fleet.wander.factor(spec, s.at.timestamp()))
            for s in pace.samples
        ]
        before = [v for t, v in steady if t < first]
        after = [v for t, v in steady if t >= first]
        if len(before) >= 20 and len(after) >= 20:
            crossed += 1
            ratio = statistics.median(after) / statistics.median(before)
            assert ratio == pytest.approx(1.01, abs=0.003)
    assert crossed >= 3


async def test_sim_history_paces_wander_over_hours_as_a_fleets_do() -> None:
    fleet = kernel_rollout(effect=0.0)
    start = NOW - timedelta(days=4)
    paces = await SimFleetHistory(fleet).job_paces(start=start, end=NOW)
    again = await SimFleetHistory(kernel_rollout(effect=0.0)).job_paces(start=start, end=NOW)
    assert paces == again  # seeded: the same fleet wanders the same way
    spreads, hourly = [], []
    for pace in paces:
        values = [s.seconds for s in pace.samples]
        if len(values) < 400:
            continue
        level = statistics.median(values)
        # The spread of the job's hourly medians: what a before/after comparison meets.
        hours = [
            statistics.median(values[k : k + 10]) / level for k in range(0, len(values) - 9, 10)
        ]
        hourly.append(statistics.pstdev(hours))
        spreads.append(max(hours) - min(hours))
        # Checkpoint minutes are spikes, well under a stall (25 %).
        assert max(values) / level < 1.15
    assert len(hourly) >= 5
    # Tenths of a percent over hours, a percent or two over days: neither flat nor a fault.
    assert 0.002 < statistics.median(hourly) < 0.01
    assert 0.008 < statistics.median(spreads) < 0.04


async def test_sim_history_per_node_compute_is_longer_on_the_upgraded_nodes_only() -> None:
    fleet = kernel_rollout(effect=0.02)
    history = SimFleetHistory(fleet)
    start = NOW - timedelta(days=4)
    # Asked together (as the service does), the window is simulated once for both reads.
    paces, computes = await asyncio.gather(
        history.job_paces(start=start, end=NOW), history.node_compute(start=start, end=NOW)
    )
    assert history.reads <= 4 * 86400 // 360 + 1
    profiled = {s.job.job_id for s in fleet.job_specs if s.exports_compute_time}
    assert {c.job_id for c in computes} == profiled & {p.job_id for p in paces}
    rollout = fleet.rollouts[0]
    names = fleet.nodes
    split = 0
    for c in computes:
        spec = fleet.job_spec(c.job_id)
        assert c.node in spec.job.nodes
        n = names.index(c.node)
        # A node's compute time is its ranks' mean: the job's own wander and, once the node
        # itself runs the new kernel (not when the job's first node does), the effect.
        for s in c.samples[:: max(1, len(c.samples) // 20)]:
            rows = fleet.snapshot(s.at).rank_times(fleet.job_specs.index(spec))
            mine = [compute for _, node, _, _, _, compute, _ in rows if node == n]
            assert s.seconds == pytest.approx(statistics.fmean(mine), rel=1e-9)
        first = rollout.first_switch_s(spec.nodes)
        if rollout.switch_s[n] > first + 3600:
            split += 1
    assert split >= 5
    report = analyse(
        await history.versions(["kernel"], start=start, end=NOW),
        paces,
        ["kernel"],
        start,
        NOW,
        computes=computes,
    )
    [kernel] = report.findings
    sw = kernel.same_work
    # Within each job at the same steps the wander cancels: the true effect, tightly (the
    # simulator's effect is the same on every node; three of its jobs span both cohorts here,
    # too few for a verdict of their own).
    assert sw is not None and sw.jobs >= 3 and sw.agrees
    assert sw.effect_pct == pytest.approx(2.0, abs=0.1)
    assert sw.low_pct <= 2.0 <= sw.high_pct and sw.high_pct - sw.low_pct < 0.6
