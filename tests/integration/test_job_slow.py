"""/job-slow's service against the real Prometheus fed by the simulated fleet, and the real Slurm.

The scenario (prom_scenario.JOBS) runs training jobs on the test fleet, whose planned node
faults are the ground truth:

- one job per planned fault that slows a job (``CAUSE_JOBS``), that node and four clean ones:
  the node must be named with its cause (the job's identity from the fleet's own scheduler: the
  test Slurm has 16 nodes only);
- ``train-one-throttled`` and ``train-healthy``: submitted to the real Slurm as well, whose job
  ids the exporter then writes on their step times (sim_exporter ``--aliases``): a throttled node
  named, and ordinary jitter given no culprit;
- ``train-slow-everywhere``: 9 % slower on every node for two hours, against a day earlier:
  the "not the nodes" answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.backends.prometheus import PrometheusInventory, PrometheusMetrics
from bot.backends.sim.fleet import STRAGGLER_NODE_KINDS, SimFleet
from bot.backends.sim.scheduler import SimScheduler
from bot.backends.slurm import SlurmRest
from bot.models import FaultKind, Job, JobState
from bot.ports import Scheduler
from bot.triage.checks import HealthConfig
from bot.triage.jobs import SlowJobReport, find_job, slow_job
from bot.triage.service import Triage, UserError
from bot.triage.stragglers import StragglerConfig
from tests.conftest import need_service
from tests.integration import prom_scenario as scenario
from tests.integration.engines import BOTH

HEALTH = HealthConfig(window_s=scenario.WINDOW_S)
CFG = StragglerConfig()
RANKS_PER_NODE = 8
ALIAS_WAIT_S = 30.0


@pytest.fixture(scope="module")
def fleet() -> SimFleet:
    return scenario.make_fleet(scenario.from_epoch(need_service("MEOWBOT_TEST_SIM_NOW")))


async def _diagnose(prom_url: str, scheduler: Scheduler, job_id: str) -> tuple[SlowJobReport, int]:
    """The job through find_job and slow_job, as /job-slow runs them; and the PromQL count."""
    metrics = PrometheusMetrics(prom_url, timeout_s=10.0)
    triage = Triage(metrics, PrometheusInventory(metrics), scheduler, HEALTH, CFG)
    try:
        job = await find_job(triage, job_id, CFG)
        assert isinstance(job, Job), job
        report = await slow_job(triage, job, CFG)
    finally:
        await metrics.close()
    assert isinstance(report, SlowJobReport), report
    return report, metrics.queries


def _causes(report: SlowJobReport) -> dict[str, FaultKind | None]:
    return {s.node: s.cause.kind if s.cause else None for s in report.diagnosis.stragglers}


# ------------------------------------------------- the fleet's jobs, through real Prometheus
LAG_S = 6  # how late the pace rules may run after the scrape they read, on a loaded machine


@BOTH
@pytest.mark.parametrize("job", scenario.CAUSE_JOBS, ids=lambda j: j.name)
async def test_each_slowing_fault_is_named_on_its_node_with_its_cause(
    prom_url: str, fleet: SimFleet, job: scenario.PlannedJob
) -> None:
    report, _ = await _diagnose(prom_url, SimScheduler(fleet), job.job_id)
    d = report.diagnosis
    expected = {n: k for n, k in scenario.STRAGGLER_NODES.items() if n in job.nodes}
    assert len(expected) == 1
    assert _causes(report) == expected, d.per_node
    assert d.mode == "compute time" and d.missing == [] and d.job_cause is None
    straggler = d.stragglers[0]
    assert straggler.wait_s is not None and d.wait_median_s is not None
    assert straggler.wait_s < d.wait_median_s  # the others wait for it
    assert d.gpu_hours_per_day > 0
    assert report.not_run == {}
    # The fault began hours ago and the job has run three days: slower than a day earlier.
    assert d.comparison is not None and d.comparison.baseline == "24 h earlier"
    # The job's pace also wanders with its data and the day (bot/backends/sim/wander.py), by
    # up to a point or so between two days: the fault's own part is the change without it.
    wander = fleet.wander.drift(job.job_id, fleet.now_s) / fleet.wander.drift(
        job.job_id, fleet.now_s - 86400
    )
    assert (1 + d.comparison.change) / wander - 1 > CFG.slower_threshold, wander
    assert len(report.pace) > 250 and report.yesterday  # the chart's 48 h and its overlay


# What the simulator's effects leave in a hardware proxy (bot/backends/sim/faults.py): without
# compute times, these causes are named by the hardware; the rest only suspected.
PROXY_VISIBLE = frozenset(
    {
        FaultKind.THROTTLE_POWER,
        FaultKind.THROTTLE_HW_SLOWDOWN,
        FaultKind.THROTTLE_SW_THERMAL,
        FaultKind.THROTTLE_HW_THERMAL,
        FaultKind.POWER_BRAKE,
        FaultKind.LOW_SM_CLOCK,
        FaultKind.NVLINK_CRC,
        FaultKind.NVLINK_REPLAY,
        FaultKind.IB_FLAPPING,
        FaultKind.IB_SYMBOL_ERRORS,
        FaultKind.CPU_CONTENTION,
        FaultKind.NUMA_MISPLACEMENT,
    }
)
# The same jobs read as if they exported step times only: the compute and wait metrics named
# in the config exist nowhere, so every rank's equal step time is all the training tells.
STEPS_ONLY = StragglerConfig(
    compute_metric="meowbot_test_no_compute_seconds", wait_metric="meowbot_test_no_wait_seconds"
)


@BOTH
@pytest.mark.parametrize("job", scenario.CAUSE_JOBS, ids=lambda j: j.name)
async def test_with_equal_step_times_each_cause_is_named_by_the_hardware_or_suspected(
    prom_url: str, fleet: SimFleet, job: scenario.PlannedJob
) -> None:
    metrics = PrometheusMetrics(prom_url, timeout_s=10.0)
    triage = Triage(metrics, PrometheusInventory(metrics), SimScheduler(fleet), HEALTH, STEPS_ONLY)
    expected = {n: k for n, k in scenario.STRAGGLER_NODES.items() if n in job.nodes}
    ((node, kind),) = expected.items()
    try:
        # A scrape lost on 2 busy cores leaves the clock-event reasons stale for a second: the
        # node is then named by its SM clock alone. Ask again; a wrong cause stays wrong.
        for _ in range(3):
            found = await find_job(triage, job.job_id, STEPS_ONLY)
            assert isinstance(found, Job), found
            report = await slow_job(triage, found, STEPS_ONLY)
            assert isinstance(report, SlowJobReport), report
            if kind not in PROXY_VISIBLE or _causes(report) == expected:
                break
            await asyncio.sleep(2)
        steps = [r.seconds for r in await metrics.step_times(job.job_id, STEPS_ONLY)]
    finally:
        await metrics.close()
    assert steps and max(steps) < min(steps) * 1.01  # synchronous: no rank stands out
    d = report.diagnosis
    if kind in PROXY_VISIBLE:
        assert _causes(report) == expected, (d.per_node, d.stragglers)
        assert d.mode == "proxies" and d.cost_is_bound
    else:
        assert d.stragglers == [] and d.job_cause is None
        assert [(x.node, x.cause.kind) for x in d.suspects] == [(node, kind)]


@BOTH
@pytest.mark.parametrize("job", scenario.PROXY_JOBS, ids=lambda j: j.name)
async def test_without_step_times_the_proxies_name_the_straggler_and_its_cause(
    prom_url: str, fleet: SimFleet, job: scenario.PlannedJob
) -> None:
    """Jobs that export no step time, read through real Prometheus: NVLink traffic, InfiniBand
    traffic (a counter, read as its increase) and GPU utilisation each find their node, the
    health evidence names the cause, and the healthy job has no culprit."""
    report, _ = await _diagnose(prom_url, SimScheduler(fleet), job.job_id)
    d = report.diagnosis
    assert d.mode == "proxies" and d.missing == [] and d.job_cause is None
    assert sorted(d.per_node) == sorted(job.nodes)
    expected = {n: k for n, k in scenario.PROXY_STRAGGLERS.items() if n in job.nodes}
    assert _causes(report) == expected, (d.per_node, d.stragglers)
    proxy = {
        FaultKind.NVLINK_CRC: "NVLink TX",
        FaultKind.IB_SYMBOL_ERRORS: "InfiniBand RX",
        FaultKind.CPU_CONTENTION: "GPU utilisation",
    }
    for s in d.stragglers:
        assert s.lag is not None and s.cause is not None
        assert s.lag.proxy.label == proxy[s.cause.kind]
    assert (d.gpu_hours_per_day > 0) == bool(expected)


def test_the_jobs_cover_every_slowing_kind() -> None:
    named = {
        scenario.STRAGGLER_NODES[n]
        for j in scenario.CAUSE_JOBS
        for n in j.nodes
        if n in scenario.STRAGGLER_NODES
    }
    throttles = {
        scenario.STRAGGLER_NODES[n]
        for n in scenario.SLURM_STRAGGLERS.nodes
        if n in scenario.STRAGGLER_NODES
    }
    assert named | throttles == set(STRAGGLER_NODE_KINDS)


@BOTH
async def test_the_query_count_does_not_grow_with_the_job(prom_url: str, fleet: SimFleet) -> None:
    small = fleet.job(scenario.CAUSE_JOBS[0].job_id)
    counts = []
    for nodes in (small.nodes, tuple(fleet.nodes)):
        metrics = PrometheusMetrics(prom_url, timeout_s=10.0)
        triage = Triage(metrics, PrometheusInventory(metrics), SimScheduler(fleet), HEALTH, CFG)
        try:
            report = await slow_job(triage, small.model_copy(update={"nodes": tuple(nodes)}), CFG)
        finally:
            await metrics.close()
        assert isinstance(report, SlowJobReport)
        counts.append(metrics.queries)
    assert counts[0] == counts[1] > 0, counts


@BOTH
async def test_a_job_slow_on_every_node_together_is_not_the_nodes(
    prom_url: str, fleet: SimFleet
) -> None:
    report, _ = await _diagnose(prom_url, SimScheduler(fleet), scenario.SLOW_EVERYWHERE.job_id)
    d = report.diagnosis
    assert d.stragglers == []
    assert d.not_the_nodes and d.job_cause is not None
    assert d.job_cause.kind is FaultKind.JOB_SLOWDOWN
    assert d.comparison is not None
    # The job's pace also wanders with its data and the day (bot/backends/sim/wander.py), by
    # up to a point or so between two days: the change due is the slowdown times that wander.
    job_id = scenario.SLOW_EVERYWHERE.job_id
    wander = fleet.wander.drift(job_id, fleet.now_s) / fleet.wander.drift(
        job_id, fleet.now_s - 86400
    )
    due = (1 + scenario.SLOW_EVERYWHERE.slowdown) * wander - 1
    assert abs(d.comparison.change - due) < 0.03, (d.comparison.change, due)
    assert d.gpu_hours_per_day == 0


# ------------------------------------------------------- jobs submitted to the real Slurm
def _cli(conf: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}  # munge for the CLI
    env["SLURM_CONF"] = conf
    out = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"{args}: {out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def slurm_jobs(prom_url: str) -> Iterator[dict[str, str]]:
    """The two Slurm-range scenario jobs submitted to Slurm: scenario id -> Slurm id, with the
    exporter told to write Slurm's ids on their step times, and Prometheus showing them."""
    conf = need_service("SLURM_CONF")
    aliases = need_service("MEOWBOT_TEST_JOB_ALIASES")
    ids: dict[str, str] = {}
    try:
        for job in (scenario.SLURM_STRAGGLERS, scenario.SLURM_HEALTHY):
            out = _cli(
                conf,
                "sbatch",
                "--parsable",
                "-w",
                ",".join(job.nodes),
                "-N",
                str(len(job.nodes)),
                "-J",
                job.name,
                "-o",
                "/dev/null",
                "--chdir",
                "/",
                "--wrap",
                "sleep 900",
            )
            ids[job.job_id] = out.strip().split(";")[0]
        with open(aliases + ".tmp", "w", encoding="utf-8") as f:
            json.dump(ids, f)
        os.replace(aliases + ".tmp", aliases)  # the exporter never reads half a file
        asyncio.run(_wait_for_series(prom_url, ids, scenario.SLURM_STRAGGLERS.nodes))
        yield ids
    finally:
        for slurm_id in ids.values():
            subprocess.run(
                ["scancel", slurm_id], env={**os.environ, "SLURM_CONF": conf}, timeout=30
            )


