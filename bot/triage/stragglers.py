"""Why a synchronous job is slow: the functional core behind /job-slow (no I/O).

In a synchronous job every rank ends an iteration together, waiting in the collective for the
slowest, so the ranks' iteration (step) times are equal within timer noise: they say *that*
the job is slow and by how much (against yesterday or its previous run), never *which* node.
The node that holds the job back is found in what it does itself, and every job is judged on
all of it, always:

- per-rank compute time (before the collective: longest on the straggler) and collective wait
  (shortest on the straggler), where the job exports them;
- per-rank step times that do differ between nodes (independent workers, or an exporter that
  times a rank's own work);
- the hardware proxies of every node of the job: SM clock, GPU utilisation, power, NVLink and
  InfiniBand traffic, each judged on its own spread with its own floor.

"Far" is judged with the median and the MAD across the job's nodes, not the mean and standard
deviation: one straggler among 4,096 nodes moves the mean and inflates the deviation enough to
hide itself, and it does not move the median.

Each straggler is then explained from the evidence on its node, most specific first: a health
fault the passive checks found (throttle bits, NVLink/PCIe/InfiniBand errors, Xid, ECC), an SM
clock under the job's median, CPU pressure from other processes, NUMA misses, a version that
differs from the rest of the job. A node with such a fault that no measurement shows lagging is
only a suspect, said apart. With per-rank compute times, slow ranks that fill one pipeline stage
are told apart from a node; stalls that hit every rank at the same minutes (garbage collection)
show in the iteration times. When every node slowed together, no node is blamed.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from bot import metric_names as m
from bot.models import JOB_LEVEL_KINDS, Action, Fault, FaultKind, Job, StragglerReport
from bot.triage.checks import STRAGGLER_KINDS, VERSIONS
from bot.triage.table import MetricRequest, Reading, Table
from bot.words import number

MAD_TO_SIGMA = 1.4826  # the MAD of a normal sample times this is its standard deviation


class StragglerConfig(BaseModel):
    """`job_slow:` in MEOWBOT_CONFIG. Defaults suit dcgm-exporter, node_exporter and a
    training exporter writing `training_step_time_seconds{job_id, node, rank}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_metric: str = m.TRAINING_STEP_TIME_SECONDS
    compute_metric: str = m.TRAINING_COMPUTE_TIME_SECONDS
    """Each rank's time computing before the collective, where the job exports it."""
    wait_metric: str = m.TRAINING_COLLECTIVE_WAIT_SECONDS
    """Each rank's time waiting in the collective, where the job exports it."""
    job_label: str = m.LABEL_JOB_ID
    node_label: str = m.LABEL_NODE
    rank_label: str = m.LABEL_RANK
    stage_label: str = m.LABEL_PIPELINE_STAGE
    average_s: int = Field(default=600, ge=60, le=6 * 3600)
    """Per-rank step times are averaged over this: one slow step is not a straggler."""
    z_threshold: float = Field(default=6.0, gt=0)
    """Robust z-score (distance from the median in MADs) above which a node is a straggler."""
    proxy_z_threshold: float = Field(default=4.0, gt=0)
    """The same for a hardware proxy, whose own floor (`Proxy.min_drop`) sits above the spread
    healthy hardware shows: a clock moves in 15 MHz steps, so a small job's MAD is half a step
    or nothing, and a 3 % slower clock is only four or five of those MADs away."""
    min_excess: float = Field(default=0.02, ge=0)
    """... and at least this much slower than the job's median (a rank's jitter is 1-2 % a
    step; averaged over `average_s` and a node's ranks it is a few tenths of a percent)."""
    slower_threshold: float = Field(default=0.03, ge=0)
    """The pace moved by more than this against the baseline: "slower than yesterday"."""
    sm_clock_drop: float = Field(default=0.02, gt=0, lt=1)
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
SM_CLOCK_REQUEST = MetricRequest(m.DCGM_FI_DEV_SM_CLOCK, Reading.MEDIAN, lowest_per_node=True)


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


# A throttled or clocked-down GPU computes slower. Read as the median over the window, a healthy
# busy GPU's clock stays within 1 % of its peers'; a single sample between two steps reads low.
SM_CLOCK = Proxy(SM_CLOCK_REQUEST, "SM clock", "MHz", min_drop=0.02)
PROXIES: tuple[Proxy, ...] = (
    SM_CLOCK,
    # A GPU starved by its host (CPU contention, memory on the wrong NUMA domain) idles.
    Proxy(
        MetricRequest(m.DCGM_FI_DEV_GPU_UTIL, Reading.MEDIAN, lowest_per_node=True),
        "GPU utilisation",
        "%",
        min_drop=0.1,
    ),
    # A GPU held far under its power (a brake) draws less than its peers; a cap is not a drop.
    Proxy(
        MetricRequest(m.DCGM_FI_DEV_POWER_USAGE, Reading.MEDIAN, lowest_per_node=True),
        "power",
        "W",
        min_drop=0.3,
    ),
    # Replays on a bad link eat its goodput; a port that errs or flaps receives less.
    Proxy(
        MetricRequest(m.DCGM_FI_PROF_NVLINK_TX_BYTES, Reading.MEDIAN, lowest_per_node=True),
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
    every proxy, and what `explain` uses, one row a node where a node has many series. The
    proxies are read whether or not the job exports step times: in a synchronous job the step
    times are the same on every rank and cannot name the node."""
    del cfg  # the names are the exporters'; the config only names the training metrics
    return [
        *(p.request for p in PROXIES),
        MetricRequest(m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL, Reading.INCREASE),
        MetricRequest(m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL, Reading.INCREASE),
        MetricRequest(m.NODE_LOAD1),
    ]


def proxy_requests(cfg: StragglerConfig) -> list[MetricRequest]:
    """Everything /job-slow reads over a job's nodes (the recording rules record it all)."""
    return evidence_requests(cfg)


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
# Health findings that slow a rank, most specific first: the first one found names the cause
# (the checks' `straggler_rank`; a flapping port is often down at the instant read too: the
# flapping is the diagnosis). A drift kind names one by the job's versions, what and where
# read as its check's entry says (`version`).
_SLOWING_FAULTS: tuple[FaultKind, ...] = STRAGGLER_KINDS
DRIFT: dict[FaultKind, tuple[str, str]] = {k: (v.what, v.label) for k, v in VERSIONS.items()}


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

    # Job-wide figures `explain` compares each node with: computed once, not once a node (a
    # 4,096-node job asks about every node when it looks for suspects).
    @functools.cached_property
    def medians(self) -> dict[str, float]:
        return {
            name: statistics.median(values.values())
            for name, values in (
                ("clock", self.sm_clock),
                ("psi", self.psi),
                ("numa", self.numa_miss),
            )
            if values
        }

    @functools.cached_property
    def majorities(self) -> dict[FaultKind, tuple[str, int]]:
        """Drift kind -> the job's most common version and how many nodes run it."""
        return {
            kind: Counter(versions.values()).most_common(1)[0]
            for kind, versions in self.versions.items()
            if versions
        }

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
            f"{p.label} {number(self.value / p.scale)} {p.unit} against the job's "
            f"{number(self.median / p.scale)} ({self.value / self.median - 1:+.0%}, "
            f"{self.z:.0f} MADs)"
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
            flagged = lag.z > cfg.proxy_z_threshold and lag.slowness - 1 > drop
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
        med = ev.medians["clock"]
        if med > 0 and clocks[node] < med * (1 - cfg.sm_clock_drop):
            return Cause(
                FaultKind.LOW_SM_CLOCK,
                f"SM clock {clocks[node]:,.0f} MHz against the job's {med:,.0f} MHz, with no "
                "throttle reason set: check application clocks and power limits",
                Action.DRAIN,
            )
    psi = ev.psi
    if node in psi and len(psi) > 1:
        med = ev.medians["psi"]
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
        med = ev.medians["numa"]
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
        majority, votes = ev.majorities[kind]
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
class RankSignals:
    """What the job's training exporter says per rank, each averaged over `average_s`; any may
    be empty (a job without a training exporter has none)."""

    step: Sequence[RankTime] = ()
    compute: Sequence[RankTime] = ()
    wait: Sequence[RankTime] = ()

    def only(self, nodes: set[str]) -> RankSignals:
        def keep(ranks: Sequence[RankTime]) -> list[RankTime]:
            return [r for r in ranks if r.node in nodes]

        return RankSignals(keep(self.step), keep(self.compute), keep(self.wait))

    def compute_times(self) -> list[RankTime]:
        """Each rank's compute time: as exported, or its iteration less its wait."""
        if self.compute:
            return list(self.compute)
        if not (self.step and self.wait):
            return []
        waits = {(r.node, r.rank): r.seconds for r in self.wait}
        return [
            RankTime(r.node, r.rank, r.stage, r.seconds - waits[(r.node, r.rank)])
            for r in self.step
            if (r.node, r.rank) in waits
        ]


COMPUTE = "compute time"
STEP = "step time"
PROXIES_MODE = "proxies"


@dataclass(frozen=True)
class Straggler:
    node: str
    seconds: float  # the node's compute or step time, or in proxies its slowness
    excess: float
    z: float
    cause: Cause | None
    lag: Lag | None = None  # the proxy that lags most on the node, when one does
    wait_s: float | None = None  # the node's collective wait, where the job exports it


@dataclass(frozen=True)
class Suspect:
    """A node of the job with a fault that slows work, which no measurement shows lagging."""

    node: str
    cause: Cause


@dataclass(frozen=True)
class Diagnosis:
    job: Job
    mode: str  # what named the stragglers: COMPUTE, STEP or PROXIES_MODE
    median_s: float  # the job's median node in that measure (slowness 1.0 in proxies)
    stragglers: list[Straggler]
    job_cause: Cause | None  # a cause of the job itself (pipeline stage, stalls, all nodes)
    comparison: Comparison | None
    missing: list[str]  # job nodes with no reading in `mode`: judged without them
    gpu_hours_per_day: float  # what the stragglers cost the job
    stage: int | None = None
    stall: Stalls | None = None
    per_node: dict[str, float] = field(default_factory=dict)
    step_s: float | None = None  # the job's iteration time now (its median rank)
    cost_is_bound: bool = False  # judged from a proxy: an upper bound, not a measurement
    suspects: list[Suspect] = field(default_factory=list)
    wait_median_s: float | None = None
    measured: tuple[str, ...] = ()  # every signal the job was judged on

    @property
    def not_the_nodes(self) -> bool:
        return not self.stragglers and self.job_cause is not None

    @property
    def has_steps(self) -> bool:
        return self.step_s is not None

    def report(self) -> StragglerReport:
        """The scored shape: straggler nodes and their named causes."""
        causes = {s.node: s.cause.kind for s in self.stragglers if s.cause is not None}
        return StragglerReport(
            job_id=self.job.job_id, stragglers=tuple(s.node for s in self.stragglers), causes=causes
        )


def _suspects(
    job: Job, named: set[str], evidence: NodeEvidence, cfg: StragglerConfig
) -> list[Suspect]:
    out = []
    for node in job.nodes:
        if node in named:
            continue
        cause = explain(node, evidence, cfg)
        if cause is not None:
            out.append(Suspect(node, cause))
    return out


def _named(
    ordered: Sequence[Outlier],
    stage: int | None,
    evidence: NodeEvidence,
    lags: Mapping[str, Lag],
    waits: Mapping[str, float],
    mode: str,
    cfg: StragglerConfig,
) -> tuple[Cause | None, list[Straggler]]:
    """A pipeline stage's imbalance when the outliers share a stage and none has a cause of
    its own; otherwise the stragglers, each with its cause where its node shows one."""
    if stage is not None and not any(explain(o.node, evidence, cfg) for o in ordered):
        return _stage_cause(stage, ordered, mode), []
    return None, [
        Straggler(
            o.node,
            o.value,
            o.excess,
            o.z,
            explain(o.node, evidence, cfg),
            lags.get(o.node),
            waits.get(o.node),
        )
        for o in ordered
    ]


def diagnose(
    job: Job,
    signals: RankSignals,
    evidence: NodeEvidence,
    cfg: StragglerConfig,
    *,
    comparison: Comparison | None = None,
    minutes: Sequence[PacePoint] = (),
) -> Diagnosis:
    """Stragglers, causes and cost from everything read about the job.

    A node is a straggler when its compute time sits far above the job's (or, without compute
    times, its step time does: ranks that do not wait for each other), or when one of its
    proxies sits far under the job's. The measure that names the most nodes' pace directly
    (compute, then step, then the proxies) is the one shown and costed.
    """
    job_nodes = set(job.nodes)
    signals = signals.only(job_nodes)
    compute = signals.compute_times()
    steps = node_paces(signals.step) if signals.step else {}
    waits = node_paces(signals.wait) if signals.wait else {}
    slowness, lags = proxy_lags(evidence, job_nodes, cfg)
    pace = _pace(compute, steps, slowness, lags, cfg)
    per_node, s, mode = pace.per_node, pace.spread, pace.mode
    ordered = pace.ordered
    missing = sorted(job_nodes - set(per_node)) if per_node else []
    ranks = compute if compute else list(signals.step)
    stage = stage_of_stragglers(ranks, [o.node for o in ordered]) if ranks else None
    stall = stalls(minutes, cfg) if minutes else None
    job_cause, stragglers = _named(ordered, stage, evidence, lags, waits, mode, cfg)
    named = {st.node for st in stragglers}
    suspects = _suspects(job, named, evidence, cfg) if job_cause is None else []
    if not stragglers and job_cause is None:
        job_cause = _whole_job_cause(stall, comparison, bool(compute), bool(suspects), cfg)
    step_s = statistics.median(steps.values()) if steps else None
    gain, bound = _gain(mode, stragglers, per_node, s, step_s)
    if bound and comparison is not None and comparison.change > 0:
        # A proxy bounds the gain loosely; the job cannot win back more than it lost against
        # its baseline (when the straggler began within it).
        gain = min(gain, comparison.change / (1 + comparison.change))
    return Diagnosis(
        job=job,
        mode=mode,
        median_s=s.median,
        stragglers=stragglers,
        job_cause=job_cause,
        comparison=comparison,
        missing=missing,
        gpu_hours_per_day=len(job.nodes) * max(1, job.gpus_per_node) * 24.0 * gain,
        stage=stage,
        stall=stall,
        per_node=dict(per_node),
        step_s=step_s,
        cost_is_bound=bound,
        suspects=suspects if job_cause is None else [],
        wait_median_s=statistics.median(waits.values()) if waits else None,
        measured=_measured(signals, bool(slowness)),
    )


def _measured(signals: RankSignals, proxies: bool) -> tuple[str, ...]:
    """What was measured of the job, in the words the answer names them."""
    return tuple(
        name
        for name, present in (
            ("compute time", bool(signals.compute)),
            ("collective wait", bool(signals.wait)),
            ("step time", bool(signals.step)),
            ("hardware proxies", proxies),
        )
        if present
    )


@dataclass(frozen=True)
class _Pace:
    """The measure that shows and costs the job's pace, and its slow nodes, slowest first."""

    per_node: Mapping[str, float]
    spread: Spread
    mode: str
    ordered: list[Outlier]


def _pace(
    compute: Sequence[RankTime],
    steps: Mapping[str, float],
    slowness: Mapping[str, float],
    lags: Mapping[str, Lag],
    cfg: StragglerConfig,
) -> _Pace:
    """Outliers by compute time, else step time, else the hardware proxies; and the nodes
    whose hardware lags whatever the ranks say (in a synchronous job without compute times
    the ranks' steps are equal, and only the hardware names the node)."""
    found: dict[str, Outlier] = {}
    per_node: Mapping[str, float]
    if compute:
        per_node = node_paces(compute)
        s, outs = outliers(per_node, cfg)
        mode = COMPUTE
    elif steps:
        per_node = steps
        s, outs = outliers(per_node, cfg)
        mode = STEP
    else:
        per_node, s, outs, mode = slowness, Spread(1.0, 1.0), [], PROXIES_MODE
    for o in outs:
        found[o.node] = o
    by_proxy = {n for n in lags if n not in found}
    if mode != PROXIES_MODE and by_proxy and not outs:
        # Shown and costed by the proxies: the ranks' measure does not separate the nodes.
        per_node, s, mode = slowness, Spread(1.0, 1.0), PROXIES_MODE
    for node in by_proxy:
        if mode == PROXIES_MODE:
            found[node] = Outlier(node, slowness[node], lags[node].z, slowness[node] - 1)
        else:
            value = per_node.get(node, s.median)
            excess = (value - s.median) / s.median if s.median else 0.0
            found[node] = Outlier(node, value, s.z(value), excess)
    ordered = sorted(found.values(), key=lambda o: (-o.excess, o.node))
    return _Pace(per_node, s, mode, ordered)


def _stage_cause(stage: int, ordered: Sequence[Outlier], mode: str) -> Cause:
    """Every slow rank in one pipeline stage and no node at fault: the stage's work."""
    excess = statistics.median(o.excess for o in ordered)
    return Cause(
        FaultKind.PIPELINE_IMBALANCE,
        f"every slow rank is in pipeline stage {stage} ({len(ordered)} nodes, "
        f"{excess:.0%} longer {mode}) and no node shows a fault: the stage has more work "
        "than the others (rebalance its layers)",
        Action.NONE,
    )


def _whole_job_cause(
    stall: Stalls | None,
    comparison: Comparison | None,
    compute: bool,
    suspects: bool,
    cfg: StragglerConfig,
) -> Cause | None:
    """No straggler: every rank stalling together, or the whole job slower than its baseline
    with no node's hardware lagging (None: neither)."""
    if stall is not None:
        period = f" every {stall.period_min} min" if stall.period_min else ""
        return Cause(
            FaultKind.GC_STALLS,
            f"every rank stalls together{period} ({stall.minutes} stalls, "
            f"{stall.ratio:.0%} slower each): a pause in the job itself, such as garbage "
            "collection or checkpointing, not a node",
            Action.NONE,
        )
    if comparison is None or comparison.change <= cfg.slower_threshold or suspects:
        return None
    unseparated = (
        ""
        if compute
        else " (without per-rank compute times I cannot tell one slow pipeline stage "
        "from the whole job)"
    )
    return Cause(
        FaultKind.JOB_SLOWDOWN,
        f"every node slowed together ({comparison.change:.1%} against "
        f"{comparison.baseline}) and no node's hardware lags{unseparated}: look at what "
        "changed for the whole job (data loading, the code, the filesystem, the "
        "network), not at one node",
        Action.NONE,
    )


def _gain(
    mode: str,
    stragglers: Sequence[Straggler],
    per_node: Mapping[str, float],
    s: Spread,
    step_s: float | None,
) -> tuple[float, bool]:
    """The share of the job's time the stragglers cost, and whether it is only a bound.

    Synchronous: the job runs at its slowest node's compute plus the collective, so without the
    stragglers it would run at the slowest of the rest, and the gain is the gap between the two
    computes over the iteration. From a lagging proxy only an upper bound is known: a node doing
    20 % less work a second slows the job by at most that much."""
    if not stragglers:
        return 0.0, False
    if mode == PROXIES_MODE:
        worst = max(st.seconds for st in stragglers)
        return (1.0 - 1.0 / worst if worst > 1.0 else 0.0), True
    slow = {st.node for st in stragglers}
    rest = [v for n, v in per_node.items() if n not in slow]
    slowest = max(st.seconds for st in stragglers)
    rest_max = max(rest) if rest else s.median
    if mode == COMPUTE:
        iteration = step_s if step_s is not None and step_s > slowest else slowest
        return max(0.0, slowest - rest_max) / iteration, False
    return max(0.0, 1.0 - rest_max / slowest), False


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
