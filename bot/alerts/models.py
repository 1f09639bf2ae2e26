"""The alert pipeline's models: what every stage (ingest, dispatch, route, notify, act) passes on.

An `Alert` is one firing or resolved condition, from meowbot's own passive sweep or from
Alertmanager, identified by a stable fingerprint. Alerts of one cause that share topology (a leaf
switch, a rack, a job, or just a node) form an `AlertGroup`: one Slack message, updated in place.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from bot.models import Action, Severity, UtcDatetime, _Frozen


class AlertSource(StrEnum):
    SWEEP = "sweep"
    ALERTMANAGER = "alertmanager"


class AlertStatus(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Scope(StrEnum):
    """The shared topology a group is keyed by, widest first."""

    LEAF_SWITCH = "leaf_switch"
    RACK = "rack"
    JOB = "job"
    NODE = "node"
    EVENT = "event"
    """One cause's correlated event: every node it fires on, whatever their topology (the
    default; the value names the Alertmanager grouping it came in, "" for meowbot's sweep)."""
    NONE = "none"  # an alert that names no node (a cluster-wide Alertmanager rule)


class Alert(_Frozen):
    fingerprint: str = Field(min_length=1, max_length=128)
    source: AlertSource
    status: AlertStatus
    cause: str = Field(min_length=1, max_length=100)
    """For sweep alerts its fault's kind, an Xid's named by its code (`xid_79`,
    bot/alerts/causes.py: fault_cause); for Alertmanager's, what bot/alerts/causes.py reads from
    its labels (`meowbot_cause`, `xid`, a known DCGM or node_exporter name) or else its
    alertname. `causes.kind_of` reads either back as a fault kind."""
    node: str | None = None
    gpu: int | None = None
    severity: Severity
    summary: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    starts_at: UtcDatetime
    ends_at: UtcDatetime | None = None
    action: Action = Action.NONE
    generator_url: str = ""
    event: str = ""
    """The Alertmanager grouping it came in (its group labels beyond the cause), "" if none."""
    began_unseen: bool = False
    """Found by the first sweep after meowbot began watching, with no history of it before:
    it began before `starts_at`, and when is not known (a restart, a fresh store)."""
    facts: dict[str, str] = Field(default_factory=dict)
    """What is known of its node when it joined: `rack`, `leaf_switch`, `driver`, `kernel`,
    `job` (from its labels, else the inventory); what a group's nodes share and do not."""


class GroupKey(_Frozen):
    cause: str
    scope: Scope
    scope_value: str = ""

    @property
    def id(self) -> str:
        """Stable and safe as a Redis key part and in a button value."""
        return f"{self.cause}|{self.scope.value}|{self.scope_value}"

    @classmethod
    def parse(cls, text: str) -> GroupKey:
        cause, scope, value = text.split("|", 2)
        return cls(cause=cause, scope=Scope(scope), scope_value=value)


class Claim(_Frozen):
    """Who acknowledged a group ("@ana is on it")."""

    user_id: str
    user_name: str
    at: UtcDatetime


class Page(_Frozen):
    """One thread reply of a group's per-node detail, as last written."""

    ts: str
    digest: str


class AlertGroup(_Frozen):
    key: GroupKey
    alerts: tuple[Alert, ...]
    """Every member, firing and resolved, in the order they joined."""
    opened_at: UtcDatetime
    channel: str = ""
    ts: str | None = None
    """The group's Slack message, once posted."""
    claim: Claim | None = None
    silenced_until: UtcDatetime | None = None
    replies: tuple[str, ...] = ()
    """Lines waiting to go into the group's thread (repeats, auto-drains), mrkdwn-ready."""
    drawn: str = ""
    """What the group's message showed when last written (`bot.alerts.notify.drawn`)."""
    pages: tuple[Page, ...] = ()
    """The per-node detail replies in the thread (bot/alerts/pages.py), in order."""

    @property
    def firing(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.status is AlertStatus.FIRING)

    @property
    def resolved(self) -> bool:
        """Fully resolved: every member resolved (a group is marked so, never deleted)."""
        return bool(self.alerts) and not self.firing

    @property
    def severity(self) -> Severity:
        members = self.firing or self.alerts
        return max((a.severity for a in members), default=Severity.INFO)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({a.node for a in self.alerts if a.node}))
