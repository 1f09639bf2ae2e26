"""Passive health checks, in the style of LBNL Node Health Check: small, named, composable.

Each check reads a few metric columns of a `Table` and returns the `Fault`s it finds, each with
its evidence, severity and action, or says which of its metrics were absent: a node is never
called healthy on data that was not there. No I/O: the same checks run on Prometheus, the
simulated fleet and plain test data. Only flagged rows are looked at in detail, so a fleet of
400,000 GPUs costs one pass over each column.

A check is one entry of `CHECKS` (`Check`), named for the fault kind it finds, and everything
else about it lives in that entry: what the simulator does to show it, how its alerts group,
its words, the `/hw-faults` words for it, which kinds explain it. Readers of the entries:
bot/triage/kinds.py (words), bot/triage/targets.py (filters), bot/triage/service.py (folding),
bot/alerts/dispatch.py (grouping), bot/alerts/causes.py (usual alert names),
bot/triage/stragglers.py and jobs.py (a straggler's causes, drift versions), bot/shell/session.py
(weather), bot/render/triage.py (`/hw-faults help`, checks not run, drift) and bot/backends/sim
(effects and their parameters, scopes, clock bits, health watches, exported families, drift).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from bot import metric_names as m
from bot.give_way import give_way, in_slices
from bot.models import VERSION_DRIFT_KINDS, Action, Evidence, Fault, FaultKind, Severity
from bot.triage.repeat_config import RepeatConfig
from bot.triage.table import VERSION_LABELS, Column, MetricRequest, Reading, Table
from bot.triage.window import IN_THE_WINDOW, named
from bot.triage.xid import advice, describe
from bot.words import count

V, INC, CHG, EVENTS = Reading.VALUE, Reading.INCREASE, Reading.CHANGES, Reading.EVENTS

# The clock-event (throttle) bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS, and what each means.
THROTTLE_BITS: tuple[tuple[int, FaultKind, str, Severity, Action], ...] = (
    # Held at the power cap: normal in bursts, a straggler when it lasts; worth watching.
    (0x4, FaultKind.THROTTLE_POWER, "power cap", Severity.WARNING, Action.WATCH),
    (0x8, FaultKind.THROTTLE_HW_SLOWDOWN, "hardware slowdown", Severity.CRITICAL, Action.DRAIN),
    (
        0x20,
        FaultKind.THROTTLE_SW_THERMAL,
        "software thermal slowdown",
        Severity.WARNING,
        Action.WATCH,
    ),
    (
        0x40,
        FaultKind.THROTTLE_HW_THERMAL,
        "hardware thermal slowdown",
        Severity.CRITICAL,
        Action.DRAIN,
    ),
    (0x80, FaultKind.POWER_BRAKE, "power brake", Severity.CRITICAL, Action.DRAIN),
)


# The names checks had before each was named for its fault kind, and the checks each now
# stands for: configs that name them in `health.disabled` keep working. `pcie_width` and
# `pcie_gen` were two checks of one kind (so were the NIC's receive and transmit errors): either
# old name now turns off the one check of that kind.
_CLOCK_KINDS = frozenset(kind for _, kind, *_ in THROTTLE_BITS)
OLD_NAMES: dict[str, frozenset[FaultKind]] = {
    "throttle": _CLOCK_KINDS,
    "temperature": frozenset({FaultKind.HIGH_TEMPERATURE}),
    "pcie_width": frozenset({FaultKind.PCIE_DOWNTRAINED}),
    "pcie_gen": frozenset({FaultKind.PCIE_DOWNTRAINED}),
    "ib_link": frozenset({FaultKind.IB_LINK_DOWN}),
    "nic_rx_errors": frozenset({FaultKind.NIC_ERRORS}),
    "nic_tx_errors": frozenset({FaultKind.NIC_ERRORS}),
    "reboot": frozenset({FaultKind.UNEXPECTED_REBOOT}),
    "gpu_count": frozenset({FaultKind.GPU_MISSING}),
}


class HealthConfig(BaseModel):
    """Thresholds and switches; the defaults suit an H100 fleet. YAML key: `health`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Checks turned off, by name: a check's name is its fault kind's code, the word a drain
    # reason shows (`ecc_dbe`); the old check names (OLD_NAMES) are read as the new ones.
    disabled: frozenset[str] = frozenset()
    window_s: float = 3600.0
    expected_gpus: int = 8
    max_gpu_temp_c: float = 87.0
    nvlink_crc_per_window: float = 100.0
    nvlink_replay_per_window: float = 100.0
    pcie_replay_per_window: float = 50.0
    expected_pcie_gen: int = 5
    expected_pcie_width: int = 16
    ib_flaps_per_window: float = 3.0
    ib_symbol_errors_per_window: float = 100.0
    nic_errors_per_window: float = 100.0
    # A GPU held back (power cap, thermal slowdown) for this share of the window, by the
    # violation counters, is a throttle fault; less is GPU Boost at work, not a fault.
    throttled_share: float = 0.1
    # Violation time below this (ns) is never a fault in any window: the backend may leave
    # such GPUs out (a minute; GPU Boost touches the power cap for seconds at a time).
    min_throttled_ns: float = 60e9
    # Drift is judged against the fleet majority only where a majority exists.
    drift_min_nodes: int = 5
    # A link per node in /node-health, e.g. "https://grafana/d/gpu?var-node={node}".
    dashboard_url: str | None = None
    # The label naming the node on series that have neither a DCGM host label nor `instance`.
    node_label: str = "node"
    # Read the series of meowbot's recording rules (`meowbot prometheus-rules`) where
    # Prometheus keeps them up to date; off, every read is raw.
    recorded_rules: bool = True
    # Repeat offenders across weeks: what counts, and what their verdict becomes.
    repeat: RepeatConfig = RepeatConfig()

    @field_validator("disabled", mode="after")
    @classmethod
    def _new_names(cls, names: frozenset[str]) -> frozenset[str]:
        return frozenset(
            new
            for name in names
            for new in ((k.value for k in OLD_NAMES[name]) if name in OLD_NAMES else (name,))
        )


@dataclass(frozen=True)
class Findings:
    """What one check found: faults, and metrics it needed but did not get. `unable`: the
    kinds the missing metrics stop, where a reading shared by several kinds can still look
    for the others (empty: all of them)."""

    faults: list[Fault] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unable: frozenset[FaultKind] = frozenset()

    def stops(self, kind: FaultKind) -> bool:
        """Whether the missing metrics keep `kind` from being looked for."""
        return bool(self.missing) and (not self.unable or kind in self.unable)


CheckFn = Callable[[Table, HealthConfig], Findings]


@dataclass(frozen=True)
class Threshold:
    """A check that is one comparison on one metric, a row at a time: declared, not coded."""

    metric: str
    reading: Reading
    test: Callable[[float, HealthConfig], bool]
    summary: Callable[[float, HealthConfig], str]
    per_gpu: bool = True
    # The plain comparison that prefilters the rows (fast over 400,000 of them) before `test`.
    floor: Callable[[HealthConfig], float] | None = lambda c: 0.0
    ceiling: Callable[[HealthConfig], float] | None = None
    keep: str = "> 0"

    @property
    def request(self) -> MetricRequest:
        return MetricRequest(self.metric, self.reading, self.keep)

    def find(self, table: Table, cfg: HealthConfig, entry: Check) -> Findings:
        col = table.get(self.metric)
        if col is None:
            return Findings(missing=[self.metric])
        candidates: list[int]
        if self.ceiling is not None:
            candidates = _between(col.values, 0.0, self.ceiling(cfg))
        elif self.floor is not None:
            candidates = _above(col.values, self.floor(cfg))
        else:
            test = self.test
            candidates = _where(col.values, lambda v: v == v and test(v, cfg))  # NaN: no series
        faults = [
            _fault(
                table,
                col,
                i,
                entry.kind,
                entry.severity,
                entry.action,
                self.summary(col.values[i], cfg),
                per_gpu=self.per_gpu,
            )
            for i in candidates
            if col.values[i] == col.values[i] and self.test(col.values[i], cfg)
        ]
        return Findings(faults=faults)