async def _wait_for_series(prom_url: str, ids: dict[str, str], nodes: tuple[str, ...]) -> None:
    """Until every rank of both jobs is scraped under its Slurm id (the scrape is every second)."""
    metrics = PrometheusMetrics(prom_url, timeout_s=5.0)
    sizes = {
        ids[scenario.SLURM_STRAGGLERS.job_id]: len(scenario.SLURM_STRAGGLERS.nodes),
        ids[scenario.SLURM_HEALTHY.job_id]: len(scenario.SLURM_HEALTHY.nodes),
    }
    deadline = time.monotonic() + ALIAS_WAIT_S
    seen: dict[str, int] = {}
    try:
        while time.monotonic() < deadline:
            seen = {}
            for slurm_id in sizes:
                rows = await metrics.step_times(slurm_id, CFG)
                seen[slurm_id] = len(rows)
            if all(seen[i] == n * RANKS_PER_NODE for i, n in sizes.items()):
                return
            await asyncio.sleep(0.5)
    finally:
        await metrics.close()
    raise AssertionError(f"step times under Slurm's ids not scraped in {ALIAS_WAIT_S} s: {seen}")


@pytest.fixture
async def slurm() -> AsyncIterator[SlurmRest]:
    adapter = SlurmRest(
        need_service("SLURM_REST_URL"),
        token=need_service("SLURM_JWT"),
        user=need_service("SLURM_USER"),
        slurm_conf=need_service("SLURM_CONF"),
        timeout_s=10,
    )
    yield adapter
    await adapter.close()


