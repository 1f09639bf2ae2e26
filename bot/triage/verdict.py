"""From faults to a verdict per node: healthy, degraded (watch), drain, RMA; reasons in order."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from bot import drain_reason
from bot.models import Action, Fault, Severity, Verdict, VerdictLevel

_LEVEL_OF_ACTION = {
    Action.RMA: VerdictLevel.RMA,
    Action.DRAIN: VerdictLevel.DRAIN,
    Action.RESET_GPU: VerdictLevel.DRAIN,
    Action.REBOOT: VerdictLevel.DRAIN,
    Action.WATCH: VerdictLevel.DEGRADED,
    Action.REQUEUE: VerdictLevel.DEGRADED,
    Action.NONE: VerdictLevel.HEALTHY,
}


def level_of(severity: Severity, action: Action) -> VerdictLevel:
    """What one fault makes of its node: the only place that decides it. /node-health,
    /hw-faults, the sweep's alerts and App Home all ask this, so a fault kind cannot be a
    warning on one surface and a drain on another."""
    level = _LEVEL_OF_ACTION[action]
    # An application-level event (Xid 13, 31, 43: info) says nothing bad about the node.
    if severity is Severity.INFO and level is VerdictLevel.DEGRADED:
        return VerdictLevel.HEALTHY
    return level


def fault_level(fault: Fault) -> VerdictLevel:
    return level_of(fault.severity, fault.action)


def _order(fault: Fault) -> tuple[int, int]:
    return (-fault_level(fault).rank, -fault.severity.rank)


def _reason(fault: Fault) -> str:
    """The fault's summary, and a repeat offender's history where the summary lacks it."""
    if fault.repeat is None or fault.repeat in fault.summary:
        return fault.summary
    return f"{fault.summary}; repeat offender: {fault.repeat}"


def verdict(node: str, faults: Iterable[Fault]) -> Verdict:
    ordered = sorted((f for f in faults if f.node == node), key=_order)
    if not ordered:
        return Verdict(node=node, level=VerdictLevel.HEALTHY)
    level = max((fault_level(f) for f in ordered), key=lambda lv: lv.rank)
    reasons = tuple(dict.fromkeys(_reason(f) for f in ordered))
    worst = ordered[0]
    reason = drain_reason.for_fault(worst) if level.rank >= VerdictLevel.DRAIN.rank else None
    return Verdict(node=node, level=level, reasons=reasons, drain_reason=reason)


def verdicts(nodes: Iterable[str], faults: Iterable[Fault]) -> dict[str, Verdict]:
    by_node: dict[str, list[Fault]] = defaultdict(list)
    for fault in faults:
        by_node[fault.node].append(fault)
    return {n: verdict(n, by_node.get(n, ())) for n in nodes}