@dataclass(frozen=True, eq=False)
class Custom:
    """A check that needs code: several metrics read together, or findings that decide their
    own severity (the Xid catalog, DCGM's watches). Entries that share one `Custom` (the five
    clock-event kinds) run it once a read and each keeps the faults of its kind."""

    needs: tuple[MetricRequest, ...]
    run: CheckFn


# How meowbot's alerts group a kind's alerts: one broken leaf switch is one message, not 32;
# a hot rack (cooling) one, not one per GPU. The names are bot.alerts.models.Scope's values.
GroupBy = Literal["node", "rack", "leaf_switch"]
# What a simulated fault of a kind sits on (bot/backends/sim/faults.py `Scope`).
SimOn = Literal["gpu", "nic", "netdev", "node"]
# How a simulated fault moves one series; the simulator's vocabulary (sim/faults.py EFFECT_OF):
# set: the detail's value `arg`; const: the number `arg`; at_least / at_most / times / plus: the
# healthy value against the detail's `arg`; counter: ticks once, then `arg` a minute (times
# `scale`); bits: ORs in the bit `arg`; held: grows 1 s a second (a violation counter, ns);
# flap_count / flap_state: down a minute every `period_s` (state `arg` while down); if_given:
# the detail's `arg` where the fault has it; bump: plus the number `arg`; since: the fault's
# start (a boot time).
How = Literal[
    "set",
    "const",
    "at_least",
    "at_most",
    "times",
    "plus",
    "counter",
    "bits",
    "held",
    "flap_count",
    "flap_state",
    "if_given",
    "bump",
    "since",
]


@dataclass(frozen=True)
class Sets:
    metric: str
    how: How
    arg: str | float = ""
    scale: float = 1.0


# A simulated fault's parameters (its `detail`: the Xid code, a counter's rate, the NIC, the
# drifted version...), drawn at injection for those the caller left out, in the order listed:
# a seeded fleet draws them alike every time (bot/backends/sim/faults.py: default_detail). The
# simulator's vocabulary, like `How`: Fixed a value; OneOf one of `values`; Between a whole
# number from `low` to `high` (both in), or with `digits` a uniform one rounded to them;
# Device one of the node's InfiniBand ports (`nics`) or interfaces (`netdevs`); Either the
# parameters of `first` half the time (one draw decides), else those of `second`.
ParamValue = str | int | float


@dataclass(frozen=True)
class Fixed:
    key: str
    value: ParamValue


@dataclass(frozen=True)
class OneOf:
    key: str
    values: tuple[ParamValue, ...]


@dataclass(frozen=True)
class Between:
    key: str
    low: float
    high: float
    digits: int | None = None


@dataclass(frozen=True)
class Device:
    key: str
    of: Literal["nics", "netdevs"]


@dataclass(frozen=True)
class Either:
    first: tuple[Param, ...]
    second: tuple[Param, ...]


Param = Fixed | OneOf | Between | Device | Either


@dataclass(frozen=True)
class Exported:
    """A family a check reads that the simulated exporters do not already export: its HELP
    line, and the value every healthy GPU (or node) shows."""

    metric: str
    help: str
    healthy: float
    per: Literal["gpu", "node"] = "gpu"


@dataclass(frozen=True)
class Injects:
    """How the simulator shows a fault of the kind: what it sits on, how much slower it makes
    a job's ranks on the node (0: none; else at least 6 %, clear of the +-1.5 % jitter), and
    the series it moves. Presence (a GPU gone), versions (drift) and DCGM's watch rows are
    written by the simulator's engine, not a value transform: `sets` is empty for those."""

    on: SimOn
    slowdown: float = 0.0
    sets: tuple[Sets, ...] = ()
    # The DCGM health watch the fault also trips: (watch, result, DCGM_FR_ error code).
    health: tuple[str, int, str] | None = None
    # Drawn among the random faults of a seeded fleet: a kind added later says False, so
    # that every seeded fleet (and every test built on one) stays what it was.
    at_random: bool = True
    exports: tuple[Exported, ...] = ()
    # Its parameters where the caller gives none (the words above `Fixed`), in draw order.
    detail: tuple[Param, ...] = ()


@dataclass(frozen=True)
class Version:
    """What a drift check compares with the fleet's majority: the `component` of a node's
    versions it is (`driver`, `kernel`, `firmware`: the node's info, the simulator's version
    slots), `what` it is in words, and the `label` of `metric` that carries it."""

    component: str
    what: str
    metric: str
    label: str


@dataclass(frozen=True)
class Check:
    """One health check: everything about it is here, and the rest of meowbot reads it.

    Its name is its fault kind's code (`high_temperature`, `xid`), the code a Slurm reason
    shows (`meowbot: ecc_dbe gpu2`), an alert groups by and `/hw-faults` filters on: the word
    in a reason is the word `health.disabled` takes (an Xid's reason adds its code: `xid79` is
    the check `xid`). A check finds exactly one kind: where one reading finds several (the
    clock-event bits), each kind is an entry and the entries share one `Custom`, run once a
    read; where several metrics show one kind (PCIe width and generation, NIC receive and
    transmit errors), one entry reads them all. The names checks had before they were named
    for their kind are still accepted (`OLD_NAMES`).

    `severity` and `action` are what it finds (at worst, where the finding decides: an Xid by
    NVIDIA's catalog, DCGM's watch by fail or warn); `reads` the HealthConfig fields it reads;
    `group_by` its alert grouping; `filters` the words people type in `/hw-faults` for it and
    its family (`temp`: every thermal kind); `explained_by` the kinds that explain it on the
    same GPU (it is folded into them as evidence, not a row of its own); `injects` how the
    simulator shows it. `straggler_rank` is its place among the findings that name a slow
    job's straggler (bot/triage/stragglers.py), most specific first (1 first; 0: it names
    none); `alertnames` the names (lower case) of dcgm-exporter's and node_exporter's usual
    Alertmanager rules that report it (bot/alerts/causes.py); `version` what a drift check
    compares; `weather` its place in the interactive shell's weather draw (1 first; 0: the
    weather never brings it; bot/shell/session.py).
    """

    kind: FaultKind
    description: str
    words: str
    finds: tuple[Threshold, ...] | Custom
    severity: Severity
    action: Action
    injects: Injects
    reads: tuple[str, ...] = ()
    group_by: GroupBy = "node"
    filters: tuple[str, ...] = ()
    explained_by: frozenset[FaultKind] = frozenset()
    straggler_rank: int = 0
    alertnames: tuple[str, ...] = ()
    version: Version | None = None
    weather: int = 0

    @property
    def name(self) -> str:
        return self.kind.value

    @property
    def kinds(self) -> tuple[FaultKind, ...]:
        """The kinds it can find (one): a check that could not run says nothing about them, so
        the alert sweep must not resolve their alerts on its silence."""
        return (self.kind,)

    @property
    def needs(self) -> tuple[MetricRequest, ...]:
        if isinstance(self.finds, Custom):
            return self.finds.needs
        return tuple(t.request for t in self.finds)

    def run(self, table: Table, cfg: HealthConfig) -> Findings:
        if isinstance(self.finds, Custom):
            found = self.finds.run(table, cfg)
            return Findings(
                [f for f in found.faults if f.kind is self.kind],
                found.missing if found.stops(self.kind) else [],
            )
        parts = [t.find(table, cfg, self) for t in self.finds]
        return Findings(
            [f for p in parts for f in p.faults], [mt for p in parts for mt in p.missing]
        )