async def _running(slurm: SlurmRest, slurm_id: str, timeout_s: float = 30) -> Job:
    deadline = time.monotonic() + timeout_s
    job = None
    while time.monotonic() < deadline:
        job = await slurm.job(slurm_id)
        if job is not None and job.state is JobState.RUNNING:
            return job
        await asyncio.sleep(0.3)
    raise AssertionError(f"Slurm job {slurm_id} did not start in {timeout_s} s: {job}")


async def test_a_slurm_job_with_a_throttled_node_names_it(
    prom_url: str, slurm: SlurmRest, slurm_jobs: dict[str, str]
) -> None:
    job = scenario.SLURM_STRAGGLERS
    slurm_id = slurm_jobs[job.job_id]
    held = await _running(slurm, slurm_id)
    assert sorted(held.nodes) == sorted(job.nodes)  # the nodes come from Slurm
    report, _ = await _diagnose(prom_url, slurm, slurm_id)
    d = report.diagnosis
    assert d.job.job_id == slurm_id and d.job.name == job.name and d.job.user == "root"
    expected = {n: k for n, k in scenario.STRAGGLER_NODES.items() if n in job.nodes}
    assert expected == {"gpu-0012": FaultKind.THROTTLE_HW_SLOWDOWN}
    # Synchronous, no compute times: every rank reports the same iteration time, and the
    # throttled node is named by its own SM clock.
    metrics = PrometheusMetrics(prom_url, timeout_s=10.0)
    try:
        rows = await metrics.step_times(slurm_id, CFG)
    finally:
        await metrics.close()
    steps = [r.seconds for r in rows]
    assert len(steps) == len(job.nodes) * RANKS_PER_NODE and max(steps) < min(steps) * 1.01
    assert _causes(report) == expected, d.per_node
    assert d.mode == "proxies" and d.has_steps
    lag = d.stragglers[0].lag
    assert lag is not None and lag.proxy.label == "SM clock"
    assert d.missing == []
    # Slurm started the job seconds ago and knows no previous run: nothing to compare with.
    assert d.comparison is None


