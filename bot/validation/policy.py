"""When meowbot tests a node without being asked (`validation.on_repair`): a node it drained
for a fault, once the node has booted since the drain (a repair reboots it). Pure."""

from __future__ import annotations

from bot import drain_reason
from bot.ports import SchedulerNode

NOT_AFTER = ("validation cancelled",)
"""meowbot's own reasons that are a person's choice, not a fault: never tested unasked."""


def watched(node: SchedulerNode) -> bool:
    """Out of service for meowbot's drain of a fault: a node an operator drained is tested
    only when asked, and so is one whose test a person cancelled."""
    if not node.out_of_service or not node.reason_is_ours or node.reason is None:
        return False
    return not any(word in node.reason for word in NOT_AFTER)


def repaired(node: SchedulerNode, first_boot: str | None) -> bool:
    """A watched node that booted after its drain, or is in another boot than the one meowbot
    first saw it drained in (`boot_mark`: Slurm restamps a reason's time when the node
    registers after a reboot; Kubernetes gives a boot id, no time). A failed test drains it
    anew, so it is tested again only after another boot."""
    mark = node.boot_mark
    if not watched(node) or mark is None:
        return False
    booted, drained = node.booted_at, node.reason_changed_at
    if booted is not None and drained is not None and booted > drained:
        return True
    return first_boot is not None and mark != first_boot


def why(node: SchedulerNode) -> str:
    """`meowbot (gpu-0042 booted at 2026-12-07 02:14 UTC, after its drain)`: who asked."""
    booted = f" at {node.booted_at:%Y-%m-%d %H:%M} UTC" if node.booted_at else " again"
    return f"meowbot ({node.name} booted{booted}, after its drain for {_cause(node)})"


def _cause(node: SchedulerNode) -> str:
    return (node.reason or "").removeprefix(drain_reason.PREFIX).strip() or "a fault"