def _gpu(labels: Mapping[str, str]) -> int | None:
    value = labels.get(m.LABEL_GPU)
    return int(value) if value is not None and value.isdigit() else None


def _evidence(col: Column, i: int, note: str = "") -> Evidence:
    return Evidence(series=col.name, labels=dict(col.labels(i)), value=col.values[i], note=note)


def _fault(
    table: Table,
    col: Column,
    i: int,
    kind: FaultKind,
    severity: Severity,
    action: Action,
    summary: str,
    *,
    per_gpu: bool = True,
    note: str = "",
) -> Fault:
    labels = col.labels(i)
    return Fault(
        kind=kind,
        node=col.node(i),
        gpu=_gpu(labels) if per_gpu else None,
        since=table.at,
        evidence=(_evidence(col, i, note),),
        severity=severity,
        action=action,
        summary=summary,
    )


WHERE_STEP = 16_384
"""Rows a check tests between two stand-asides (bot/give_way.py: in_slices)."""


def _above(values: Sequence[float], limit: float) -> list[int]:
    # NaN compares false: skipped. Inline, not through `_where`: a call a row costs twice as much.
    return [
        i
        for part in in_slices(len(values), WHERE_STEP)
        for i, v in enumerate(values[part], part.start)
        if v > limit
    ]


def _between(values: Sequence[float], low: float, high: float) -> list[int]:
    return [
        i
        for part in in_slices(len(values), WHERE_STEP)
        for i, v in enumerate(values[part], part.start)
        if low < v < high
    ]


def _where(values: Sequence[float], keep: Callable[[float], bool]) -> list[int]:
    return [
        i
        for part in in_slices(len(values), WHERE_STEP)
        for i, v in enumerate(values[part], part.start)
        if keep(v)
    ]


# --- the checks ------------------------------------------------------------------------------


XID_TOTAL_REQUEST = MetricRequest(m.DCGM_EXP_XID_ERRORS_TOTAL, EVENTS)
"""Unfiltered: its rows (a GPU and code seen since the exporter started) also say which nodes
run the newer exporter, and so whose last-Xid gauge is not to be believed on its own."""


def _xid(table: Table, cfg: HealthConfig) -> Findings:
    """Xids per code, from the best evidence each node has.

    DCGM_EXP_XID_ERRORS_TOTAL (newer exporters) counts every Xid since the exporter started:
    the Xids of the window are its growth, and a node with any row of it is judged on it
    alone. There the last-Xid gauge DCGM_FI_DEV_XID_ERRORS is not read: it stays set after the
    GPU is reset (dcgm-exporter #500), so a reset, drained and resumed node would be drained
    again for the same old Xid, and a new Xid of the same code would not move it. Elsewhere
    DCGM_EXP_XID_ERRORS_COUNT where enabled (how many in the window: a repeat shows), and the
    gauge for GPUs it does not cover (the service forgets gauge values that predate a resume
    meowbot made: bot/triage/resumes.py).
    """
    totals = table.get(XID_TOTAL_REQUEST.key)
    counts = table.get(m.DCGM_EXP_XID_ERRORS_COUNT)
    last = table.get(m.DCGM_FI_DEV_XID_ERRORS)
    if totals is None and counts is None and last is None:
        return Findings(missing=[m.DCGM_FI_DEV_XID_ERRORS])
    faults: list[Fault] = []
    seen: set[tuple[str, int | None, int]] = set()
    # Nodes whose exporter counts Xids since it started: their other Xid series say nothing
    # the totals do not, and the gauge may say what is no longer true.
    counted = {totals.node(i) for i in range(len(totals))} if totals is not None else set()

    def add(col: Column, i: int, code: int, times: int | None, note: str = "") -> None:
        gpu = _gpu(col.labels(i))
        if code <= 0 or (col.node(i), gpu, code) in seen:
            return
        seen.add((col.node(i), gpu, code))
        info = describe(code)
        again = f", {times:,} times in the window" if times and times > 1 else ""
        summary = (
            f"Xid {info.code}: {info.meaning}{again} ({advice(info.immediate, info.investigatory)})"
        )
        faults.append(
            _fault(table, col, i, FaultKind.XID, info.severity, info.action, summary, note=note)
        )

    if totals is not None:
        for i in _above(totals.values, 0.0):
            code = totals.labels(i).get(m.LABEL_XID, "")
            if code.isdigit():
                add(totals, i, int(code), round(totals.values[i]), "Xids in the window")
        # Counted since the exporter started but none in the window: history, said as such
        # (what it did to the GPU, a lost GPU or a double-bit error, has checks of its own).
        for i, grown in enumerate(totals.values):
            code = totals.labels(i).get(m.LABEL_XID, "")
            gpu = _gpu(totals.labels(i))
            if grown == 0 and code.isdigit() and (totals.node(i), gpu, int(code)) not in seen:
                seen.add((totals.node(i), gpu, int(code)))
                info = describe(int(code))
                summary = (
                    f"Xid {info.code}: {info.meaning}, before the window (counted since the "
                    "exporter started); none in the window"
                )
                faults.append(
                    _fault(
                        table,
                        totals,
                        i,
                        FaultKind.XID,
                        Severity.INFO,
                        Action.NONE,
                        summary,
                        note="no Xid of this code in the window",
                    )
                )
    if counts is not None:
        for i in _above(counts.values, 0.0):
            code = counts.labels(i).get(m.LABEL_XID, "")
            if code.isdigit() and counts.node(i) not in counted:
                add(counts, i, int(code), round(counts.values[i]))
    if last is not None:
        for i in _above(last.values, 0.0):
            if last.node(i) not in counted:
                add(last, i, int(last.values[i]), None, "the last Xid, a gauge that stays set")
    return Findings(faults=faults)


# The violation counters (ns held back) of the reasons that are ordinary in short bursts: the
# instant bitmask cannot tell a burst from a GPU held back all hour, these can. The hardware
# reasons (slowdown, HW thermal, power brake) are faults however short, read off the bitmask.
VIOLATIONS: tuple[tuple[str, int, FaultKind, str], ...] = (
    (
        m.DCGM_FI_DEV_POWER_VIOLATION,
        m.CLOCK_EVENT_SW_POWER_CAP,
        FaultKind.THROTTLE_POWER,
        "at the power cap",
    ),
    (
        m.DCGM_FI_DEV_THERMAL_VIOLATION,
        m.CLOCK_EVENT_SW_THERMAL,
        FaultKind.THROTTLE_SW_THERMAL,
        "in thermal slowdown",
    ),
)
VIOLATION_REQUESTS = tuple(
    MetricRequest(metric, INC, "> {min_throttled_ns}") for metric, *_ in VIOLATIONS
)
# One row a node that exports each counter: where it is absent the bitmask is all there is.
VIOLATION_NODES = tuple(MetricRequest(metric, V, per_node=True) for metric, *_ in VIOLATIONS)
# Newer exporters count each time a reason came on (DCGM_EXP_CLOCK_EVENTS_TOTAL, edge-counted):
# a hardware reason that came on in the window is a fault even when it is off at the read,
# which the bitmask alone misses. The power cap and software thermal ones come on all day on
# busy GPUs; the violation counters say how long, which is what matters for those.
CLOCK_EVENTS_REQUEST = MetricRequest(m.DCGM_EXP_CLOCK_EVENTS_TOTAL, EVENTS, "> 0")
HARDWARE_CLOCK_EVENTS = {
    m.CLOCK_EVENT_NAMES[bit]: bit
    for bit in (m.CLOCK_EVENT_HW_SLOWDOWN, m.CLOCK_EVENT_HW_THERMAL, m.CLOCK_EVENT_HW_POWER_BRAKE)
}