async def test_a_healthy_slurm_job_with_ordinary_jitter_has_no_culprit(
    prom_url: str, slurm: SlurmRest, slurm_jobs: dict[str, str]
) -> None:
    slurm_id = slurm_jobs[scenario.SLURM_HEALTHY.job_id]
    await _running(slurm, slurm_id)
    report, _ = await _diagnose(prom_url, slurm, slurm_id)
    d = report.diagnosis
    values = sorted(d.per_node.values())
    assert len(values) == len(scenario.SLURM_HEALTHY.nodes)
    # Real jitter between the nodes, not one number. How much depends on the instant's noise
    # draws (0.05 % at one instant of a clean-clone run), so only its presence is asserted.
    assert values[-1] > values[0]
    assert d.stragglers == [] and d.job_cause is None and not d.not_the_nodes
    assert d.missing == []


@pytest.mark.parametrize("job_id", ["98765432", "team-a/pytorchjob/llm-7b"])
async def test_an_unknown_job_is_a_sentence_from_slurm(
    prom_url: str, slurm: SlurmRest, job_id: str
) -> None:
    """A Kubernetes id asked of a Slurm-only meowbot is no Slurm job, said as for any."""
    metrics = PrometheusMetrics(prom_url, timeout_s=5.0)
    triage = Triage(metrics, PrometheusInventory(metrics), slurm, HEALTH, CFG)
    try:
        answer = await find_job(triage, job_id, CFG)
    finally:
        await metrics.close()
    assert isinstance(answer, UserError)
    assert f"Slurm knows no job {job_id}" in answer.sentence
    assert "Traceback" not in answer.sentence


