"""Passive health checks, in the style of LBNL Node Health Check: small, named, composable.

Each check reads a few metric columns of a `Table` and returns the `Fault`s it finds, each with
its evidence, severity and action, or says which of its metrics were absent: a node is never
called healthy on data that was not there. No I/O: the same checks run on Prometheus, the
simulated fleet and plain test data. Only flagged rows are looked at in detail, so a fleet of
400,000 GPUs costs one pass over each column.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from bot import metric_names as m
from bot.models import Action, Evidence, Fault, FaultKind, Severity
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


class HealthConfig(BaseModel):
    """Thresholds and switches; the defaults suit an H100 fleet. YAML key: `health`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


@dataclass(frozen=True)
class Findings:
    """What one check found: faults, and metrics it needed but did not get."""

    faults: list[Fault] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


CheckFn = Callable[[Table, HealthConfig], Findings]


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    needs: tuple[MetricRequest, ...]
    run: CheckFn
    # The fault kinds it can find: a check that could not run says nothing about them, so the
    # alert sweep must not resolve their alerts on its silence.
    kinds: tuple[FaultKind, ...] = ()


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


def _above(values: Sequence[float], limit: float) -> list[int]:
    return [i for i, v in enumerate(values) if v > limit]  # NaN compares false: skipped


def _threshold_check(
    name: str,
    kind: FaultKind,
    metric: str,
    reading: Reading,
    test: Callable[[float, HealthConfig], bool],
    severity: Severity,
    action: Action,
    summary: Callable[[float, HealthConfig], str],
    description: str,
    *,
    per_gpu: bool = True,
    floor: Callable[[HealthConfig], float] | None = lambda c: 0.0,
    ceiling: Callable[[HealthConfig], float] | None = None,
    keep: str = "> 0",
) -> Check:
    def run(table: Table, cfg: HealthConfig) -> Findings:
        col = table.get(metric)
        if col is None:
            return Findings(missing=[metric])
        # Prefilter with a plain comparison (fast over 400,000 rows), then apply the exact
        # test to the few rows left.
        candidates: Iterable[int]
        if ceiling is not None:
            limit = ceiling(cfg)
            candidates = [i for i, v in enumerate(col.values) if 0 < v < limit]
        elif floor is not None:
            candidates = _above(col.values, floor(cfg))
        else:
            candidates = range(len(col))
        faults = [
            _fault(
                table, col, i, kind, severity, action, summary(col.values[i], cfg), per_gpu=per_gpu
            )
            for i in candidates
            if col.values[i] == col.values[i] and test(col.values[i], cfg)
        ]
        return Findings(faults=faults)

    return Check(name, description, (MetricRequest(metric, reading, keep),), run, (kind,))


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
                    _fault(table, totals, i, FaultKind.XID, Severity.INFO, Action.NONE, summary,
                           note="no Xid of this code in the window")
                )  # fmt: skip
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
    (m.DCGM_FI_DEV_POWER_VIOLATION, m.CLOCK_EVENT_SW_POWER_CAP, FaultKind.THROTTLE_POWER,
     "at the power cap"),
    (m.DCGM_FI_DEV_THERMAL_VIOLATION, m.CLOCK_EVENT_SW_THERMAL, FaultKind.THROTTLE_SW_THERMAL,
     "in thermal slowdown"),
)  # fmt: skip
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
                _fault(table, grown, i, kind, severity, action, summary,
                       note=f"{grown.values[i] / 1e9:.0f} s held back in the window")
            )  # fmt: skip
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
    return Findings(faults=faults)


# DCGM's power and thermal watches warn on any violation time at all (DCGM issue #285), which
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
        starts = [*col.node_rows, len(values)]
        for start, end in itertools.pairwise(starts):
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
_IB_STATES = {0: "in no known state", 1: "down", 2: "initializing (no subnet manager yet)",
              3: "armed", 5: "active, deferred"}  # fmt: skip


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
                table, col, i, FaultKind.IB_LINK_DOWN, Severity.CRITICAL, Action.DRAIN,
                f"InfiniBand port {port} is {_ib_state(col.values[i])}, not active", per_gpu=False,
            )
        )  # fmt: skip
    return Findings(faults=faults)


def _drifted(versions: Mapping[str, int], majority: str) -> tuple[str, int]:
    """A node's first version that is not the majority's, with its row; ("", -1) if none."""
    return next(((v, i) for v, i in versions.items() if v != majority), ("", -1))