def _throttle(table: Table, cfg: HealthConfig) -> Findings:
    col = table.get(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS)
    held: dict[int, tuple[dict[tuple[str, int | None], tuple[Column, int]], set[str]]] = {}
    for (_metric, bit, *_), grown_req, nodes_req in zip(
        VIOLATIONS, VIOLATION_REQUESTS, VIOLATION_NODES, strict=True
    ):
        grown, nodes = table.get(grown_req.key), table.get(nodes_req.key)
        if grown is None or nodes is None:
            continue
        rows = {(grown.node(i), _gpu(grown.labels(i))): (grown, i) for i in _above(grown.values, 0)}
        covered = {nodes.node(i) for i in range(len(nodes)) if nodes.values[i] == nodes.values[i]}
        held[bit] = (rows, covered)
    events = table.get(CLOCK_EVENTS_REQUEST.key)
    if col is None and not held and events is None:
        return Findings(missing=[m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS])
    # Without the bitmask a power cap or software thermal slowdown is still measured by its
    # violation counter; a hardware reason is not (the clock-event counter sees one come on
    # in the window, not one that has held since before it): those kinds are not checked.
    unable = (
        frozenset(kind for bit, kind, *_ in THROTTLE_BITS if bit not in held)
        if col is None
        else frozenset()
    )
    window_ns = max(table.window_s, 1.0) * 1e9

    def share_of(ns: float) -> float:
        # At most the whole window: the sample a window's start finds may be a little older.
        return min(ns / window_ns, 1.0)

    faults = []
    reported: set[tuple[str, int | None, int]] = set()
    mask = sum(bit for bit, *_ in THROTTLE_BITS)
    # Idle GPUs report bit 0x1 (GPU idle): a value of 0 or 1 is never a throttle.
    rows_now = [i for i in _above(col.values, 1.0) if int(col.values[i]) & mask] if col else []
    for i in rows_now:
        assert col is not None
        bits = int(col.values[i])
        where = (col.node(i), _gpu(col.labels(i)))
        for bit, kind, meaning, severity, action in THROTTLE_BITS:
            if not bits & bit:
                continue
            summary = f"clocks held back: {meaning} (bit {bit:#x} of {bits:#x})"
            if bit in held and where[0] in held[bit][1]:
                # The counter says how long: a burst at the instant read is not a fault.
                counter = held[bit][0].get(where)
                share = share_of(counter[0].values[counter[1]]) if counter else 0.0
                if share < cfg.throttled_share:
                    continue
                summary += f", {share:.0%} of the window"
            reported.add((*where, bit))
            faults.append(_fault(table, col, i, kind, severity, action, summary))
    # Held back much of the window but not at the instant read: the bitmask missed it.
    for metric, bit, kind, meaning in VIOLATIONS:
        if bit not in held:
            continue
        severity, action = next((s, a) for b, _, _, s, a in THROTTLE_BITS if b == bit)
        for where, (grown, i) in held[bit][0].items():
            share = share_of(grown.values[i])
            if (*where, bit) in reported or share < cfg.throttled_share:
                continue
            if (
                bit == m.CLOCK_EVENT_SW_THERMAL
                and col is not None
                and any(
                    col.node(j) == where[0]
                    and _gpu(col.labels(j)) == where[1]
                    and int(col.values[j]) & m.CLOCK_EVENT_HW_THERMAL
                    for j in rows_now
                )
            ):
                continue  # the hardware thermal slowdown is the finding; this counts it too
            summary = f"clocks held back {meaning} {share:.0%} of the window ({metric})"
            faults.append(
                _fault(
                    table,
                    grown,
                    i,
                    kind,
                    severity,
                    action,
                    summary,
                    note=f"{grown.values[i] / 1e9:.0f} s held back in the window",
                )
            )
    # A hardware reason that came on in the window and is off at the read.
    for i in _above(events.values, 0.0) if events is not None else ():
        assert events is not None
        bit = HARDWARE_CLOCK_EVENTS.get(events.labels(i).get(m.LABEL_CLOCK_EVENT, ""), 0)
        where = (events.node(i), _gpu(events.labels(i)))
        if not bit or (*where, bit) in reported:
            continue
        reported.add((*where, bit))
        _, kind, meaning, severity, action = next(t for t in THROTTLE_BITS if t[0] == bit)
        times = round(events.values[i])
        summary = (
            f"clocks held back: {meaning} came on {times} time{'s' if times > 1 else ''} in "
            "the window (not at the instant read)"
        )
        faults.append(_fault(table, events, i, kind, severity, action, summary))
    if unable:
        return Findings(faults, [m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS], unable)
    return Findings(faults=faults)


# DCGM's power and thermal watches warn on any violation time at all (DCGM #285), which
# every busy GPU has: their warnings are left to the violation counters and the bitmask above.
HEALTH_NOISY_WATCHES = frozenset({"POWER", "THERMAL"})


def _dcgm_health(table: Table, cfg: HealthConfig) -> Findings:
    """What DCGM's own health watches report (DCGM_EXP_GPU_HEALTH_STATUS, newer exporters):
    a failing watch drains, a warning is watched. It is the only evidence of what no other
    family shows (a corrupt InfoROM, PMU or MCU errors, the driver), and it stands beside the
    other checks' findings where both see the same fault (a double-bit ECC error)."""
    col = table.get(m.DCGM_EXP_GPU_HEALTH_STATUS)
    if col is None:
        return Findings(missing=[m.DCGM_EXP_GPU_HEALTH_STATUS])
    faults = []
    for i in _above(col.values, float(m.HEALTH_PASS)):
        labels = col.labels(i)
        watch = labels.get(m.LABEL_HEALTH_WATCH, "?")
        code = labels.get(m.LABEL_HEALTH_ERROR_CODE, "?")
        failed = col.values[i] >= m.HEALTH_FAIL
        if watch in HEALTH_NOISY_WATCHES and not failed:
            continue
        severity, action = (
            (Severity.CRITICAL, Action.DRAIN) if failed else (Severity.WARNING, Action.WATCH)
        )
        verdict = "fails" if failed else "warns"
        summary = f"DCGM's {watch} health watch {verdict} ({code})"
        faults.append(_fault(table, col, i, FaultKind.DCGM_HEALTH, severity, action, summary))
    return Findings(faults=faults)


# Any always-present per-GPU gauge counts the GPUs a node still shows (NaN: not there); the
# backend may leave out the nodes that show them all.
GPU_COUNT_REQUEST = MetricRequest(m.DCGM_FI_DEV_GPU_TEMP, V, fewer_per_node="{expected_gpus}")