# ------------------------------------------------- the pace from the recording rules
async def test_the_recorded_pace_is_the_raw_pace_where_the_rules_cover_the_range(
    prom_url: str,
) -> None:
    """scripts/testsvc/prometheus.py loads the pace rules (every second) at start: over a
    range they have run through, the recorded pace is read, and is the raw pace up to the
    rules' lag (a second here); over 48 h, before the rules ran, the pace is read raw."""
    job_id = scenario.SLOW_EVERYWHERE.job_id
    recorded = PrometheusMetrics(prom_url, timeout_s=10.0)
    raw = PrometheusMetrics(prom_url, timeout_s=10.0, recorded=False)
    try:
        # The rules started with Prometheus: wait until they have run through 20 s.
        for _ in range(20):
            end = datetime.now(UTC) - timedelta(seconds=5)  # every sample of the range is in
            start = end - timedelta(seconds=20)
            fast = await recorded.pace(job_id, CFG, start=start, end=end, step_s=1)
            if recorded.recorded_reads:
                break
            await asyncio.sleep(2)
        slow = await raw.pace(
            job_id, CFG, start=start - timedelta(seconds=LAG_S), end=end, step_s=1
        )
        assert recorded.recorded_reads == 2
        tried = recorded.queries
        day = await recorded.pace(job_id, CFG, start=end - timedelta(hours=48), end=end, step_s=60)
        assert recorded.recorded_reads == 2 and recorded.queries == tried + 5  # 2 tried, 3 raw
        assert day == await raw.pace(
            job_id, CFG, start=end - timedelta(hours=48), end=end, step_s=60
        )
    finally:
        await recorded.close()
        await raw.close()
    # A recorded point is the pace at the rules' last run before it (scrapes land once a
    # second, all ranks at once): the raw pace of its step or of one a few seconds before
    # (a rule's run is late by seconds when the test Prometheus shares 2 busy cores).
    # The slowest and the median are two rules, each evaluated as it comes: a scrape may
    # land between them, so each is matched on its own (a CI run once saw that split).
    assert len(fast) >= len(slow) - (LAG_S + 2) > 10  # the raw read starts LAG_S earlier
    by_time = {p.at: p for p in slow}
    for p in fast:
        near = [by_time[at] for k in range(LAG_S) if (at := p.at - timedelta(seconds=k)) in by_time]
        assert p.slowest in {q.slowest for q in near}, (p, near)
        assert p.median in {q.median for q in near}, (p, near)
