"""The fixed fleet that feeds the test Prometheus, and its fault plan: the tests' ground truth.

scripts/testsvc/prometheus.py builds this fleet to backfill Prometheus and to serve its live
exposition; the tests build it again from the same ``now`` (``MEOWBOT_TEST_SIM_NOW``) and compare
what the health checks find through Prometheus with ``fleet.injected``.

One fault of every node kind (every ``FaultKind`` that is not job-level), each on its own node,
with its parameters fixed so that the checks' default thresholds are crossed without doubt
within the tests' window. ``host_label="mixed"``: every fourth rack (gpu-0049..gpu-0064 and
gpu-0113..gpu-0128) runs the
newer dcgm-exporter with a lower-case ``hostname`` label, and the plan puts faults on both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot import metric_names as m
from bot.backends.sim.faults import DetailValue
from bot.backends.sim.fleet import NODE_KINDS, STRAGGLER_NODE_KINDS, SimFleet
from bot.models import FaultKind
from bot.triage.checks import CHECKS, requests_for
from bot.triage.table import Reading

N_NODES = 144
"""The faults sit on the first 64; 65-128 are the clean nodes of the training jobs; the last
rack (129-144) holds the jobs that export no step time, with their own faults."""
SEED = 7
HISTORY_HOURS = 3
HISTORY_STEP_S = 60
WINDOW_S = 3600.0
"""The window the tests read counters over: every counter fault runs through all of it."""

K = FaultKind


@dataclass(frozen=True)
class Planned:
    kind: FaultKind
    node: str
    gpu: int | None = None
    ago_s: int = 2 * 3600
    """How long before ``now`` the fault began."""
    detail: dict[str, DetailValue] = field(default_factory=dict)
    ended_ago_s: int | None = None
    """How long before ``now`` it ended (an Xid's GPU reset), or None: it goes on."""
    drains: bool = True
    """Whether the checks must find it, read through Prometheus, as a fault to act on: False
    for what only a newer exporter's family shows, on a node without it, and for an Xid the
    totals put before the window."""


# Nodes gpu-0049..gpu-0064 (and gpu-0113..gpu-0128) carry `hostname`, the others `Hostname`
# (SimFleet's "mixed").
PLAN: tuple[Planned, ...] = (
    Planned(K.XID, "gpu-0002", 3, detail={"xid": 79}),
    Planned(K.ECC_DBE, "gpu-0004", 1, detail={"count": 2}),
    Planned(K.ROW_REMAP_FAILURE, "gpu-0006", 5),
    Planned(K.ROW_REMAP_PENDING, "gpu-0008", 0),
    Planned(K.THROTTLE_POWER, "gpu-0010", 2),
    Planned(K.THROTTLE_HW_SLOWDOWN, "gpu-0012", 4),
    Planned(K.THROTTLE_SW_THERMAL, "gpu-0014", 6),
    Planned(K.THROTTLE_HW_THERMAL, "gpu-0017", 7),
    Planned(K.POWER_BRAKE, "gpu-0019", 1),
    Planned(K.HIGH_TEMPERATURE, "gpu-0021", 3, detail={"temp_c": 93}),
    Planned(K.NVLINK_CRC, "gpu-0023", 2, detail={"per_min": 10.0}),
    Planned(K.NVLINK_REPLAY, "gpu-0025", 5, detail={"per_min": 10.0}),
    Planned(K.PCIE_REPLAY, "gpu-0027", 0, detail={"per_min": 10.0}),
    Planned(K.PCIE_DOWNTRAINED, "gpu-0029", 6, detail={"width": 8}),
    Planned(K.IB_LINK_DOWN, "gpu-0031", detail={"nic": "mlx5_2"}),
    Planned(K.IB_FLAPPING, "gpu-0034", detail={"nic": "mlx5_5", "period_s": 300}),
    Planned(K.IB_SYMBOL_ERRORS, "gpu-0036", detail={"nic": "mlx5_1", "per_min": 200.0}),
    Planned(K.NIC_ERRORS, "gpu-0038", detail={"device": "eth0", "per_min": 100.0}),
    Planned(K.UNEXPECTED_REBOOT, "gpu-0040", ago_s=20 * 60),
    Planned(K.GPU_MISSING, "gpu-0042", 4),
    Planned(K.DRIVER_DRIFT, "gpu-0044", detail={"version": "535.161.08"}),
    Planned(K.KERNEL_DRIFT, "gpu-0046", detail={"version": "6.8.0-40-generic"}),
    # The newer exporter's rack: the same kinds must be found through `hostname`.
    Planned(K.FIRMWARE_DRIFT, "gpu-0050", detail={"version": "96.00.74.00.0B"}),
    Planned(K.LOW_SM_CLOCK, "gpu-0052", 2, detail={"sm_clock_mhz": 1410}),
    Planned(K.CPU_CONTENTION, "gpu-0054", detail={"load": 120.0, "psi_per_s": 0.6}),
    Planned(K.NUMA_MISPLACEMENT, "gpu-0056", 5, detail={"misplaced": "gpu"}),
    Planned(K.XID, "gpu-0058", 6, detail={"xid": 48}),
    Planned(K.THROTTLE_HW_SLOWDOWN, "gpu-0060", 0),
    Planned(K.NVLINK_CRC, "gpu-0062", 7, detail={"per_min": 10.0}),
    Planned(K.GPU_MISSING, "gpu-0064", 2),
    # The last rack: faults in jobs that export no step time, found by their proxies.
    Planned(K.NVLINK_CRC, "gpu-0130", 4, detail={"per_min": 10.0}),
    Planned(K.IB_SYMBOL_ERRORS, "gpu-0135", detail={"nic": "mlx5_4", "per_min": 200.0}),
    Planned(K.CPU_CONTENTION, "gpu-0140", detail={"load": 120.0, "psi_per_s": 0.6}),
)
EXPORTER_PLAN: tuple[Planned, ...] = (
    # What newer exporters offer (their families on gpu-0049..64 and gpu-0113..128 only), and
    # what a last-value gauge hides. An Xid whose GPU was reset 35 minutes ago: the newer
    # exporter's totals (a series born in the window) and the older one's gauge show it.
    Planned(K.XID, "gpu-0121", 1, ago_s=40 * 60, ended_ago_s=35 * 60, detail={"xid": 79}),
    Planned(K.XID, "gpu-0021", 3, ago_s=40 * 60, ended_ago_s=35 * 60, detail={"xid": 79}),
    # Reset two hours ago: the gauge still says 79 (dcgm-exporter #500), the totals say no Xid
    # in the window.
    Planned(
        K.XID, "gpu-0122", 4, ago_s=150 * 60, ended_ago_s=140 * 60, detail={"xid": 79}, drains=False
    ),
    # Thermal slowdown for 40 minutes that ended 10 minutes ago: the violation counter says so,
    # the bitmask at the read does not (on gpu-0004 there is no counter: not seen).
    Planned(K.THROTTLE_SW_THERMAL, "gpu-0123", 6, ago_s=50 * 60, ended_ago_s=10 * 60),
    Planned(K.THROTTLE_SW_THERMAL, "gpu-0004", 1, ago_s=50 * 60, ended_ago_s=10 * 60, drains=False),
    Planned(K.THROTTLE_POWER, "gpu-0124", 0),
    # Hardware slowdown for ten minutes, over 20 minutes before the read: the clock-event
    # counter saw it come on; the bitmask at the read does not (on gpu-0006 there is no such
    # counter: not seen).
    Planned(K.THROTTLE_HW_SLOWDOWN, "gpu-0126", 2, ago_s=30 * 60, ended_ago_s=20 * 60),
    Planned(
        K.THROTTLE_HW_SLOWDOWN, "gpu-0006", 5, ago_s=30 * 60, ended_ago_s=20 * 60, drains=False
    ),
    Planned(K.DCGM_HEALTH, "gpu-0125", 5),
)
"""Not in any job (their nodes are the fleet's last clean ones, or already faulty): /job-slow's
jobs and causes stay those of ``PLAN`` before these were added."""
_SLOWING_PLAN = PLAN
PLAN = PLAN + EXPORTER_PLAN

NEWER_EXPORTER_NODES = frozenset(f"gpu-{i:04d}" for i in (*range(49, 65), *range(113, 129)))

# Straggler causes (issue 4) that no passive health check names: /job-slow finds them.
STRAGGLER_ONLY_KINDS = frozenset({K.LOW_SM_CLOCK, K.CPU_CONTENTION, K.NUMA_MISPLACEMENT})


@dataclass(frozen=True)
class PlannedJob:
    """A training job of the scenario (issue 4), exporting per-rank step times."""

    job_id: str
    name: str
    nodes: tuple[str, ...]
    slowdown: float = 0.0
    """Every rank slower together by this share (JOB_SLOWDOWN) since ``SLOWDOWN_AGO_S``."""
    exports_step_time: bool = True
    exports_compute_time: bool = False
    """Also each rank's compute time and collective wait."""


def _gpu(*numbers: int) -> tuple[str, ...]:
    return tuple(f"gpu-{i:04d}" for i in numbers)


PROXY_RACK = _gpu(*range(129, 145))
STRAGGLER_NODES = {
    p.node: p.kind
    for p in _SLOWING_PLAN
    if p.kind in STRAGGLER_NODE_KINDS and p.node not in PROXY_RACK
}
"""The planned faults that slow a job: the nodes /job-slow must name, with these causes."""
_PLANNED = {p.node for p in PLAN}
_CLEAN = [n for n in _gpu(*range(1, N_NODES + 1)) if n not in _PLANNED]
SLOWDOWN_AGO_S = 2 * 3600

# Slurm's test cluster has gpu-0001..gpu-0016 (scripts/testsvc/slurm.py): the two jobs that are
# also submitted there live on those nodes; the others use the rest of the fleet.
SLURM_STRAGGLERS = PlannedJob("900002", "train-one-throttled", _gpu(9, 11, 12, 13, 15, 16))
SLURM_HEALTHY = PlannedJob("900003", "train-healthy", _gpu(1, 3, 5, 7), exports_compute_time=True)
_POOL = [n for n in _CLEAN if n > "gpu-0016" and n not in PROXY_RACK]
SLOW_EVERYWHERE = PlannedJob("900004", "train-slow-everywhere", tuple(_POOL[:5]), slowdown=0.09)
CAUSE_JOB_SIZE = 5
# One job per remaining slowing fault, that node and four clean ones: stragglers are a small
# share of a job, as on a real cluster (a job of half stragglers has no "normal" pace to test).
# They export compute times and collective waits, which name every cause; the throttled Slurm
# job exports only step times, equal on every rank, and is judged by the hardware.
CAUSE_JOBS = tuple(
    PlannedJob(
        str(900010 + i),
        f"train-{STRAGGLER_NODES[node].value.replace('_', '-')}",
        tuple(sorted([node, *_POOL[5 + 4 * i : 9 + 4 * i]])),
        exports_compute_time=True,
    )
    for i, node in enumerate(n for n in sorted(STRAGGLER_NODES) if n not in SLURM_STRAGGLERS.nodes)
)
assert all(len(j.nodes) == CAUSE_JOB_SIZE for j in CAUSE_JOBS), "the fleet ran out of clean nodes"
# Jobs that export no step time (issue 4's proxies): four nodes each, the first three with
# one fault that lowers a proxy (NVLink traffic, InfiniBand traffic, GPU utilisation), the
# last healthy.
PROXY_STRAGGLERS = {p.node: p.kind for p in _SLOWING_PLAN if p.node in PROXY_RACK}
PROXY_JOBS = tuple(
    PlannedJob(
        str(900100 + i),
        f"infer-{i}",
        PROXY_RACK[4 * i : 4 * i + 4],
        exports_step_time=False,
    )
    for i in range(4)
)
assert [sum(n in PROXY_STRAGGLERS for n in j.nodes) for j in PROXY_JOBS] == [1, 1, 1, 0]
JOBS = (SLURM_STRAGGLERS, SLURM_HEALTHY, SLOW_EVERYWHERE, *CAUSE_JOBS, *PROXY_JOBS)
STEP_HISTORY_HOURS = 26  # a day and a bit: "24 h earlier" is there for every job
STEP_HISTORY_STEP_S = 300

# Counters (and the boot-time gauge) need history for increase()/changes() over the window;
# every other metric is read at `now`, from the live scrape. Backfilling only these keeps the
# start-up short (see scripts/testsvc/prometheus.py).
HISTORY_METRICS: tuple[str, ...] = (
    *(r.name for r in requests_for(CHECKS) if r.reading is not Reading.VALUE),
    # The last-Xid gauge, read again at the moment of a resume (bot/triage/resumes.py).
    m.DCGM_FI_DEV_XID_ERRORS,
    # /job-slow's proxies that are counters (its CPU-contention and NUMA evidence, and the
    # InfiniBand traffic of a job without step times).
    m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL,
    m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL,
    m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL,
)

assert {p.kind for p in PLAN} == set(NODE_KINDS), "the plan must cover every node fault kind"


def floor_minute(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(second=0, microsecond=0)


def make_fleet(now: datetime) -> SimFleet:
    """The fleet at ``now`` (floored to the minute) with exactly the faults of ``PLAN``."""
    now = floor_minute(now)
    fleet = SimFleet(n_nodes=N_NODES, seed=SEED, now=now, fault_rate=0.0, host_label="mixed")
    for p in PLAN:
        detail: dict[str, Any] = dict(p.detail)  # keyword detail, never `until` or `job_id`
        until = None if p.ended_ago_s is None else now - timedelta(seconds=p.ended_ago_s)
        since = now - timedelta(seconds=p.ago_s)
        fleet.inject(p.kind, p.node, p.gpu, since=since, until=until, **detail)
    for job in JOBS:
        fleet.add_job(
            job.nodes,
            name=job.name,
            job_id=job.job_id,
            user="alice",
            exports_step_time=job.exports_step_time,
            exports_compute_time=job.exports_compute_time,
        )
        if job.slowdown:
            since = now - timedelta(seconds=SLOWDOWN_AGO_S)
            fleet.inject(K.JOB_SLOWDOWN, job_id=job.job_id, since=since, slowdown=job.slowdown)
    return fleet


def from_epoch(epoch: str | int | float) -> datetime:
    return datetime.fromtimestamp(int(float(epoch)), UTC)