def _gpu_count(table: Table, cfg: HealthConfig) -> Findings:
    col = table.get(GPU_COUNT_REQUEST.key)
    if col is None:
        return Findings(missing=[m.DCGM_FI_DEV_GPU_TEMP])
    rows: dict[str, list[int]] = defaultdict(list)
    values = col.values
    if col.node_rows is not None:
        # Only short nodes and nodes with a NaN row can miss a GPU: one pass over the rows
        # finds the NaNs, rather than a list built for each of 50,000 nodes.
        starts = [*col.node_rows, len(values)]
        nans = {bisect.bisect_right(starts, i) - 1 for i, v in enumerate(values) if v != v}
        for k, (start, end) in enumerate(itertools.pairwise(starts)):
            if end - start < cfg.expected_gpus or k in nans:
                rows[col.node(start)] = [i for i in range(start, end) if values[i] == values[i]]
    else:
        for i, value in enumerate(values):
            if value == value:  # not NaN
                rows[col.node(i)].append(i)
    faults = []
    for node, node_rows in rows.items():
        if len(node_rows) >= cfg.expected_gpus:
            continue
        seen = {_gpu(col.labels(i)) for i in node_rows}
        lost = sorted(set(range(cfg.expected_gpus)) - seen)
        listed = ", ".join(map(str, lost))
        faults.append(
            Fault(
                kind=FaultKind.GPU_MISSING,
                node=node,
                gpu=lost[0] if len(lost) == 1 else None,
                since=table.at,
                evidence=(
                    Evidence(
                        series=f"count({col.name})",
                        labels={"node": node},
                        value=float(len(node_rows)),
                        note=f"expected {cfg.expected_gpus}; missing GPU {listed}",
                    ),
                ),
                severity=Severity.CRITICAL,
                action=Action.DRAIN,
                summary=f"{len(node_rows)} of {cfg.expected_gpus} GPUs visible (GPU {listed} gone)",
            )
        )
    return Findings(faults=faults)


# The port states of the InfiniBand spec as `node_infiniband_state_id` exports them: "(state 1)"
# means nothing to most readers.
_IB_STATES = {
    0: "in no known state",
    1: "down",
    2: "initializing (no subnet manager yet)",
    3: "armed",
    5: "active, deferred",
}


def _ib_state(value: float) -> str:
    state = int(value)
    return _IB_STATES.get(state, f"in state {state}")


def _ib_link_down(table: Table, cfg: HealthConfig) -> Findings:
    col = table.get(m.NODE_INFINIBAND_STATE_ID)
    if col is None:
        return Findings(missing=[m.NODE_INFINIBAND_STATE_ID])
    faults = []
    for i in [i for i, v in enumerate(col.values) if v != 4 and v == v]:
        port = col.labels(i).get("device", "?") + "/" + col.labels(i).get("port", "?")
        faults.append(
            _fault(
                table,
                col,
                i,
                FaultKind.IB_LINK_DOWN,
                Severity.CRITICAL,
                Action.DRAIN,
                f"InfiniBand port {port} is {_ib_state(col.values[i])}, not active",
                per_gpu=False,
            )
        )
    return Findings(faults=faults)


def _drifted(versions: Mapping[str, int], majority: str) -> tuple[str, int]:
    """A node's first version that is not the majority's, with its row; ("", -1) if none."""
    return next(((v, i) for v, i in versions.items() if v != majority), ("", -1))


def _drift(kind: FaultKind, version: Version) -> Custom:
    what, metric, label = version.what, version.metric, version.label
    # One row a node tells its version: the backend may answer one a node.
    labels = tuple(lb for mt, lb in VERSION_LABELS if mt == metric)
    request = MetricRequest(metric, V, per_node=True, by=labels)

    def run(table: Table, cfg: HealthConfig) -> Findings:
        col = table.get(request.key)
        if col is None:
            return Findings(missing=[metric])
        # Every version a node shows (a node whose GPUs disagree shows two), with a row for
        # the evidence: a node counts once per version, as the backends' fleet-wide counts
        # do, so a node judged within a selection and within the fleet meets the same count.
        versions: dict[str, dict[str, int]] = defaultdict(dict)
        for i in col.node_rows if col.node_rows is not None else range(len(col)):
            if not i & 4095:
                give_way()  # 50,000 nodes take tens of ms: the acks of a burst go first
            value = col.label(i, label)
            if value:
                versions[col.node(i)].setdefault(value, i)
        fleet = table.fleet_versions.get(label)
        if not versions and not fleet:
            # dcgm-exporter attaches the VBIOS version only where configured: a label nobody
            # carries is a check not run, never a fleet without drift.
            return Findings(missing=[f"{metric}{{{label}}}"])
        if label in table.fleet_versions and not fleet:
            # Some nodes read, and the fleet's counts did not come back (a broken rule, a
            # failed aggregation): the selection alone has no majority to differ from.
            return Findings(missing=[f"{metric}{{{label}}} across the fleet"])
        counts = Counter(fleet) if fleet else Counter(v for vs in versions.values() for v in vs)
        give_way()  # counting 50,000 nodes' versions and finding the drifted: two steps
        total = sum(counts.values())
        if total < cfg.drift_min_nodes or not counts:
            return Findings()
        majority, votes = counts.most_common(1)[0]
        if votes * 2 <= total:
            return Findings()  # no majority: a rolling upgrade, not drift
        faults = [
            _fault(
                table,
                col,
                i,
                kind,
                Severity.WARNING,
                Action.WATCH,
                f"{what} {version} differs from the fleet's {majority}",
                per_gpu=False,
                note=f"fleet majority {majority} on {votes} of {total} nodes",
            )
            for version, i in (_drifted(vs, majority) for vs in versions.values())
            if version
        ]
        return Findings(faults=faults)

    return Custom((request,), run)


THROTTLE = Custom(
    # Above 1: bit 0x1 alone is an idle GPU.
    (
        MetricRequest(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, V, "> 1"),
        MetricRequest(m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, V, "> 1"),
        *VIOLATION_REQUESTS,
        *VIOLATION_NODES,
        CLOCK_EVENTS_REQUEST,
    ),
    _throttle,
)


def _clock_event(
    kind: FaultKind,
    words: str,
    slowdown: float,
    clocks: tuple[int, ...],
    *more: Sets,
    detail: tuple[Param, ...] = (),
    health: tuple[str, int, str] | None = None,
    group_by: GroupBy = "node",
    filters: tuple[str, ...] = ("throttle",),
    straggler_rank: int = 0,
    weather: int = 0,
) -> Check:
    """A clock-event kind: its bit, meaning, severity and action are its row of THROTTLE_BITS;
    the simulator sets its bit in both names of the bitmask and holds the SM clock down, at
    one of `clocks` (MHz) unless the fault's slowdown decides it."""
    bit, _, meaning, severity, action = next(row for row in THROTTLE_BITS if row[1] is kind)
    sets = (
        Sets(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, "bits", bit),
        Sets(m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, "bits", bit),
        CLOCK_HELD,
        *more,
    )
    return Check(
        kind,
        f"clock-event (throttle) reasons: {meaning}",
        words,
        THROTTLE,
        severity,
        action,
        Injects("gpu", slowdown, sets, health, detail=(OneOf("sm_clock_mhz", clocks), *detail)),
        ("throttled_share", "min_throttled_ns"),
        group_by,
        filters,
        straggler_rank=straggler_rank,
        weather=weather,
    )


def _drift_check(
    kind: FaultKind, version: Version, versions: tuple[str, ...], filters: tuple[str, ...]
) -> Check:
    """A drift kind: a node whose `version` differs from the fleet's majority. The simulator
    moves the node to one of `versions`."""
    return Check(
        kind,
        f"{version.what} differs from the fleet majority",
        f"{version.component} differs from the fleet",
        _drift(kind, version),
        Severity.WARNING,
        Action.WATCH,
        Injects("node", 0.06, detail=(OneOf("version", versions),)),
        ("drift_min_nodes",),
        filters=filters,
        version=version,
    )


