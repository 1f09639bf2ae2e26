"""Policy: which actions a group offers, drain reasons, the blast-radius limit, auto-drain."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from bot.alerts.causes import named_in
from bot.alerts.config import AlertsConfig
from bot.alerts.models import Alert, AlertGroup, AlertSource
from bot.models import Severity, VerdictLevel
from bot.triage.verdict import level_of

ACK = "ack"
SILENCE = "silence"
DRAIN_NOW = "drain_now"
DRAIN_AFTER_JOBS = "drain_after_jobs"
"""Drain the node once its running jobs end (Slurm's DRAIN: no new jobs, running ones finish)."""
RESUME = "resume"


def posted(group: AlertGroup, cfg: AlertsConfig) -> bool:
    """Whether the group has a message in a channel, or is to get one: its severity or cause
    is one `alerts.post` names (critical and warning by default). An info finding stays out
    of the channel (still in the fault history and /hw-faults); a group posted once keeps
    its message up to date whatever its severity becomes."""
    return group.ts is not None or cfg.posts(group.severity, group.key.cause)


def offered_actions(group: AlertGroup) -> list[str]:
    """What the group's buttons may offer: none once it is resolved; a drain and a resume only
    when it names nodes (which of them a node shows is its scheduler state's, render time).

    A critical group whose fault makes its node one to drain (an Xid 79, a double-bit ECC
    error) offers draining now; a warning offers a drain that lets running jobs finish, a
    person's choice where /node-health only watches; an info finding offers no drain.
    """
    if group.resolved:
        return []
    actions = [ACK, SILENCE]
    if any(a.node for a in group.firing):
        on_nodes = [a for a in group.firing if a.node]
        if group.severity >= Severity.CRITICAL and any(_drain_worthy(a) for a in on_nodes):
            actions.append(DRAIN_NOW)
        elif any(_worth_a_look(a) for a in on_nodes):
            actions.append(DRAIN_AFTER_JOBS)
        actions.append(RESUME)
    return actions


def _drain_worthy(alert: Alert) -> bool:
    """Whether the alert's fault makes its node one to drain, as /node-health judges it.
    Alertmanager's alerts say no action of meowbot's: a person decides, so a drain stays on
    offer."""
    if alert.source is not AlertSource.SWEEP:
        return True
    return level_of(alert.severity, alert.action) >= VerdictLevel.DRAIN


def _worth_a_look(alert: Alert) -> bool:
    """Whether the alert says anything against its node (a warning, a watched fault): an
    application's Xid (info) says nothing and offers no drain."""
    if alert.source is not AlertSource.SWEEP:
        return alert.severity > Severity.INFO
    return level_of(alert.severity, alert.action) > VerdictLevel.HEALTHY


class Outcome(StrEnum):
    ALLOW = "allow"
    NEEDS_SECOND_PERSON = "needs_second_person"


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    sentence: str
    limit: int

    @property
    def allowed(self) -> bool:
        return self.outcome is Outcome.ALLOW


def blast_limit(fleet_size: int, share: float) -> int:
    """Nodes meowbot may drain in an hour: `share` of the fleet, rounded down, at least one."""
    return max(1, math.floor(fleet_size * share + 1e-9)) if fleet_size > 0 else 0


def blast_radius(
    drained_last_hour: int, fleet_size: int, share: float, asking: int = 1
) -> Decision:
    """Whether `asking` more drains stay within the hourly share of the fleet."""
    limit = blast_limit(fleet_size, share)
    if drained_last_hour + asking <= limit:
        return Decision(
            Outcome.ALLOW, f"{drained_last_hour + asking} of {limit} drains this hour.", limit
        )
    return Decision(
        Outcome.NEEDS_SECOND_PERSON,
        f"meowbot has drained {drained_last_hour} nodes in the last hour and may drain {limit} "
        f"({share:.0%} of {fleet_size}); a second authorised person must confirm this drain.",
        limit,
    )


def auto_drain(group: AlertGroup, cfg: AlertsConfig) -> bool:
    """Whether the group's nodes are drained without a click: only named causes (or their fault
    kinds: `xid` names every Xid), off by default.

    The caller still applies `blast_radius` and the owned-reason rules.
    """
    return (
        named_in(group.key.cause, cfg.auto_drain_causes)
        and not group.resolved
        and any(a.node for a in group.firing)
        # `xid` names an application's Xid 13 too, which says nothing against its node.
        and bool({DRAIN_NOW, DRAIN_AFTER_JOBS} & set(offered_actions(group)))
    )
