"""Kubernetes Nodes read and changed as meowbot's scheduler port sees them: pure, no I/O.

A Node's JSON (as the API server sends it) becomes a `SchedulerNode`: not Ready is `down`
(`NOT_RESPONDING` when the kubelet stopped reporting), cordoned (`spec.unschedulable`) or
carrying meowbot's taint is `DRAIN`. The reason is meowbot's own where it drained the node
(kept in the `meowbot.io/drain` annotation with who, when and whether meowbot cordoned), else
what an operator or another tool left: the taints that keep pods off the node, NVSentinel's or
the GPU Operator's included, said as `key=value:Effect`.

A drain is one JSON patch made of `test` on the resourceVersion read and the changes, so a
write that raced another (an operator's cordon, NVSentinel's taint) fails instead of
overwriting it, and is read and tried again by the adapter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.ports import SchedulerNode

KEY = "meowbot.io/drain"
"""meowbot's taint key and annotation key: a resume removes only what carries it."""

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
# Where a node sits: the first of these labels a node has (site labels can be configured).
RACK_LABELS = ("topology.kubernetes.io/rack", "meowbot.io/rack", "rack")
SWITCH_LABELS = ("network.topology.kubernetes.io/switch", "meowbot.io/leaf-switch", "leaf-switch")
_TAINT_VALUE_RE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class DrainMark:
    """What meowbot wrote on a node it drained (the `meowbot.io/drain` annotation)."""

    reason: str
    by: str
    at: datetime | None
    cordoned: bool  # meowbot set spec.unschedulable (so a resume may clear it)

    def to_json(self) -> str:
        return json.dumps(
            {
                "reason": self.reason,
                "by": self.by,
                "at": self.at.isoformat() if self.at else None,
                "cordoned": self.cordoned,
            },
            separators=(",", ":"),
        )


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def drain_mark(node: Mapping[str, Any]) -> DrainMark | None:
    """meowbot's annotation on the node, None when there is none (or it is not ours to read)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(KEY)
    if not isinstance(raw, str):
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("reason"), str):
        return None
    return DrainMark(
        reason=data["reason"],
        by=str(data.get("by") or ""),
        at=_parse_time(data.get("at")),
        cordoned=data.get("cordoned") is True,
    )


def taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = (node.get("spec") or {}).get("taints") or []
    return [dict(t) for t in found if isinstance(t, Mapping)]


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"


# Taints the control plane sets from conditions: they say what the conditions already say.
_CONDITION_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
    }
)


def _condition(node: Mapping[str, Any], kind: str) -> str | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def parse_node(node: Mapping[str, Any]) -> SchedulerNode:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    ready = _condition(node, "Ready")
    mark = drain_mark(node)
    own_taint = any(t.get("key") == KEY for t in taints(node))
    flags: list[str] = []
    if spec.get("unschedulable") is True or own_taint:
        flags.append("DRAIN")
    if ready == "Unknown":
        flags.append("NOT_RESPONDING")
    # Not Ready is down; without a Ready condition at all (a node no kubelet ever reported
    # for) the node is read as up: nothing says otherwise.
    state = "down" if ready in {"False", "Unknown"} else "idle"
    others = [
        _taint_text(t)
        for t in taints(node)
        if t.get("key") != KEY
        and t.get("key") not in _CONDITION_TAINTS
        and t.get("effect") in {"NoSchedule", "NoExecute"}
    ]
    reason: str | None
    set_by: str | None = None
    changed: datetime | None = None
    if mark is not None and "DRAIN" in flags:
        reason, set_by, changed = mark.reason, mark.by or None, mark.at
    elif others:
        reason = "taints: " + ", ".join(others)
    elif spec.get("unschedulable") is True:
        reason = "cordoned"
    else:
        reason = None
    if reason is not None and mark is not None and others and reason == mark.reason:
        # An operator's taint beside meowbot's drain is shown too: a resume leaves it.
        reason = f"{reason} (also taints: {', '.join(others)})"
        if len(reason) > 200:
            reason = reason[:199] + "…"
    return SchedulerNode(
        name=str(meta.get("name") or ""),
        state=state,
        flags=tuple(flags),
        reason=reason,
        reason_set_by=set_by,
        reason_changed_at=changed,
        others_cordon=spec.get("unschedulable") is True and not (mark and mark.cordoned),
        boot_id=str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "") or None,
        others_taints=tuple(others),
    )


def taint_value(reason: str) -> str:
    """The cause in a form a taint value takes (63 characters of [A-Za-z0-9._-])."""
    text = reason.removeprefix("meowbot:").strip().split(" by @")[0]
    value = _TAINT_VALUE_RE.sub("-", text).strip("-._")[:63].strip("-._")
    return value or "drained"


def by_whom(reason: str) -> str:
    """The person in `meowbot: xid79 gpu3 by @ana`, else meowbot itself (an alert's drain)."""
    _, sep, who = reason.rpartition(" by @")
    return who.strip() if sep and who.strip() else "meowbot"


def drain_patch(node: Mapping[str, Any], reason: str, now: datetime) -> list[dict[str, Any]] | None:
    """The JSON patch that drains `node` for `reason`, None when meowbot's drain is already
    there with the same reason. The operator's taints and cordon stay as they are."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    existing = drain_mark(node)
    has_taint = any(t.get("key") == KEY for t in taints(node))
    cordoned = spec.get("unschedulable") is True
    if existing is not None and existing.reason == reason and has_taint and cordoned:
        return None
    # Who cordoned is kept from the first drain: a second drain of a node meowbot cordoned
    # must not forget that the cordon is meowbot's.
    ours = existing.cordoned if existing is not None else not cordoned
    mark = DrainMark(reason=reason, by=by_whom(reason), at=now, cordoned=ours)
    kept = [t for t in taints(node) if t.get("key") != KEY]
    new_taints = [*kept, {"key": KEY, "value": taint_value(reason), "effect": "NoSchedule"}]
    patch: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
        {"op": "add", "path": "/spec/taints", "value": new_taints},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
    ]
    if not meta.get("annotations"):
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    patch.append({"op": "add", "path": _annotation_path(), "value": mark.to_json()})
    return patch


def resume_patch(node: Mapping[str, Any], *, force: bool = False) -> list[dict[str, Any]] | None:
    """The JSON patch that takes back what meowbot did (its taint, its annotation, and the
    cordon only where meowbot cordoned); None when there is nothing of meowbot's on it.
    `force` (a person confirmed "Resume anyway") uncordons whoever cordoned, as Slurm's resume
    clears an operator's drain; others' taints stay either way (the answer names them)."""
    meta = node.get("metadata") or {}
    mark = drain_mark(node)
    kept = [t for t in taints(node) if t.get("key") != KEY]
    had_taint = len(kept) != len(taints(node))
    cordoned = (node.get("spec") or {}).get("unschedulable") is True
    uncordon = cordoned and (force or (mark is not None and mark.cordoned))
    if mark is None and not had_taint and not uncordon:
        return None
    patch: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
    ]
    if had_taint:
        patch.append({"op": "add", "path": "/spec/taints", "value": kept})
    if mark is not None:
        patch.append({"op": "remove", "path": _annotation_path()})
    if uncordon:
        patch.append({"op": "add", "path": "/spec/unschedulable", "value": False})
    return patch


def _annotation_path() -> str:
    # JSON pointer: "/" in a key is written "~1".
    return "/metadata/annotations/" + KEY.replace("~", "~0").replace("/", "~1")


def label(node: Mapping[str, Any], names: Sequence[str]) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return next((str(labels[n]) for n in names if labels.get(n)), "")


def gpu_count(node: Mapping[str, Any]) -> int:
    """GPU Feature Discovery's count, else what the device plugin reports as capacity."""
    text = label(node, (COUNT_LABEL,)) or str(
        ((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE) or ""
    )
    return int(text) if text.isdigit() else 0