# How a clock-event kind (and a low SM clock) holds the GPU back: the SM clock at most the
# fault's `sm_clock_mhz` (sim/faults.py reads it to match a given slowdown).
CLOCK_HELD = Sets(m.DCGM_FI_DEV_SM_CLOCK, "at_most", "sm_clock_mhz")
# The Xid codes that matter for triage; the simulator injects any of them.
XID_CODES: tuple[int, ...] = (13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120)
# A link that replays flits sends less data: the throughput proxy falls with the errors.
_NVLINK_SHARE = Sets(m.DCGM_FI_PROF_NVLINK_TX_BYTES, "times", "nvlink_share")
_NVLINK_WATCH = ("NVLINK", m.HEALTH_WARN, "DCGM_FR_NVLINK_ERROR_THRESHOLD")
_THERMAL_WATCH = ("THERMAL", m.HEALTH_WARN, "DCGM_FR_CLOCK_THROTTLE_THERMAL")
_HOT = Sets(m.DCGM_FI_DEV_GPU_TEMP, "at_least", "temp_c")
_HELD_THERMAL = Sets(m.DCGM_FI_DEV_THERMAL_VIOLATION, "held")
_THERMAL_KINDS = frozenset({FaultKind.THROTTLE_SW_THERMAL, FaultKind.THROTTLE_HW_THERMAL})
_THERMAL = ("thermal", "temperature", "temp", "hot")
_ECC = ("ecc", "memory")
_IB = ("ib", "infiniband", "network")
_REPLAYS_PER_MIN = Between("per_min", 2.0, 20.0, 2)
# Of the link's usual traffic, the rest lost to replays.
_NVLINK_DETAIL = (_REPLAYS_PER_MIN, Fixed("nvlink_share", 0.7))
_PORT = Device("nic", "nics")

