"""/job-slow's service against the simulated fleet: every straggler cause is named on its node,
ordinary jitter is not a culprit, and job-level slowdowns get the "not the nodes" answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot import metric_names as m
from bot.backends.sim.fleet import STRAGGLER_NODE_KINDS, SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.backends.sim.scheduler import SimScheduler
from bot.models import FaultKind, Job, JobState
from bot.triage.checks import HealthConfig
from bot.triage.jobs import SlowJobReport, find_job, parse_job_id, slow_job
from bot.triage.kinds import words
from bot.triage.service import Triage, UserError
from bot.triage.stragglers import StragglerConfig, outliers, spread

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
JOB_NODES = [f"gpu-{i:04d}" for i in range(1, 17)]
SLOW_NODE = "gpu-0009"
CFG = StragglerConfig()


def _fleet(**job: object) -> tuple[SimFleet, Job]:
    fleet = SimFleet(32, seed=3, now=NOW, fault_rate=0.0)
    return fleet, fleet.add_job(JOB_NODES, user="alice", **job)  # type: ignore[arg-type]


def _triage(fleet: SimFleet) -> Triage:
    return Triage(SimMetrics(fleet), SimInventory(fleet), SimScheduler(fleet), HealthConfig(), CFG)


async def _diagnose(fleet: SimFleet, job: Job, viewer: str | None = None) -> SlowJobReport:
    triage = _triage(fleet)
    found = await find_job(triage, job.job_id, CFG)
    assert isinstance(found, Job)
    report = await slow_job(triage, found, CFG, viewer=viewer, now=NOW)
    assert isinstance(report, SlowJobReport)
    return report


def _step_spread(fleet: SimFleet, job: Job) -> float:
    """How far apart the job's ranks' iteration times are now: (max - min) / median."""
    index = fleet.job_position(job.job_id)
    assert index is not None
    values = [it for *_, it in fleet.snapshot(NOW).step_times(index)]
    return (max(values) - min(values)) / sorted(values)[len(values) // 2]


# Causes whose hardware trace the proxies see (the simulator's effects): in a synchronous job
# whose ranks all report the same step time, these are named without compute times.
PROXY_VISIBLE = {
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


@pytest.mark.parametrize("cause", STRAGGLER_NODE_KINDS, ids=str)
async def test_with_compute_times_each_node_cause_is_named_on_its_node(cause: FaultKind) -> None:
    fleet, job = _fleet(exports_compute_time=True)
    fleet.inject_straggler(job.job_id, cause, node=SLOW_NODE, since=NOW - timedelta(hours=3))
    # Synchronous: every rank reports the same iteration time, the straggler's too.
    assert _step_spread(fleet, job) < 0.01
    d = (await _diagnose(fleet, job)).diagnosis
    assert d.mode == "compute time"
    assert [s.node for s in d.stragglers] == [SLOW_NODE]
    straggler = d.stragglers[0]
    assert straggler.cause is not None and straggler.cause.kind is cause
    assert straggler.excess > CFG.min_excess
    # The straggler waits least in the collective: everyone else waits for it.
    assert straggler.wait_s is not None and d.wait_median_s is not None
    assert straggler.wait_s < d.wait_median_s
    assert d.gpu_hours_per_day > 0 and not d.cost_is_bound
    assert d.report().causes == {SLOW_NODE: cause}
    # The slowdown started 3 h ago: against a day earlier the job is slower now.
    assert d.comparison is not None and d.comparison.change > 0.01


@pytest.mark.parametrize("cause", STRAGGLER_NODE_KINDS, ids=str)
async def test_with_equal_step_times_the_hardware_names_the_node_or_it_is_a_suspect(
    cause: FaultKind,
) -> None:
    """The hardest honest case: a synchronous job, no compute times, every rank reporting the
    same iteration time. What the hardware shows names the node; a cause that leaves no
    hardware trace (drift, PCIe) is a suspect, said apart, never a confirmed straggler."""
    fleet, job = _fleet()
    fleet.inject_straggler(job.job_id, cause, node=SLOW_NODE, since=NOW - timedelta(hours=3))
    assert _step_spread(fleet, job) < 0.01
    d = (await _diagnose(fleet, job)).diagnosis
    if cause in PROXY_VISIBLE:
        assert [s.node for s in d.stragglers] == [SLOW_NODE]
        s = d.stragglers[0]
        assert s.cause is not None and s.cause.kind is cause
        assert s.lag is not None
        assert d.gpu_hours_per_day > 0 and d.cost_is_bound
    else:
        assert d.stragglers == []
        assert [x.node for x in d.suspects] == [SLOW_NODE]
        assert d.suspects[0].cause.kind is cause
        assert d.job_cause is None  # not "every node slowed together"


async def test_a_thermally_throttled_node_of_an_8_node_job_with_equal_steps_is_named() -> None:
    fleet = SimFleet(16, seed=5, now=NOW, fault_rate=0.0)
    job = fleet.add_job(fleet.topology.names[:8], user="alice", step_time_s=1.38)
    node = fleet.topology.names[5]
    fleet.inject(
        FaultKind.THROTTLE_HW_THERMAL,
        node,
        3,
        since=NOW - timedelta(hours=2),
        sm_clock_mhz=1320,
        temp_c=92,
        slowdown=0.33,
    )
    assert _step_spread(fleet, job) < 0.01
    report = await _diagnose(fleet, job)
    d = report.diagnosis
    assert [s.node for s in d.stragglers] == [node]
    s = d.stragglers[0]
    assert s.cause is not None and s.cause.kind is FaultKind.THROTTLE_HW_THERMAL
    assert s.lag is not None and s.lag.proxy.label == "SM clock" and s.lag.value == 1320
    assert d.step_s is not None and 1.38 < d.step_s < 1.9


@pytest.mark.parametrize("seed", range(6))
async def test_healthy_synchronous_jobs_with_idle_clock_dips_have_no_culprit(seed: int) -> None:
    """Ordinary jitter on every rank and proxy, and GPUs read between two steps at a low clock
    and utilisation, across jobs of many sizes with and without compute times."""
    fleet = SimFleet(256, seed=seed, now=NOW, fault_rate=0.0)
    jobs = [
        fleet.add_job(fleet.topology.names[a:b], user="alice", exports_compute_time=seed % 2 == 0)
        for a, b in ((0, 4), (4, 20), (20, 84), (84, 256))
    ]
    snap = fleet.snapshot(NOW)
    clocks = snap.values(m.DCGM_FI_DEV_SM_CLOCK)
    assert clocks is not None and min(clocks) < 1500  # dips are there at this instant
    for job in jobs:
        d = (await _diagnose(fleet, job)).diagnosis
        assert d.stragglers == [] and d.job_cause is None and d.suspects == [], (
            seed,
            len(job.nodes),
            d.stragglers,
        )


async def test_independent_workers_are_judged_by_their_own_step_times() -> None:
    fleet, job = _fleet(synchronous=False)
    fleet.inject_straggler(
        job.job_id, FaultKind.KERNEL_DRIFT, node=SLOW_NODE, since=NOW - timedelta(hours=3)
    )
    assert _step_spread(fleet, job) > 0.03  # no collective: the slow worker's steps are longer
    d = (await _diagnose(fleet, job)).diagnosis
    assert d.mode == "step time"
    assert [s.node for s in d.stragglers] == [SLOW_NODE]
    assert d.stragglers[0].cause is not None
    assert d.stragglers[0].cause.kind is FaultKind.KERNEL_DRIFT


async def test_a_healthy_job_with_ordinary_jitter_has_no_culprit() -> None:
    fleet, job = _fleet()
    report = await _diagnose(fleet, job)
    d = report.diagnosis
    assert d.stragglers == [] and d.job_cause is None and not d.not_the_nodes
    assert d.comparison is not None and abs(d.comparison.change) < CFG.slower_threshold
    assert d.missing == []
    assert len(report.pace) > 1000  # 48 h of minutes for the chart


@pytest.mark.parametrize(
    ("cause", "stages", "compute"),
    [
        (FaultKind.JOB_SLOWDOWN, 1, False),
        (FaultKind.JOB_SLOWDOWN, 1, True),
        (FaultKind.GC_STALLS, 1, False),
        (FaultKind.PIPELINE_IMBALANCE, 4, True),
    ],
    ids=str,
)
async def test_job_level_causes_are_not_blamed_on_a_node(
    cause: FaultKind, stages: int, compute: bool
) -> None:
    fleet, job = _fleet(pipeline_stages=stages, exports_compute_time=compute)
    fleet.inject_straggler(job.job_id, cause, since=NOW - timedelta(hours=3))
    d = (await _diagnose(fleet, job)).diagnosis
    assert d.stragglers == []
    assert d.job_cause is not None and d.job_cause.kind is cause
    assert d.not_the_nodes
    assert d.gpu_hours_per_day == 0
    if cause is FaultKind.JOB_SLOWDOWN:
        # Without compute times a slow stage and a slow job look alike: it says so.
        assert ("pipeline stage" in d.job_cause.evidence) is not compute


# Without step times, each proxy finds the causes that lower it (the sim's effects): the
# straggler is named by the lagging proxy and explained by the node's evidence.
PROXY_CASES = [
    (FaultKind.THROTTLE_HW_SLOWDOWN, "SM clock", {}),
    (FaultKind.POWER_BRAKE, "SM clock", {}),
    (FaultKind.LOW_SM_CLOCK, "SM clock", {}),
    (FaultKind.NVLINK_CRC, "NVLink TX", {}),
    (FaultKind.NVLINK_REPLAY, "NVLink TX", {}),
    (FaultKind.IB_SYMBOL_ERRORS, "InfiniBand RX", {"nic": "mlx5_3"}),
    (FaultKind.IB_FLAPPING, "InfiniBand RX", {"nic": "mlx5_0", "period_s": 600}),
    (FaultKind.CPU_CONTENTION, "GPU utilisation", {}),
    (FaultKind.NUMA_MISPLACEMENT, "GPU utilisation", {}),
]


@pytest.mark.parametrize(("cause", "proxy", "detail"), PROXY_CASES, ids=lambda x: str(x))
async def test_without_step_times_a_proxy_finds_the_straggler_and_its_cause(
    cause: FaultKind, proxy: str, detail: dict[str, object]
) -> None:
    fleet, job = _fleet(exports_step_time=False)
    fleet.inject(cause, SLOW_NODE, since=NOW - timedelta(hours=3), **detail)  # type: ignore[arg-type]
    report = await _diagnose(fleet, job)
    d = report.diagnosis
    assert d.mode == "proxies"
    assert [s.node for s in d.stragglers] == [SLOW_NODE]
    s = d.stragglers[0]
    assert s.cause is not None and s.cause.kind is cause
    assert s.lag is not None and s.lag.proxy.label == proxy
    assert s.lag.value < s.lag.median and s.lag.z > CFG.proxy_z_threshold
    assert d.per_node[SLOW_NODE] == max(d.per_node.values()) > 1 + CFG.min_excess
    assert d.gpu_hours_per_day > 0
    assert report.lagging_label.startswith("slowest proxy")  # what the chart's bars show


async def test_without_step_times_an_nvlink_straggler_is_found_with_no_error_counters() -> None:
    """dcgm-exporter's default counters leave NVLink errors out: the throughput still shows
    the node, and the answer says no fault was found rather than inventing one."""
    fleet = SimFleet(
        32,
        seed=3,
        now=NOW,
        fault_rate=0.0,
        disabled_metrics={
            m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
            m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
        },
    )
    job = fleet.add_job(JOB_NODES, user="alice", exports_step_time=False)
    fleet.inject(FaultKind.NVLINK_CRC, SLOW_NODE, 5, since=NOW - timedelta(hours=3))
    d = (await _diagnose(fleet, job)).diagnosis
    assert [s.node for s in d.stragglers] == [SLOW_NODE]
    s = d.stragglers[0]
    assert s.cause is None
    assert s.lag is not None and s.lag.proxy.label == "NVLink TX"
    assert "NVLink TX" in s.lag.sentence() and "GB/s" in s.lag.sentence()


@pytest.mark.parametrize("seed", range(12))
async def test_without_step_times_healthy_jobs_have_no_culprit(seed: int) -> None:
    """Ordinary noise on every proxy (per-GPU power bases, NVLink and port rates that differ
    by several percent) across jobs of many sizes is never a straggler."""
    fleet = SimFleet(256, seed=seed, now=NOW, fault_rate=0.0)
    jobs = [
        fleet.add_job(fleet.topology.names[a:b], user="alice", exports_step_time=False)
        for a, b in ((0, 4), (4, 20), (20, 84), (84, 256))
    ]
    for job in jobs:
        d = (await _diagnose(fleet, job)).diagnosis
        assert d.mode == "proxies" and d.missing == []
        assert d.stragglers == [] and d.job_cause is None, (seed, len(job.nodes), d.stragglers)


async def test_another_users_job_is_readable_and_says_whose() -> None:
    fleet, job = _fleet()
    assert (await _diagnose(fleet, job, viewer="bob")).owner_note == "alice's job"
    assert (await _diagnose(fleet, job, viewer="alice")).owner_note is None


@pytest.mark.parametrize(
    "text", ["", "abc", "123 456", '1"} or vector(1)', "4100001;rm", "12_", "-5"]
)
def test_bad_job_ids_are_refused_with_a_sentence(text: str) -> None:
    answer = parse_job_id(text)
    assert isinstance(answer, UserError) and "not a job id" in answer.sentence


async def test_unknown_finished_huge_jobs_and_no_scheduler_are_sentences() -> None:
    fleet, job = _fleet()
    triage = _triage(fleet)
    unknown = await find_job(triage, "99999999", CFG)
    assert isinstance(unknown, UserError) and "knows no job 99999999" in unknown.sentence
    finished = next(j for j in fleet.jobs if j.state is not JobState.RUNNING)
    done = await find_job(triage, finished.job_id, CFG)
    assert isinstance(done, UserError) and "looks at running jobs" in done.sentence
    capped = await find_job(triage, job.job_id, StragglerConfig(max_nodes=8))
    assert isinstance(capped, UserError) and "more than the 8" in capped.sentence
    none = await find_job(Triage(triage.metrics, triage.inventory, None), job.job_id, CFG)
    assert isinstance(none, UserError) and "No scheduler" in none.sentence


async def test_a_young_requeue_is_compared_with_its_previous_run() -> None:
    fleet = SimFleet(512, seed=2, now=NOW, fault_rate=0.0)
    young = next(
        j
        for j in fleet.jobs
        if j.state is JobState.RUNNING
        and j.prev_job_id
        and j.start > NOW - timedelta(hours=20)
        and fleet.job_spec(j.job_id).exports_step_time
    )
    d = (await _diagnose(fleet, young)).diagnosis
    assert d.comparison is not None
    assert d.comparison.baseline == f"its previous run (job {young.prev_job_id})"


def test_one_wild_node_does_not_hide_a_second_straggler() -> None:
    # Mean and standard deviation would let the 10x node hide the 8 % one; the MAD does not.
    times = {f"n{i}": 1.0 + 0.005 * (i % 5) for i in range(200)}
    times["n7"], times["n8"] = 10.0, 1.08
    found = [o.node for o in outliers(times, CFG)[1]]
    assert found == ["n7", "n8"]
    assert spread(times.values()).median == pytest.approx(1.01)


async def test_job_slow_agrees_with_its_thread_and_with_node_health() -> None:
    """The shell's default fleet: a job with two stragglers of different causes. The answer
    names each with its own cause, as the thread does; a cause /node-health checks is the
    fault /node-health of that node reports, and a job-relative one is said not to show there."""
    from bot.render.jobslow import HEALTH_KINDS, render_answer, render_detail
    from bot.triage.service import NodeReport, node_health

    fleet = SimFleet(512, seed=0, now=NOW)
    triage = _triage(fleet)
    checked = 0
    for job in fleet.jobs:
        if job.state is not JobState.RUNNING or len(job.nodes) < 16:
            continue
        report = await _diagnose(fleet, job)
        d = report.diagnosis
        if not d.stragglers:
            continue
        answer = " ".join(str(b) for b in render_answer(report).blocks)
        thread = " ".join(str(b) for b in render_detail(report).blocks)
        for s in d.stragglers[:3]:
            # The cause in words in the answer; in the thread, the words and the code beside.
            said = words(s.cause.kind) if s.cause else "no fault found"
            assert f"`{s.node}` ({said})" in answer
            assert f"`{s.node}`" in thread and said in thread
            assert s.cause is None or f"(`{s.cause.kind.value}`)" in thread
            health = await node_health(triage, s.node)
            assert isinstance(health, NodeReport)
            kinds = {f.kind for f in health.faults}
            if s.cause is not None and s.cause.kind in HEALTH_KINDS:
                assert s.cause.kind in kinds, (s.node, s.cause.kind, kinds)
                assert f"`/node-health {s.node}`" in answer and "shows the same fault" in answer
            else:
                assert f"`{s.node}` lag" in answer and "will not show it" in answer
            checked += 1
    assert checked >= 3


async def test_a_one_node_job_says_it_has_no_peers() -> None:
    fleet = SimFleet(8, seed=3, now=NOW, fault_rate=0.0)
    job = fleet.add_job(["gpu-0002"], exports_step_time=False)
    report = await _diagnose(fleet, job)
    from bot.render.jobslow import render_answer

    text = " ".join(str(b) for b in render_answer(report).blocks)
    assert "no peers in it to compare with" in text and "/node-health gpu-0002" in text
    assert "No GPU or port metrics" not in text and report.diagnosis.missing == []
