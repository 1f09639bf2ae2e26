"""What a node read back from its scheduler after a drain or a resume means, in words: pure.

An action answers with what the scheduler says once it acted, not with what was asked of it:
"Resumed" only when nothing keeps the node out of service; otherwise each thing that remains
and whose it is (meowbot's drain, someone else's drain, cordon or taint, a node down or
NotReady). `changed` compares the node before and after, so an action that changed nothing
says so (and its caller records nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.ports import SchedulerNode

KUBERNETES = "Kubernetes"


@dataclass(frozen=True)
class Reading:
    """One scheduler's node after an action."""

    where: str  # the scheduler's name
    sentence: str  # this side's outcome, said after "<where>: " when there are several
    changed: bool  # the node differs from what was read before the action
    ok: bool  # the action's aim holds: back in service (resume), out by meowbot (drain)


def state_text(node: SchedulerNode) -> str:
    """The state as the scheduler shows it, `idle+DRAIN`."""
    return "+".join([node.state, *node.flags])


def _seen(node: SchedulerNode) -> tuple[object, ...]:
    return (
        node.state,
        node.flags,
        node.reason,
        node.others_cordon,
        node.others_taints,
    )


def settling(node: SchedulerNode, where: str) -> bool:
    """Slurm marks a node it just resumed not responding until its slurmd answers the ping
    that follows (half a second here): read again before saying so."""
    return where != KUBERNETES and not node.down and "NOT_RESPONDING" in node.flags


def differs(before: SchedulerNode | None, after: SchedulerNode | None) -> bool:
    if before is None or after is None:
        return (before is None) != (after is None)
    return _seen(before) != _seen(after)


def _ours(node: SchedulerNode, where: str) -> str | None:
    """meowbot's own hold on the node, if any."""
    if not node.reason_is_ours:
        return None
    if node.down and where != KUBERNETES:
        return f"set down by meowbot ({node.reason})"
    if node.draining:
        return f"drained by meowbot ({node.reason})"
    return None


def theirs(node: SchedulerNode, where: str) -> list[str]:
    """What else keeps the node out of service, each with whose it is."""
    out: list[str] = []
    if node.down and where == KUBERNETES:
        why = " (its kubelet stopped reporting)" if "NOT_RESPONDING" in node.flags else ""
        out.append(
            f"still NotReady{why}: Kubernetes schedules nothing there until its kubelet "
            "reports Ready"
        )
    elif node.down and not node.reason_is_ours:
        said = f" ({node.reason})" if node.reason and not node.reason_is_ours else ""
        out.append(f"still down{said}: {where} schedules nothing there")
    elif "NOT_RESPONDING" in node.flags:
        out.append(
            f"not responding: {where} schedules nothing there until the node's daemon answers"
        )
    if node.others_cordon:
        out.append("stays cordoned: cordoned by someone else, not meowbot")
    elif node.draining and not node.reason_is_ours and where != KUBERNETES:
        said = f" ({node.reason})" if node.reason else ""
        by = f"by {node.reason_set_by}" if node.reason_set_by else "by someone else"
        out.append(f"stays drained{said}: set {by}, not meowbot")
    if node.others_taints:
        out.append(
            f"stays tainted by someone else, not meowbot ({', '.join(node.others_taints)}): "
            "only pods that tolerate it go there"
        )
    return out


def remains(node: SchedulerNode, where: str) -> list[str]:
    """What keeps the node out of service, meowbot's own hold first; empty when in service."""
    ours = _ours(node, where)
    return [*([ours] if ours else []), *theirs(node, where)]


def after_resume(before: SchedulerNode, after: SchedulerNode | None, where: str) -> Reading:
    if after is None:
        return Reading(where, "no longer knows the node", True, False)
    changed = differs(before, after)
    left = remains(after, where)
    if not left:
        return Reading(where, "resumed" if changed else "already in service", changed, True)
    return Reading(where, "; ".join(left), changed, False)


def after_drain(
    before: SchedulerNode, after: SchedulerNode | None, where: str, *, now: bool
) -> Reading:
    if after is None:
        return Reading(where, "no longer knows the node", True, False)
    changed = differs(before, after)
    ours = after.out_of_service and after.reason_is_ours
    if not ours:
        left = remains(after, where) or ["in service"]
        head = f"asked to drain, but it reads {state_text(after)}"
        return Reading(where, f"{head}: {'; '.join(left)}", changed, False)
    if now and where == KUBERNETES:
        said = "cordoned"  # the evictions are not read back: the head or trouble says them
    elif now and after.down:
        said = "set down"
    elif after.state in {"idle", "down"}:
        said = "drained"
    else:
        said = "draining"
    extra = theirs(after, where)
    also = f"; {'; '.join(extra)}" if extra else ""
    return Reading(where, f"{said} ({state_text(after)}){also}", changed, True)


def resume_sentence(node: str, readings: Mapping[str, Reading], user: str) -> str:
    """One sentence over every scheduler's reading of a resume."""
    names = " and ".join(readings)
    ok = all(r.ok for r in readings.values())
    if ok and any(r.changed for r in readings.values()):
        return f"Resumed `{node}` in {names} (by @{user})."
    if ok:
        return f"`{node}` was already in service in {names}; nothing changed."
    if len(readings) == 1:
        (r,) = readings.values()
        head = "Changed what I could, but " if r.changed else "Nothing changed: "
        return f"{head}`{node}` is not back in service in {r.where}: {r.sentence}."

    def said(r: Reading) -> str:
        return r.sentence if r.ok or r.changed else f"nothing changed, {r.sentence}"

    each = "; ".join(f"{r.where}: {said(r)}" for r in readings.values())
    return f"`{node}` is not back in service (resume by @{user}). {each}."


def drain_sentence(
    node: str,
    readings: Mapping[str, Reading],
    reason: str,
    *,
    now: bool,
    owners: str = "",
    trouble: str = "",
) -> str:
    """One sentence over every scheduler's reading of a drain; `trouble` is what a scheduler
    said when it refused part of it (a pod a budget keeps, one scheduler of two)."""
    names = " and ".join(readings)
    each = "; ".join(f"{r.where}: {r.sentence}" for r in readings.values())
    if trouble:
        return f"I asked {names} to drain `{node}`: {trouble} Read back: {each}.{owners}"
    if all(r.ok for r in readings.values()):
        if now:
            head = (
                f"Took `{node}` out of {names} now with reason `{reason}`: its running jobs "
                "are stopped (and requeued where they allow it)."
            )
        else:
            head = (
                f"Draining `{node}` in {names} with reason `{reason}`: running jobs finish, "
                "no new ones start."
            )
        return f"{head} Read back: {each}.{owners}"
    return f"I asked {names} to drain `{node}`, but it is not out of service: {each}.{owners}"