# The table is laid out by hand (`# fmt: skip`): an entry reads as one row, its threshold,
# severity, action and simulator effect each on its own line, which the formatter would
# scatter over three times as many lines.
CHECKS: tuple[Check, ...] = (
    Check(
        FaultKind.XID, "GPU Xid errors, by NVIDIA's catalog", "GPU Xid error",
        Custom((MetricRequest(m.DCGM_FI_DEV_XID_ERRORS, V, "> 0"),
                MetricRequest(m.DCGM_EXP_XID_ERRORS_COUNT, INC, "> 0"), XID_TOTAL_REQUEST), _xid),
        Severity.CRITICAL, Action.DRAIN,
        Injects("gpu", sets=(Sets(m.DCGM_FI_DEV_XID_ERRORS, "set", "xid"),),
                detail=(OneOf("xid", XID_CODES), Fixed("count", 1))),
        straggler_rank=6, weather=1,
        alertnames=("dcgm_fi_dev_xid_errors", "gpuxiderror", "gpuxiderrors", "dcgmxiderrors"),
    ),
    Check(
        FaultKind.ECC_DBE, "double-bit (uncorrectable) ECC errors", "double-bit ECC error",
        (Threshold(m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, V, lambda v, c: v > 0,
                   lambda v, c: f"{count(v, 'double-bit ECC error')}: reset the GPU"),),
        Severity.CRITICAL, Action.DRAIN,
        Injects("gpu", sets=(Sets(m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, "plus", "count"),),
                health=("MEM", m.HEALTH_FAIL, "DCGM_FR_VOLATILE_DBE_DETECTED"),
                detail=(Between("count", 1, 3),)),
        filters=_ECC, straggler_rank=7, weather=2,
        alertnames=("dcgm_fi_dev_ecc_dbe_vol_total", "gpueccdbe", "gpueccdoublebiterrors"),
    ),
    Check(
        FaultKind.ROW_REMAP_FAILURE, "row-remap failure", "row-remap failure",
        (Threshold(m.DCGM_FI_DEV_ROW_REMAP_FAILURE, V, lambda v, c: v > 0,
                   lambda v, c: "row remapping failed: the GPU's memory is out of spare rows (RMA)"),),
        Severity.CRITICAL, Action.RMA,
        Injects("gpu", sets=(Sets(m.DCGM_FI_DEV_ROW_REMAP_FAILURE, "const", 1.0),),
                health=("MEM", m.HEALTH_FAIL, "DCGM_FR_ROW_REMAP_FAILURE")),
        filters=(*_ECC, "remap"),
        alertnames=("dcgm_fi_dev_row_remap_failure", "gpurowremapfailure"),
    ),
    Check(
        FaultKind.ROW_REMAP_PENDING, "pending row remaps", "pending row remap",
        (Threshold(m.DCGM_FI_DEV_ROW_REMAP_PENDING, V, lambda v, c: v > 0,
                   lambda v, c: "a row remap is pending: reset the GPU when it is idle"),),
        Severity.WARNING, Action.RESET_GPU,
        Injects("gpu", sets=(Sets(m.DCGM_FI_DEV_ROW_REMAP_PENDING, "const", 1.0),),
                health=("MEM", m.HEALTH_WARN, "DCGM_FR_PENDING_ROW_REMAP")),
        filters=(*_ECC, "remap"), straggler_rank=8,
    ),
    _clock_event(
        FaultKind.THROTTLE_POWER, "power-cap slowdown", 0.08, (1560, 1605, 1650),
        Sets(m.DCGM_FI_DEV_POWER_USAGE, "set", "power_w"),
        Sets(m.DCGM_FI_DEV_POWER_VIOLATION, "held"), detail=(Fixed("power_w", 699.0),),
        health=("POWER", m.HEALTH_WARN, "DCGM_FR_CLOCK_THROTTLE_POWER"), group_by="rack",
        filters=("throttle", "power"), straggler_rank=5,
    ),
    _clock_event(FaultKind.THROTTLE_HW_SLOWDOWN, "hardware slowdown", 0.35, (990, 1095, 1200),
                 straggler_rank=2),
    _clock_event(
        FaultKind.THROTTLE_SW_THERMAL, "software thermal slowdown", 0.12, (1605, 1650), _HOT,
        _HELD_THERMAL, detail=(Between("temp_c", 86, 88),),
        health=_THERMAL_WATCH, group_by="rack", filters=("throttle", *_THERMAL),
        straggler_rank=4, weather=3,
    ),
    _clock_event(
        FaultKind.THROTTLE_HW_THERMAL, "hardware thermal slowdown", 0.25, (1095, 1200), _HOT,
        _HELD_THERMAL, detail=(Between("temp_c", 92, 95),),
        health=_THERMAL_WATCH, group_by="rack", filters=("throttle", *_THERMAL),
        straggler_rank=3,
    ),
    _clock_event(
        FaultKind.POWER_BRAKE, "power brake", 0.5, (705, 810),
        Sets(m.DCGM_FI_DEV_POWER_USAGE, "at_most", "power_w"), detail=(Fixed("power_w", 310.0),),
        group_by="rack", filters=("throttle", "power"), straggler_rank=1,
    ),
    Check(
        FaultKind.HIGH_TEMPERATURE, "GPU temperature", "high GPU temperature",
        (Threshold(m.DCGM_FI_DEV_GPU_TEMP, V, lambda v, c: v > c.max_gpu_temp_c,
                   lambda v, c: f"GPU at {v:.0f} °C (limit {c.max_gpu_temp_c:.0f} °C): check cooling",
                   floor=lambda c: c.max_gpu_temp_c, keep="> {max_gpu_temp_c}"),),
        Severity.WARNING, Action.WATCH,
        Injects("gpu", sets=(_HOT,), detail=(Between("temp_c", 90, 96),)), ("max_gpu_temp_c",),
        group_by="rack", filters=_THERMAL, explained_by=_THERMAL_KINDS, weather=4,
        alertnames=("dcgm_fi_dev_gpu_temp", "gpuhightemperature", "gputemperaturehigh"),
    ),
    Check(
        FaultKind.NVLINK_CRC, "NVLink CRC errors", "NVLink CRC errors",
        (Threshold(m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, INC,
                   lambda v, c: v > c.nvlink_crc_per_window,
                   lambda v, c: f"{count(round(v), 'NVLink CRC flit error')} in the window"),),
        Severity.WARNING, Action.DRAIN,
        Injects("gpu", 0.06, (Sets(m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, "counter", "per_min"),
                              _NVLINK_SHARE), _NVLINK_WATCH, detail=_NVLINK_DETAIL),
        ("nvlink_crc_per_window",), filters=("nvlink",), straggler_rank=10, weather=5,
        alertnames=("dcgm_fi_dev_nvlink_crc_flit_error_count_total", "gpunvlinkcrcerrors"),
    ),
    Check(
        FaultKind.NVLINK_REPLAY, "NVLink replay errors", "NVLink replays",
        (Threshold(m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, INC,
                   lambda v, c: v > c.nvlink_replay_per_window,
                   lambda v, c: f"{count(round(v), 'NVLink replay')} in the window"),),
        Severity.WARNING, Action.DRAIN,
        Injects("gpu", 0.06, (Sets(m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, "counter", "per_min"),
                              _NVLINK_SHARE), _NVLINK_WATCH, detail=_NVLINK_DETAIL),
        ("nvlink_replay_per_window",), filters=("nvlink",), straggler_rank=11,
        alertnames=("nvlinkreplayerrors",),
    ),
    Check(
        FaultKind.PCIE_REPLAY, "PCIe replays", "PCIe replays",
        (Threshold(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, INC, lambda v, c: v > c.pcie_replay_per_window,
                   lambda v, c: f"{count(round(v), 'PCIe replay')} in the window"),),
        Severity.WARNING, Action.WATCH,
        Injects("gpu", 0.06, (Sets(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, "counter", "per_min"),),
                ("PCIE", m.HEALTH_WARN, "DCGM_FR_PCI_REPLAY_RATE"), detail=(_REPLAYS_PER_MIN,)),
        ("pcie_replay_per_window",), filters=("pcie",), straggler_rank=12, weather=8,
        alertnames=("dcgm_fi_dev_pcie_replay_counter", "gpupciereplays"),
    ),
    Check(
        FaultKind.PCIE_DOWNTRAINED, "PCIe link width and generation", "PCIe link below its speed",
        (Threshold(m.DCGM_FI_DEV_PCIE_LINK_WIDTH, V, lambda v, c: 0 < v < c.expected_pcie_width,
                   lambda v, c: f"PCIe link trained at x{v:.0f}, expected x{c.expected_pcie_width}",
                   ceiling=lambda c: float(c.expected_pcie_width), keep="< {expected_pcie_width}"),
         Threshold(m.DCGM_FI_DEV_PCIE_LINK_GEN, V, lambda v, c: 0 < v < c.expected_pcie_gen,
                   lambda v, c: f"PCIe link at gen {v:.0f}, expected gen {c.expected_pcie_gen}",
                   ceiling=lambda c: float(c.expected_pcie_gen), keep="< {expected_pcie_gen}")),
        Severity.WARNING, Action.DRAIN,
        Injects("gpu", 0.08, (Sets(m.DCGM_FI_DEV_PCIE_LINK_WIDTH, "if_given", "width"),
                              Sets(m.DCGM_FI_DEV_PCIE_LINK_GEN, "if_given", "gen")),
                detail=(Either((OneOf("width", (8, 4)),), (OneOf("gen", (4, 3)),)),)),
        ("expected_pcie_width", "expected_pcie_gen"), filters=("pcie",), straggler_rank=9,
    ),
    Check(
        FaultKind.IB_LINK_DOWN, "InfiniBand port state", "InfiniBand link down",
        Custom((MetricRequest(m.NODE_INFINIBAND_STATE_ID, V, "!= 4"),), _ib_link_down),
        Severity.CRITICAL, Action.DRAIN,
        # The received-bytes counter stops: the engine does that, knowing the baseline.
        Injects("nic", sets=(Sets(m.NODE_INFINIBAND_STATE_ID, "const", float(m.IB_STATE_DOWN)),
                             Sets(m.NODE_INFINIBAND_PHYSICAL_STATE_ID, "const",
                                  float(m.IB_PHYSICAL_STATE_POLLING)),
                             Sets(m.NODE_INFINIBAND_LINK_DOWNED_TOTAL, "bump", 1.0)),
                detail=(_PORT, Fixed("rx_loss", 1.0))),
        group_by="leaf_switch", filters=_IB, explained_by=frozenset({FaultKind.IB_FLAPPING}),
        straggler_rank=14, weather=6, alertnames=("infinibandlinkdown", "nodeinfinibandportdown"),
    ),
    Check(
        FaultKind.IB_FLAPPING, "InfiniBand flapping", "InfiniBand link flapping",
        (Threshold(m.NODE_INFINIBAND_LINK_DOWNED_TOTAL, INC, lambda v, c: v >= c.ib_flaps_per_window,
                   lambda v, c: f"InfiniBand link went down {count(round(v), 'time')} in the window",
                   per_gpu=False),),
        Severity.WARNING, Action.DRAIN,
        Injects("nic", 0.06, (Sets(m.NODE_INFINIBAND_LINK_DOWNED_TOTAL, "flap_count"),
                              Sets(m.NODE_INFINIBAND_STATE_ID, "flap_state", float(m.IB_STATE_DOWN)),
                              Sets(m.NODE_INFINIBAND_PHYSICAL_STATE_ID, "flap_state",
                                   float(m.IB_PHYSICAL_STATE_POLLING))),
                # Down a minute each time, then retraining: half the port's traffic is lost.
                detail=(_PORT, Fixed("rx_loss", 0.5), OneOf("period_s", (300, 600, 900)))),
        ("ib_flaps_per_window",), "leaf_switch", _IB, straggler_rank=13,
        alertnames=("infinibandlinkflapping",),
    ),
    Check(
        FaultKind.IB_SYMBOL_ERRORS, "InfiniBand symbol errors", "InfiniBand symbol errors",
        (Threshold(m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL, INC, lambda v, c: v > c.ib_symbol_errors_per_window,
                   lambda v, c: f"{count(round(v), 'InfiniBand symbol error')} in the window: check the cable",
                   per_gpu=False),),
        Severity.WARNING, Action.WATCH,
        Injects("nic", 0.06, (Sets(m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL, "counter", "per_min"),),
                detail=(_PORT, Fixed("rx_loss", 0.4), Between("per_min", 50.0, 500.0, 1))),
        ("ib_symbol_errors_per_window",), "leaf_switch", _IB, straggler_rank=15,
    ),
    Check(
        FaultKind.NIC_ERRORS, "NIC receive and transmit errors", "network card errors",
        (Threshold(m.NODE_NETWORK_RECEIVE_ERRS_TOTAL, INC, lambda v, c: v > c.nic_errors_per_window,
                   lambda v, c: f"{count(round(v), 'NIC receive error')} in the window", per_gpu=False),
         Threshold(m.NODE_NETWORK_TRANSMIT_ERRS_TOTAL, INC, lambda v, c: v > c.nic_errors_per_window,
                   lambda v, c: f"{count(round(v), 'NIC transmit error')} in the window", per_gpu=False)),
        Severity.WARNING, Action.WATCH,
        Injects("netdev", 0.06, (Sets(m.NODE_NETWORK_RECEIVE_ERRS_TOTAL, "counter", "per_min"),
                                 Sets(m.NODE_NETWORK_TRANSMIT_ERRS_TOTAL, "counter", "per_min", 0.25)),
                detail=(Device("device", "netdevs"), Between("per_min", 20.0, 200.0, 1))),
        ("nic_errors_per_window",), "leaf_switch", ("network", "nic"), straggler_rank=16,
        alertnames=("nodenetworkreceiveerrs", "nodenetworktransmiterrs", "nodenetworkinterfaceflapping"),
    ),
    Check(
        FaultKind.UNEXPECTED_REBOOT, "unexpected reboot", "unexpected reboot",
        (Threshold(m.NODE_BOOT_TIME_SECONDS, CHG, lambda v, c: v > 0,
                   lambda v, c: "the node rebooted in the window (boot time moved)", per_gpu=False),),
        Severity.WARNING, Action.WATCH,
        Injects("node", sets=(Sets(m.NODE_BOOT_TIME_SECONDS, "since"),)), filters=("reboot",),
        alertnames=("noderebooted", "nodeunexpectedreboot"),
    ),
    Check(
        FaultKind.GPU_MISSING, "GPUs visible against the expected count", "GPU missing",
        Custom((GPU_COUNT_REQUEST,), _gpu_count), Severity.CRITICAL, Action.DRAIN,
        Injects("gpu"), ("expected_gpus",), filters=("missing",), straggler_rank=17, weather=7,
        alertnames=("gpumissing", "gpucountmismatch"),
    ),
    Check(
        FaultKind.DCGM_HEALTH, "DCGM's own health watches", "DCGM health watch failing",
        Custom((MetricRequest(m.DCGM_EXP_GPU_HEALTH_STATUS, V, "> 0"),), _dcgm_health),
        # A watch's fault shows only where the newer exporter runs: never drawn at random.
        Severity.CRITICAL, Action.DRAIN,
        Injects("gpu", at_random=False,
                detail=(Fixed("watch", "INFOROM"), Fixed("code", "DCGM_FR_CORRUPT_INFOROM"),
                        Fixed("result", m.HEALTH_FAIL))),
        filters=("health", "dcgm"),
    ),
    _drift_check(
        FaultKind.DRIVER_DRIFT,
        Version("driver", "driver", m.DCGM_FI_DEV_GPU_TEMP, m.LABEL_DRIVER_VERSION),
        ("535.161.08", "550.90.07", "545.23.08"), ("drift", "driver"),
    ),
    _drift_check(
        FaultKind.KERNEL_DRIFT, Version("kernel", "kernel", m.NODE_UNAME_INFO, m.LABEL_RELEASE),
        ("5.15.0-91-generic", "5.15.0-112-generic", "6.8.0-40-generic"), ("drift", "kernel"),
    ),
    _drift_check(
        FaultKind.FIRMWARE_DRIFT,
        Version("firmware", "firmware (VBIOS)", m.DCGM_FI_DEV_GPU_TEMP, m.LABEL_VBIOS_VERSION),
        ("96.00.74.00.0B", "96.00.99.00.01", "96.00.61.00.05"), ("drift", "firmware"),
    ),
)  # fmt: skip

