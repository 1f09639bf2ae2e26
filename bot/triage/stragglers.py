"""Why a synchronous job is slow: the functional core behind /job-slow (no I/O).

A synchronous step takes as long as its slowest rank, so the job's pace is the slowest rank's
step time and a straggler is a node whose ranks sit far above the others'. "Far" is judged
with the median and the MAD across the job's nodes, not the mean and standard deviation: one
straggler among 4,096 nodes moves the mean and inflates the deviation enough to hide itself,
and it does not move the median.

Each straggler is then explained from the evidence on its node, most specific first: a health
fault the passive checks found (throttle bits, NVLink/PCIe/InfiniBand errors, Xid, ECC), an SM
clock under the job's median, CPU pressure from other processes, NUMA misses, a version that
differs from the rest of the job. With per-rank step times, two patterns that are not a node
are told apart: slow ranks that fill one pipeline stage, and stalls that hit every rank at the
same minutes (garbage collection). When every node slowed together, no node is blamed.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from bot import metric_names as m
from bot.models import JOB_LEVEL_KINDS, Action, Fault, FaultKind, Job, StragglerReport
from bot.triage.table import MetricRequest, Reading, Table

MAD_TO_SIGMA = 1.4826  # the MAD of a normal sample times this is its standard deviation


class StragglerConfig(BaseModel):
    """`job_slow:` in MEOWBOT_CONFIG. Defaults suit dcgm-exporter, node_exporter and a
    training exporter writing `training_step_time_seconds{job_id, node, rank}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_metric: str = m.TRAINING_STEP_TIME_SECONDS
    job_label: str = m.LABEL_JOB_ID
    node_label: str = m.LABEL_NODE
    rank_label: str = m.LABEL_RANK
    stage_label: str = m.LABEL_PIPELINE_STAGE
    average_s: int = Field(default=600, ge=60, le=6 * 3600)
    """Per-rank step times are averaged over this: one slow step is not a straggler."""
    z_threshold: float = Field(default=6.0, gt=0)
    """Robust z-score (distance from the median in MADs) above which a node is a straggler."""
    min_excess: float = Field(default=0.03, ge=0)
    """... and at least this much slower than the job's median (ordinary jitter is 1-2 %)."""
    slower_threshold: float = Field(default=0.03, ge=0)
    """The pace moved by more than this against the baseline: "slower than yesterday"."""
    sm_clock_drop: float = Field(default=0.05, gt=0, lt=1)
    """A GPU's SM clock this far under the job's median names a low clock."""
    psi_over_median: float = Field(default=0.2, gt=0)
    """CPU pressure (seconds waited per second) this far over the job's median: contention."""
    numa_miss_per_s: float = Field(default=5000.0, gt=0)
    """NUMA misses per second on a node that point at a GPU or NIC on the wrong domain."""
    stall_ratio: float = Field(default=0.25, gt=0)
    """A minute whose pace is this far above the usual one is a stall."""
    max_nodes: int = Field(default=16384, ge=1)


@dataclass(frozen=True)
class RankTime:
    node: str
    rank: int
    stage: int | None
    seconds: float


@dataclass(frozen=True)
class PacePoint:
    """The job's step time at one instant: its slowest rank (the pace) and its median rank."""

    at: datetime
    slowest: float
    median: float


# A node is as slow as its slowest GPU (or port): one row a node, its lowest (32k GPU rows at
# 4,096 nodes is not).
SM_CLOCK_REQUEST = MetricRequest(m.DCGM_FI_DEV_SM_CLOCK, lowest_per_node=True)


@dataclass(frozen=True)
class Proxy:
    """A metric that falls on a node that holds a synchronous job back: the job's pace when it
    exports no step time, and evidence on a straggler when it does."""

    request: MetricRequest
    label: str
    unit: str
    min_drop: float
    """How far under the job's median (0.1 = the median is 10 % above the node) a node must
    sit to lag: over the spread healthy hardware shows at the same work, which differs by
    proxy (clocks agree within 2 %, power between GPUs within 10 % or so)."""
    scale: float = 1.0  # shown as value / scale (bytes per second as GB/s)
    per_second: bool = False  # a counter read as its increase over the window


# A throttled or clocked-down GPU computes slower.
SM_CLOCK = Proxy(SM_CLOCK_REQUEST, "SM clock", "MHz", min_drop=0.05)
PROXIES: tuple[Proxy, ...] = (
    SM_CLOCK,
    # A GPU starved by its host (CPU contention, memory on the wrong NUMA domain) idles.
    Proxy(
        MetricRequest(m.DCGM_FI_DEV_GPU_UTIL, lowest_per_node=True),
        "GPU utilisation",
        "%",
        min_drop=0.1,
    ),
    # A GPU held far under its power (a brake) draws less than its peers; a cap is not a drop.
    Proxy(
        MetricRequest(m.DCGM_FI_DEV_POWER_USAGE, lowest_per_node=True), "power", "W", min_drop=0.3
    ),
    # Replays on a bad link eat its goodput; a port that errs or flaps receives less.
    Proxy(
        MetricRequest(m.DCGM_FI_PROF_NVLINK_TX_BYTES, lowest_per_node=True),
        "NVLink TX",
        "GB/s",
        min_drop=0.15,
        scale=1e9,
    ),
    Proxy(
        MetricRequest(
            m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL, Reading.INCREASE, lowest_per_node=True
        ),
        "InfiniBand RX",
        "GB/s",
        min_drop=0.15,
        scale=1e9,
        per_second=True,
    ),
)


def evidence_requests(cfg: StragglerConfig) -> list[MetricRequest]:
    """What every /job-slow reads over the job's nodes besides the health checks' metrics:
    what `explain` uses, one row a node where a node has many series."""
    del cfg  # the names are the exporters'; the config only names the step metric
    return [
        SM_CLOCK_REQUEST,
        MetricRequest(m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL, Reading.INCREASE),
        MetricRequest(m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL, Reading.INCREASE),
        MetricRequest(m.NODE_LOAD1),
    ]


def pace_proxy_requests(cfg: StragglerConfig) -> list[MetricRequest]:
    """The other proxies, read only for a job without step times: with step times they would
    add four reads of a row a node to every answer (a 4,096-node job's p95 was 2.2 s with them,
    1.3 s without) and tell nothing the step times do not."""
    del cfg
    return [p.request for p in PROXIES if p is not SM_CLOCK]


def proxy_requests(cfg: StragglerConfig) -> list[MetricRequest]:
    """Everything /job-slow may read over a job's nodes (the recording rules record it all)."""
    return [*evidence_requests(cfg), *pace_proxy_requests(cfg)]


# --- robust statistics ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Spread:
    median: float
    sigma: float  # MAD scaled to a standard deviation, floored so that identical values work

    def z(self, value: float) -> float:
        return (value - self.median) / self.sigma


def spread(values: Iterable[float], floor_share: float = 0.002) -> Spread:
    data = list(values)
    if not data:
        return Spread(0.0, 1.0)
    med = statistics.median(data)
    mad = statistics.median(abs(v - med) for v in data)
    # A job whose nodes agree to the microsecond has a MAD of 0: a floor of 0.2 % of the
    # median keeps the z-score finite without calling that 0.2 % a straggler.
    return Spread(med, max(MAD_TO_SIGMA * mad, abs(med) * floor_share, 1e-9))


def node_paces(ranks: Sequence[RankTime]) -> dict[str, float]:
    """Each node's own step time: the median of its ranks (one bad GPU is the node's)."""
    per: dict[str, list[float]] = defaultdict(list)
    for r in ranks:
        per[r.node].append(r.seconds)
    return {node: statistics.median(values) for node, values in per.items()}


@dataclass(frozen=True)
class Outlier:
    node: str
    value: float
    z: float
    excess: float  # share slower than the median (0.08 = 8 %)


def outliers(
    per_node: Mapping[str, float], cfg: StragglerConfig, *, high: bool = True
) -> tuple[Spread, list[Outlier]]:
    """Nodes far from the job's median: above it (step times) or below it (clocks)."""
    s = spread(per_node.values())
    found = []
    for node, value in per_node.items():
        z = s.z(value) if high else -s.z(value)
        excess = (value - s.median) / s.median if s.median else 0.0
        excess = excess if high else -excess
        if z > cfg.z_threshold and excess > cfg.min_excess:
            found.append(Outlier(node, value, z, excess))
    found.sort(key=lambda o: (-o.excess, o.node))
    return s, found


# --- explaining a straggler ---------------------------------------------------------------------
# Health findings that slow a rank, most specific first: the first one found names the cause.
_SLOWING_FAULTS: tuple[FaultKind, ...] = (
    FaultKind.POWER_BRAKE,
    FaultKind.THROTTLE_HW_SLOWDOWN,
    FaultKind.THROTTLE_HW_THERMAL,
    FaultKind.THROTTLE_SW_THERMAL,
    FaultKind.THROTTLE_POWER,
    FaultKind.XID,
    FaultKind.ECC_DBE,
    FaultKind.ROW_REMAP_PENDING,
    FaultKind.PCIE_DOWNTRAINED,
    FaultKind.NVLINK_CRC,
    FaultKind.NVLINK_REPLAY,
    FaultKind.PCIE_REPLAY,
    # A flapping port is often down at the instant read too: the flapping is the diagnosis.
    FaultKind.IB_FLAPPING,
    FaultKind.IB_LINK_DOWN,
    FaultKind.IB_SYMBOL_ERRORS,
    FaultKind.NIC_ERRORS,
    FaultKind.GPU_MISSING,
)
DRIFT: dict[FaultKind, tuple[str, str]] = {
    FaultKind.DRIVER_DRIFT: ("driver", m.LABEL_DRIVER_VERSION),
    FaultKind.KERNEL_DRIFT: ("kernel", m.LABEL_RELEASE),
    FaultKind.FIRMWARE_DRIFT: ("firmware (VBIOS)", m.LABEL_VBIOS_VERSION),
}


@dataclass(frozen=True)
class Cause:
    kind: FaultKind
    evidence: str
    action: Action


def _per_node(table: Table, key: str, reduce: str = "min") -> dict[str, float]:
    col = table.get(key)
    if col is None:
        return {}
    per: dict[str, list[float]] = defaultdict(list)
    for i, v in enumerate(col.values):
        if v == v:  # not NaN
            per[col.node(i)].append(v)
    pick = min if reduce == "min" else sum
    return {n: pick(vs) for n, vs in per.items()}


@dataclass(frozen=True)
class NodeEvidence:
    """What the job's nodes show, reduced to one number (or version) a node."""

    proxies: dict[str, dict[str, float]]  # proxy label -> node -> its lowest GPU (or port)
    psi: dict[str, float]  # seconds waited for a CPU per second
    numa_miss: dict[str, float]  # NUMA misses per second, all domains
    load: dict[str, float]
    versions: dict[FaultKind, dict[str, str]]  # drift kind -> node -> version
    faults: dict[str, list[Fault]]  # the health checks' findings a node

    @property
    def sm_clock(self) -> dict[str, float]:
        """The node's lowest GPU SM clock, MHz."""
        return self.proxies.get(SM_CLOCK.label, {})

    @classmethod
    def from_reads(
        cls,
        proxies: Table,
        versions: Mapping[FaultKind, Mapping[str, str]],
        faults: Iterable[Fault],
        average_s: float,
    ) -> NodeEvidence:
        by_node: dict[str, list[Fault]] = defaultdict(list)
        for f in faults:
            by_node[f.node].append(f)
        per_s = max(1.0, average_s)
        read = {}
        for p in PROXIES:
            values = _per_node(proxies, p.request.key)
            read[p.label] = {n: v / per_s for n, v in values.items()} if p.per_second else values
        return cls(
            proxies=read,
            psi={
                n: v / per_s
                for n, v in _per_node(
                    proxies, m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL, "sum"
                ).items()
            },
            numa_miss={
                n: v / per_s
                for n, v in _per_node(proxies, m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL, "sum").items()
            },
            load=_per_node(proxies, m.NODE_LOAD1, "sum"),
            versions={k: dict(v) for k, v in versions.items()},
            faults=dict(by_node),
        )


@dataclass(frozen=True)
class Lag:
    """A proxy that sits far under the job's median on a node."""

    proxy: Proxy
    value: float
    median: float
    z: float  # MADs under the median

    @property
    def slowness(self) -> float:
        """The job's median over the node's value: 1.25 = the node does 20 % less."""
        return self.median / self.value if self.value > 0 else float("inf")

    def sentence(self) -> str:
        p = self.proxy
        return (
            f"{p.label} {self.value / p.scale:,.3g} {p.unit} against the job's "
            f"{self.median / p.scale:,.3g} ({self.value / self.median - 1:+.0%}, {self.z:.0f} MADs)"
        )


def proxy_lags(
    ev: NodeEvidence, nodes: Iterable[str], cfg: StragglerConfig
) -> tuple[dict[str, float], dict[str, Lag]]:
    """Each node's slowness by its proxies, and the nodes a proxy flags.

    Each proxy is judged on its own spread, since their noise differs (a GPU's utilisation
    barely moves, its NVLink traffic moves by several percent): a node lags when one proxy sits
    more than the z threshold of MADs and more than the proxy's `min_drop` under the job's
    median (a small job's MAD can be tiny by chance: the drop is what guards it), and
    the proxy that lags most (in MADs) is its evidence. A node's slowness, for the chart and the
    cost, is the largest median-over-value of its proxies."""
    wanted = set(nodes)
    slowness: dict[str, float] = {}
    lags: dict[str, Lag] = {}
    for proxy in PROXIES:
        values = {n: v for n, v in ev.proxies.get(proxy.label, {}).items() if n in wanted}
        if len(values) < 2:
            continue
        s = spread(values.values())
        if s.median <= 0:
            continue
        for node, value in values.items():
            lag = Lag(proxy, value, s.median, -s.z(value))
            slowness[node] = max(slowness.get(node, 0.0), min(lag.slowness, 100.0))
            drop = max(cfg.min_excess, proxy.min_drop)
            flagged = lag.z > cfg.z_threshold and lag.slowness - 1 > drop
            if flagged and (node not in lags or lag.z > lags[node].z):
                lags[node] = lag
    return slowness, lags


def explain(node: str, ev: NodeEvidence, cfg: StragglerConfig) -> Cause | None:
    """The most specific reason `node` is slow, with the evidence in a sentence."""
    found = {f.kind: f for f in ev.faults.get(node, ())}
    for kind in _SLOWING_FAULTS:
        fault = found.get(kind)
        if fault is not None:
            gpu = f" on GPU {fault.gpu}" if fault.gpu is not None else ""
            return Cause(kind, f"{fault.summary}{gpu}", fault.action)
    clocks = ev.sm_clock
    if node in clocks and len(clocks) > 1:
        med = statistics.median(clocks.values())
        if med > 0 and clocks[node] < med * (1 - cfg.sm_clock_drop):
            return Cause(
                FaultKind.LOW_SM_CLOCK,
                f"SM clock {clocks[node]:.0f} MHz against the job's {med:.0f} MHz, with no "
                "throttle reason set: check application clocks and power limits",
                Action.DRAIN,
            )
    psi = ev.psi
    if node in psi and len(psi) > 1:
        med = statistics.median(psi.values())
        if psi[node] > med + cfg.psi_over_median:
            load = f", load {ev.load[node]:.0f}" if node in ev.load else ""
            return Cause(
                FaultKind.CPU_CONTENTION,
                f"CPU pressure {psi[node]:.2f} s/s against the job's {med:.2f}{load}: other "
                "processes share the ranks' cores",
                Action.WATCH,
            )
    numa = ev.numa_miss
    if node in numa and len(numa) > 1:
        med = statistics.median(numa.values())
        if numa[node] > cfg.numa_miss_per_s and numa[node] > 10 * max(med, 1.0):
            return Cause(
                FaultKind.NUMA_MISPLACEMENT,
                f"{numa[node]:,.0f} NUMA misses/s against the job's {med:,.0f}: a GPU or NIC "
                "is used from the wrong NUMA domain (check the ranks' CPU and memory binding)",
                Action.WATCH,
            )
    for kind, (what, _label) in DRIFT.items():
        versions = ev.versions.get(kind, {})
        if node not in versions or len(versions) < 2:
            continue
        majority, votes = Counter(versions.values()).most_common(1)[0]
        if versions[node] != majority and votes * 2 > len(versions):
            return Cause(
                kind,
                f"{what} {versions[node]} where the rest of the job runs {majority}",
                Action.DRAIN,
            )
    return None


# --- patterns of the job itself ------------------------------------------------------------------
def stage_of_stragglers(
    ranks: Sequence[RankTime], stragglers: Sequence[str], min_share: float = 0.8
) -> int | None:
    """The pipeline stage the stragglers fill, when they fill (most of) one and only it."""
    if not stragglers:
        return None
    stages: dict[int, set[str]] = defaultdict(set)
    node_stages: dict[str, set[int]] = defaultdict(set)
    for r in ranks:
        if r.stage is None:
            return None
        stages[r.stage].add(r.node)
        node_stages[r.node].add(r.stage)
    if len(stages) < 2:
        return None
    slow = set(stragglers)
    touched = {s for n in slow for s in node_stages[n]}
    if len(touched) != 1:
        return None
    stage = touched.pop()
    members = stages[stage]
    if len(slow & members) >= max(2, min_share * len(members)):
        return stage
    return None


@dataclass(frozen=True)
class Stalls:
    minutes: int  # minutes that stalled
    period_min: int | None  # their usual spacing, when regular
    ratio: float  # how much slower a stalled minute is than a usual one


def stalls(points: Sequence[PacePoint], cfg: StragglerConfig) -> Stalls | None:
    """Stalls that hit every rank together: minutes whose *median* rank spikes, regularly."""
    if len(points) < 10:
        return None
    usual = statistics.median(p.median for p in points)
    if usual <= 0:
        return None
    spikes = [i for i, p in enumerate(points) if p.median > usual * (1 + cfg.stall_ratio)]
    if len(spikes) < 3 or len(spikes) > len(points) // 2:
        return None
    gaps = [b - a for a, b in itertools.pairwise(spikes)]
    period, count = Counter(gaps).most_common(1)[0]
    if count < 0.6 * len(gaps):
        return None
    step_min = max(1, round((points[1].at - points[0].at).total_seconds() / 60))
    ratio = statistics.median(points[i].median for i in spikes) / usual - 1
    return Stalls(len(spikes), period * step_min, ratio)


# --- compared with before ------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    now_s: float  # the pace now (slowest rank, averaged)
    before_s: float
    change: float  # 0.087 = 8.7 % slower
    since: datetime | None  # when the slowdown began, within the series
    baseline: str  # "24 h earlier", "the previous run (job 4100123)"


def compare(
    recent: Sequence[PacePoint],
    before: Sequence[PacePoint],
    cfg: StragglerConfig,
    baseline: str,
    *,
    window: int = 3,
) -> Comparison | None:
    """The pace now against the baseline, and since when it has been off."""
    if not recent or not before:
        return None
    now_s = statistics.median(p.slowest for p in recent[-window:])
    before_s = statistics.median(p.slowest for p in before)
    if before_s <= 0:
        return None
    change = now_s / before_s - 1
    since = None
    if abs(change) > cfg.slower_threshold:
        limit = before_s * (1 + cfg.slower_threshold) if change > 0 else None
        run_start = None
        for p in reversed(recent):
            off = (
                p.slowest > limit
                if limit is not None
                else p.slowest < before_s * (1 - cfg.slower_threshold)
            )
            if not off:
                break
            run_start = p.at
        since = run_start
    return Comparison(now_s, before_s, change, since, baseline)


# --- the diagnosis ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Straggler:
    node: str
    seconds: float  # the node's step time (or the proxy's value)
    excess: float
    z: float
    cause: Cause | None
    lag: Lag | None = None  # the proxy that lags most on the node, when one does


@dataclass(frozen=True)
class Diagnosis:
    job: Job
    mode: str  # "step time" or "proxies" (no per-rank step time exported)
    median_s: float  # the job's median node
    stragglers: list[Straggler]
    job_cause: Cause | None  # a cause of the job itself (pipeline stage, stalls, all nodes)
    comparison: Comparison | None
    missing: list[str]  # job nodes with no step time (or proxy): judged without them
    gpu_hours_per_day: float  # what the stragglers cost the job
    stage: int | None = None
    stall: Stalls | None = None
    per_node: dict[str, float] = field(default_factory=dict)

    @property
    def not_the_nodes(self) -> bool:
        return not self.stragglers and self.job_cause is not None

    def report(self) -> StragglerReport:
        """The scored shape: straggler nodes and their named causes."""
        causes = {s.node: s.cause.kind for s in self.stragglers if s.cause is not None}
        return StragglerReport(
            job_id=self.job.job_id, stragglers=tuple(s.node for s in self.stragglers), causes=causes
        )


def diagnose(
    job: Job,
    per_node: Mapping[str, float],
    evidence: NodeEvidence,
    cfg: StragglerConfig,
    *,
    ranks: Sequence[RankTime] = (),
    mode: str = "step time",
    comparison: Comparison | None = None,
    minutes: Sequence[PacePoint] = (),
    lags: Mapping[str, Lag] | None = None,
) -> Diagnosis:
    """Stragglers and causes from what was read. `per_node` is each node's step time, or in
    proxies mode its slowness by its proxies (`proxy_lags`: higher is slower), where the
    stragglers are the nodes a proxy flags (`lags`) rather than outliers of `per_node`, which
    mixes proxies of different noise.
    """
    lags = lags or {}
    if mode == "proxies":
        s = spread(per_node.values())
        # proxy_lags gives every lagging node its slowness in per_node.
        found = [Outlier(n, per_node[n], lag.z, per_node[n] - 1) for n, lag in lags.items()]
        found.sort(key=lambda o: (-o.excess, o.node))
    else:
        s, found = outliers(per_node, cfg)
    missing = sorted(set(job.nodes) - set(per_node))
    job_cause: Cause | None = None
    stage = stage_of_stragglers(ranks, [o.node for o in found]) if ranks else None
    stall = stalls(minutes, cfg) if minutes else None
    stragglers: list[Straggler] = []
    if stage is not None and not any(explain(o.node, evidence, cfg) for o in found):
        excess = statistics.median(o.excess for o in found)
        job_cause = Cause(
            FaultKind.PIPELINE_IMBALANCE,
            f"every slow rank is in pipeline stage {stage} ({len(found)} nodes, "
            f"{excess:.0%} slower) and no node shows a fault: the stage has more work than "
            "the others (rebalance its layers)",
            Action.NONE,
        )
    else:
        stragglers = [
            Straggler(
                o.node, o.value, o.excess, o.z, explain(o.node, evidence, cfg), lags.get(o.node)
            )
            for o in found
        ]
    if not stragglers and job_cause is None:
        if stall is not None:
            period = f" every {stall.period_min} min" if stall.period_min else ""
            job_cause = Cause(
                FaultKind.GC_STALLS,
                f"every rank stalls together{period} ({stall.minutes} stalls, "
                f"{stall.ratio:.0%} slower each): a pause in the job itself, such as garbage "
                "collection or checkpointing, not a node",
                Action.NONE,
            )
        elif comparison is not None and comparison.change > cfg.slower_threshold:
            job_cause = Cause(
                FaultKind.JOB_SLOWDOWN,
                f"every node slowed together ({comparison.change:.1%} against "
                f"{comparison.baseline}): look at what changed for the whole job (data "
                "loading, the code, the filesystem, the network), not at one node",
                Action.NONE,
            )
    gpus = len(job.nodes) * max(1, job.gpus_per_node)
    cost = 0.0
    if stragglers and s.median > 0:
        slowest = max(st.seconds for st in stragglers)
        cost = gpus * 24.0 * (1 - s.median / slowest)
    return Diagnosis(
        job=job,
        mode=mode,
        median_s=s.median,
        stragglers=stragglers,
        job_cause=job_cause,
        comparison=comparison,
        missing=missing,
        gpu_hours_per_day=cost,
        stage=stage,
        stall=stall,
        per_node=dict(per_node),
    )


def job_versions(
    table: Table, keys: Mapping[FaultKind, tuple[str, str]]
) -> dict[FaultKind, dict[str, str]]:
    """Drift kind -> node -> version, from the health read's per-node version columns."""
    out: dict[FaultKind, dict[str, str]] = {}
    for kind, (key, label) in keys.items():
        col = table.get(key)
        if col is None:
            continue
        seen: dict[str, str] = {}
        rows = col.node_rows if col.node_rows is not None else range(len(col))
        for i in rows:
            node = col.node(i)
            if node not in seen:
                value = col.label(i, label)
                if value:
                    seen[node] = value
        out[kind] = seen
    return out


assert not JOB_LEVEL_KINDS & set(_SLOWING_FAULTS)
