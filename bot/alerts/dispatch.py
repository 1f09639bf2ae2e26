"""Dispatch: which group an alert belongs to, and what joining it changes.

Like Alertmanager's dispatcher, alerts are grouped by cause and shared topology: one broken
leaf switch is one group (one Slack message), not 32. Pure: topology comes in as a function.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum

from bot.alerts.config import AlertsConfig
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Scope
from bot.ports import Located
from bot.triage.checks import CHECKS

# A check's alerts group by what its entry says (bot/triage/checks.py `group_by`): an IB
# or NIC fault by leaf switch, a thermal or power one by rack, the rest by node.
LEAF_SWITCH_CAUSES = frozenset(c.name for c in CHECKS if c.group_by == "leaf_switch")
RACK_CAUSES = frozenset(c.name for c in CHECKS if c.group_by == "rack")


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
    """The topology a cause groups by: configured first, then the defaults."""
    if cause in cfg.group_scope:
        return cfg.group_scope[cause]
    if cause in LEAF_SWITCH_CAUSES:
        return Scope.LEAF_SWITCH
    if cause in RACK_CAUSES:
        return Scope.RACK
    return Scope.NODE


def group_key(
    alert: Alert, topology: Callable[[str], Located | None], cfg: AlertsConfig
) -> GroupKey:
    """The group `alert` belongs to.

    Alertmanager alerts may say their topology in labels (`leaf_switch`, `rack`, `job_id`);
    those win over the inventory, and unless the cause's scope is configured a `job_id` label
    groups by job, and a `leaf_switch` or `rack` label groups a per-node cause by that place.
    When the wanted topology is unknown the alert groups by its node, and an alert
    with no node at all groups cluster-wide (`Scope.NONE`).
    """
    labels = alert.labels if alert.source is AlertSource.ALERTMANAGER else {}
    scope = scope_for(alert.cause, cfg)
    if alert.cause not in cfg.group_scope:
        # Labels that name a shared place say how the rule's author wants it grouped.
        if labels.get("job_id"):
            scope = Scope.JOB
        elif scope is Scope.NODE and labels.get("leaf_switch"):
            scope = Scope.LEAF_SWITCH
        elif scope is Scope.NODE and labels.get("rack"):
            scope = Scope.RACK
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