def _drift(kind: FaultKind, what: str, metric: str, label: str) -> Check:
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
            value = col.label(i, label)
            if value:
                versions[col.node(i)].setdefault(value, i)
        fleet = table.fleet_versions.get(label)
        if not versions and not fleet:
            # dcgm-exporter attaches the VBIOS version only where configured: a label nobody
            # carries is a check not run, never a fleet without drift.
            return Findings(missing=[f"{metric}{{{label}}}"])
        counts = Counter(fleet) if fleet else Counter(v for vs in versions.values() for v in vs)
        total = sum(counts.values())
        if total < cfg.drift_min_nodes or not counts:
            return Findings()
        majority, votes = counts.most_common(1)[0]
        if votes * 2 <= total:
            return Findings()  # no majority: a rolling upgrade, not drift
        faults = [
            _fault(
                table, col, i, kind, Severity.WARNING, Action.WATCH,
                f"{what} {version} differs from the fleet's {majority}", per_gpu=False,
                note=f"fleet majority {majority} on {votes} of {total} nodes",
            )
            for version, i in (_drifted(vs, majority) for vs in versions.values())
            if version
        ]  # fmt: skip
        return Findings(faults=faults)

    return Check(kind.value, f"{what} differs from the fleet majority", (request,), run, (kind,))


