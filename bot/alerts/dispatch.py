"""Dispatch: which group an alert belongs to, and what joining it changes.

Alerts are grouped by cause: one cause firing on many nodes at once (a power feed, a rack, a
driver push) is one event, one Slack message, not one per node. Pure: topology comes in as a
function.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum

from bot.alerts.causes import lookup
from bot.alerts.config import AlertsConfig
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Scope
from bot.ports import Located


class Change(StrEnum):
    NEW_GROUP = "new_group"
    JOINED = "joined"
    REPEAT = "repeat"
    """The same fingerprint with the same status again: deduplicated, nothing to store."""
    RESOLVED_MEMBER = "resolved_member"
    GROUP_RESOLVED = "group_resolved"
    REOPENED = "reopened"
    REFIRED = "refired"
    """A member that had resolved fires again while its group is open: a line in the thread."""
    IGNORED = "ignored"
    """A resolved alert for a fingerprint the group does not hold: nothing to store or post."""


def scope_for(cause: str, cfg: AlertsConfig) -> Scope:
    """The topology a cause groups by: configured (`alerts.group_scope`, for the cause or its
    fault kind: `xid` covers `xid_79`), else one event of the cause across every node it fires
    on."""
    return lookup(cause, cfg.group_scope) or Scope.EVENT


def group_key(
    alert: Alert, topology: Callable[[str], Located | None], cfg: AlertsConfig
) -> GroupKey:
    """The group `alert` belongs to.

    By default every alert of one cause is one event, whichever nodes it fires on and however
    its source spelled the cause (bot/alerts/causes.py): forty nodes losing a GPU in a minute
    are one message, not forty. An Alertmanager grouping by more than the cause (a `cluster`
    label, say) is respected: its `event` keeps it apart. A cause configured in
    `alerts.group_scope` groups by that place instead (`leaf_switch`, `rack`, `job`, `node`;
    the labels of the same names win over the inventory); when the place is unknown the alert
    groups by its node, and an alert with no node at all cluster-wide (`Scope.NONE`).
    """
    scope = scope_for(alert.cause, cfg)
    if scope is Scope.EVENT:
        return GroupKey(cause=alert.cause, scope=Scope.EVENT, scope_value=alert.event)
    labels = alert.labels if alert.source is AlertSource.ALERTMANAGER else {}
    node = topology(alert.node) if alert.node else None
    value = ""
    if scope is Scope.LEAF_SWITCH:
        value = labels.get("leaf_switch") or (node.leaf_switch if node else "")
    elif scope is Scope.RACK:
        value = labels.get("rack") or (node.rack if node else "")
    elif scope is Scope.JOB:
        value = labels.get("job_id", "")
    if scope is not Scope.NONE and value:
        return GroupKey(cause=alert.cause, scope=scope, scope_value=value)
    if alert.node:
        return GroupKey(cause=alert.cause, scope=Scope.NODE, scope_value=alert.node)
    return GroupKey(cause=alert.cause, scope=Scope.NONE)


def _fallback_key(alert: Alert) -> GroupKey:
    if alert.node:
        return GroupKey(cause=alert.cause, scope=Scope.NODE, scope_value=alert.node)
    return GroupKey(cause=alert.cause, scope=Scope.NONE)


def merge(
    group: AlertGroup | None,
    alert: Alert,
    now: datetime,
    *,
    key: GroupKey | None = None,
) -> tuple[AlertGroup, Change]:
    """`group` with `alert` applied, and what that changed.

    Pass `key` (from `group_key`) when `group` is None, so that a new group gets its key; without
    it the alert's own node is the key. With `Change.REPEAT` or `Change.IGNORED` the returned
    group is the one given (or, for an unknown group, an empty one): store nothing.
    """
    if group is None:
        new_key = key or _fallback_key(alert)
        if alert.status is AlertStatus.RESOLVED:
            return AlertGroup(key=new_key, alerts=(), opened_at=now), Change.IGNORED
        return AlertGroup(key=new_key, alerts=(alert,), opened_at=now), Change.NEW_GROUP

    index = next(
        (i for i, a in enumerate(group.alerts) if a.fingerprint == alert.fingerprint), None
    )
    if index is None:
        if alert.status is AlertStatus.RESOLVED:
            return group, Change.IGNORED
        was_resolved = group.resolved
        joined = group.model_copy(update={"alerts": (*group.alerts, alert)})
        return joined, Change.REOPENED if was_resolved else Change.JOINED

    known = group.alerts[index]
    if known.status is alert.status:
        return group, Change.REPEAT
    members = (*group.alerts[:index], alert, *group.alerts[index + 1 :])
    updated = group.model_copy(update={"alerts": members})
    if alert.status is AlertStatus.RESOLVED:
        return updated, Change.GROUP_RESOLVED if updated.resolved else Change.RESOLVED_MEMBER
    return updated, Change.REOPENED if group.resolved else Change.REFIRED