CHECKS_BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}
CHECK_OF: dict[FaultKind, Check] = {c.kind: c for c in CHECKS}
assert len(CHECK_OF) == len(CHECKS), "one entry a kind"
assert all(f in HealthConfig.model_fields for c in CHECKS for f in c.reads), "reads a field"
assert all(k in CHECK_OF for ks in OLD_NAMES.values() for k in ks), "old names name checks"


def _ranked(rank: Callable[[Check], int]) -> tuple[Check, ...]:
    ranked = sorted((c for c in CHECKS if rank(c)), key=rank)
    assert len({rank(c) for c in ranked}) == len(ranked), "one entry a place"
    return tuple(ranked)


# The entries' properties as the lists their readers take: nothing else lists kinds by hand.
STRAGGLER_KINDS: tuple[FaultKind, ...] = tuple(c.kind for c in _ranked(lambda c: c.straggler_rank))
"""The health findings that name a straggler's cause, most specific first."""
WEATHER_KINDS: tuple[str, ...] = tuple(c.name for c in _ranked(lambda c: c.weather))
"""The faults that come and go on their own in an interactive shell, in draw order."""
ALERTNAMES: dict[str, FaultKind] = {n: c.kind for c in CHECKS for n in c.alertnames}
"""The usual DCGM and node_exporter alert names (lower case), by the kind they report."""
assert len(ALERTNAMES) == sum(len(c.alertnames) for c in CHECKS), "an alert name reports one kind"
assert all(n == n.lower() for n in ALERTNAMES), "alert names are matched in lower case"
VERSIONS: dict[FaultKind, Version] = {c.kind: c.version for c in CHECKS if c.version is not None}
"""The drift kinds, each with the version it compares."""
DRIFT_OF: dict[str, FaultKind] = {v.component: k for k, v in VERSIONS.items()}
"""The drift kind of each component of a node's versions (`driver`, `kernel`, `firmware`)."""
assert set(VERSIONS) == VERSION_DRIFT_KINDS, "bot/models.py: VERSION_DRIFT_KINDS"
CLOCK_HELD_KINDS: frozenset[FaultKind] = frozenset(
    c.kind for c in CHECKS if CLOCK_HELD in c.injects.sets
)
"""The kinds whose simulated fault holds the SM clock down (to match a given slowdown)."""


def enabled_checks(cfg: HealthConfig) -> list[Check]:
    return [c for c in CHECKS if c.name not in cfg.disabled]


def requests_for(checks: Sequence[Check], cfg: HealthConfig | None = None) -> list[MetricRequest]:
    """Each metric once, whichever checks need it: the whole read is this many queries."""
    values = (cfg or HealthConfig()).model_dump()
    out: dict[str, MetricRequest] = {}
    for check in checks:
        for r in check.needs:
            request = replace(
                r, keep=r.keep.format(**values), fewer_per_node=r.fewer_per_node.format(**values)
            )
            if out.setdefault(request.key, request) != request:
                # One column per key: two checks may share it only if they read it alike.
                raise ValueError(
                    f"{request.key} is requested two ways: {out[request.key]} and {request}"
                )
    return list(out.values())


@dataclass(frozen=True)
class HealthRun:
    at: datetime
    faults: list[Fault]
    # Check name -> the metrics it could not read, so the answer can say what was not checked.
    not_run: dict[str, list[str]]


def run_checks(table: Table, cfg: HealthConfig, checks: Sequence[Check] | None = None) -> HealthRun:
    faults: list[Fault] = []
    not_run: dict[str, list[str]] = {}
    chosen = list(checks if checks is not None else enabled_checks(cfg))
    ran: set[int] = set()
    for check in chosen:
        give_way()  # between checks, the acks of a burst go first (bot/give_way.py)
        # Entries that share a reading (the clock-event kinds) run it once, where the first
        # of them stands, and each keeps its kind's faults.
        sharing = [check]
        if isinstance(check.finds, Custom):
            if id(check.finds) in ran:
                continue
            ran.add(id(check.finds))
            sharing = [c for c in chosen if c.finds is check.finds]
            found = check.finds.run(table, cfg)
            wanted = {c.kind for c in sharing}
            found = Findings(
                [f for f in found.faults if f.kind in wanted], found.missing, found.unable
            )
        else:
            found = check.run(table, cfg)
        # Checks say "in the window"; the answer names it, so that counts read over
        # different windows (/node-health's hour, /hw-faults' day) are not taken for a
        # contradiction.
        faults.extend(
            f.model_copy(update={"summary": named(f.summary, table.window_s)})
            if IN_THE_WINDOW in f.summary
            else f
            for f in found.faults
        )
        for c in sharing:
            if found.stops(c.kind) and not any(f.kind == c.kind for f in found.faults):
                not_run[c.name] = found.missing
    return HealthRun(at=table.at, faults=faults, not_run=not_run)