CHECKS: tuple[Check, ...] = (
    Check(
        "xid", "GPU Xid errors, by NVIDIA's catalog",
        (MetricRequest(m.DCGM_FI_DEV_XID_ERRORS, V, "> 0"), MetricRequest(m.DCGM_EXP_XID_ERRORS_COUNT, INC, "> 0"),
         XID_TOTAL_REQUEST),
        _xid, (FaultKind.XID,),
    ),
    _threshold_check(
        "ecc_dbe", FaultKind.ECC_DBE, m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, V, lambda v, c: v > 0,
        Severity.CRITICAL, Action.DRAIN, lambda v, c: f"{count(v, 'double-bit ECC error')}: reset the GPU",
        "double-bit (uncorrectable) ECC errors",
    ),
    _threshold_check(
        "row_remap_failure", FaultKind.ROW_REMAP_FAILURE, m.DCGM_FI_DEV_ROW_REMAP_FAILURE, V,
        lambda v, c: v > 0, Severity.CRITICAL, Action.RMA,
        lambda v, c: "row remapping failed: the GPU's memory is out of spare rows (RMA)",
        "row-remap failure",
    ),
    _threshold_check(
        "row_remap_pending", FaultKind.ROW_REMAP_PENDING, m.DCGM_FI_DEV_ROW_REMAP_PENDING, V,
        lambda v, c: v > 0, Severity.WARNING, Action.RESET_GPU,
        lambda v, c: "a row remap is pending: reset the GPU when it is idle", "pending row remaps",
    ),
    Check(
        "throttle", "clock-event (throttle) reasons",
        # Above 1: bit 0x1 alone is an idle GPU.
        (MetricRequest(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, V, "> 1"), MetricRequest(m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, V, "> 1"),
         *VIOLATION_REQUESTS, *VIOLATION_NODES, CLOCK_EVENTS_REQUEST),
        _throttle,
        (FaultKind.THROTTLE_POWER, FaultKind.THROTTLE_HW_SLOWDOWN, FaultKind.THROTTLE_SW_THERMAL,
         FaultKind.THROTTLE_HW_THERMAL, FaultKind.POWER_BRAKE),
    ),
    _threshold_check(
        "temperature", FaultKind.HIGH_TEMPERATURE, m.DCGM_FI_DEV_GPU_TEMP, V,
        lambda v, c: v > c.max_gpu_temp_c, Severity.WARNING, Action.WATCH,
        lambda v, c: f"GPU at {v:.0f} °C (limit {c.max_gpu_temp_c:.0f} °C): check cooling",
        "GPU temperature", keep="> {max_gpu_temp_c}",
    ),
    _threshold_check(
        "nvlink_crc", FaultKind.NVLINK_CRC, m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, INC,
        lambda v, c: v > c.nvlink_crc_per_window, Severity.WARNING, Action.DRAIN,
        lambda v, c: f"{count(round(v), 'NVLink CRC flit error')} in the window", "NVLink CRC errors",
    ),
    _threshold_check(
        "nvlink_replay", FaultKind.NVLINK_REPLAY, m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, INC,
        lambda v, c: v > c.nvlink_replay_per_window, Severity.WARNING, Action.DRAIN,
        lambda v, c: f"{count(round(v), 'NVLink replay')} in the window", "NVLink replay errors",
    ),
    _threshold_check(
        "pcie_replay", FaultKind.PCIE_REPLAY, m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, INC,
        lambda v, c: v > c.pcie_replay_per_window, Severity.WARNING, Action.WATCH,
        lambda v, c: f"{count(round(v), 'PCIe replay')} in the window", "PCIe replays",
    ),
    _threshold_check(
        "pcie_width", FaultKind.PCIE_DOWNTRAINED, m.DCGM_FI_DEV_PCIE_LINK_WIDTH, V,
        lambda v, c: 0 < v < c.expected_pcie_width, Severity.WARNING, Action.DRAIN,
        lambda v, c: f"PCIe link trained at x{v:.0f}, expected x{c.expected_pcie_width}",
        "PCIe link width", ceiling=lambda c: float(c.expected_pcie_width),
        keep="< {expected_pcie_width}",
    ),
    _threshold_check(
        "pcie_gen", FaultKind.PCIE_DOWNTRAINED, m.DCGM_FI_DEV_PCIE_LINK_GEN, V,
        lambda v, c: 0 < v < c.expected_pcie_gen, Severity.WARNING, Action.DRAIN,
        lambda v, c: f"PCIe link at gen {v:.0f}, expected gen {c.expected_pcie_gen}",
        "PCIe link generation", ceiling=lambda c: float(c.expected_pcie_gen),
        keep="< {expected_pcie_gen}",
    ),
    Check("ib_link", "InfiniBand port state", (MetricRequest(m.NODE_INFINIBAND_STATE_ID, V, "!= 4"),), _ib_link_down, (FaultKind.IB_LINK_DOWN,)),
    _threshold_check(
        "ib_flapping", FaultKind.IB_FLAPPING, m.NODE_INFINIBAND_LINK_DOWNED_TOTAL, INC,
        lambda v, c: v >= c.ib_flaps_per_window, Severity.WARNING, Action.DRAIN,
        lambda v, c: f"InfiniBand link went down {count(round(v), 'time')} in the window", "InfiniBand flapping",
        per_gpu=False,
    ),
    _threshold_check(
        "ib_symbol_errors", FaultKind.IB_SYMBOL_ERRORS, m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL, INC,
        lambda v, c: v > c.ib_symbol_errors_per_window, Severity.WARNING, Action.WATCH,
        lambda v, c: f"{count(round(v), 'InfiniBand symbol error')} in the window: check the cable",
        "InfiniBand symbol errors", per_gpu=False,
    ),
    _threshold_check(
        "nic_rx_errors", FaultKind.NIC_ERRORS, m.NODE_NETWORK_RECEIVE_ERRS_TOTAL, INC,
        lambda v, c: v > c.nic_errors_per_window, Severity.WARNING, Action.WATCH,
        lambda v, c: f"{count(round(v), 'NIC receive error')} in the window", "NIC receive errors", per_gpu=False,
    ),
    _threshold_check(
        "nic_tx_errors", FaultKind.NIC_ERRORS, m.NODE_NETWORK_TRANSMIT_ERRS_TOTAL, INC,
        lambda v, c: v > c.nic_errors_per_window, Severity.WARNING, Action.WATCH,
        lambda v, c: f"{count(round(v), 'NIC transmit error')} in the window", "NIC transmit errors", per_gpu=False,
    ),
    _threshold_check(
        "reboot", FaultKind.UNEXPECTED_REBOOT, m.NODE_BOOT_TIME_SECONDS, CHG,
        lambda v, c: v > 0, Severity.WARNING, Action.WATCH,
        lambda v, c: "the node rebooted in the window (boot time moved)", "unexpected reboot",
        per_gpu=False,
    ),
    Check("gpu_count", "GPUs visible against the expected count", (GPU_COUNT_REQUEST,), _gpu_count, (FaultKind.GPU_MISSING,)),
    Check(
        "dcgm_health", "DCGM's own health watches",
        (MetricRequest(m.DCGM_EXP_GPU_HEALTH_STATUS, V, "> 0"),), _dcgm_health, (FaultKind.DCGM_HEALTH,),
    ),
    _drift(FaultKind.DRIVER_DRIFT, "driver", m.DCGM_FI_DEV_GPU_TEMP, m.LABEL_DRIVER_VERSION),
    _drift(FaultKind.KERNEL_DRIFT, "kernel", m.NODE_UNAME_INFO, "release"),
    _drift(FaultKind.FIRMWARE_DRIFT, "firmware (VBIOS)", m.DCGM_FI_DEV_GPU_TEMP, m.LABEL_VBIOS_VERSION),
)  # fmt: skip

CHECKS_BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}


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
    for check in checks if checks is not None else enabled_checks(cfg):
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
        if found.missing and not found.faults:
            not_run[check.name] = found.missing
    return HealthRun(at=table.at, faults=faults, not_run=not_run)
