"""Alertmanager's alerts as the faults they report, for the fault history. Pure.

The sweep's faults are recorded in each node's fault history and judged with it (a repeat
offender escalates: bot/triage/repeats.py). An Alertmanager alert whose cause is a fault kind
(`xid_79`, `ecc_dbe`, a row remap failure) reports the same fault: `fault_of` reads it as one,
so it is recorded as the sweep records its own, and `judged` marks the alert as the sweep marks
its alerts when that fault is a repeat offender's.
"""

from __future__ import annotations

from bot.alerts.causes import kind_of, xid_of
from bot.alerts.models import Alert, AlertSource, AlertStatus
from bot.alerts.sweep import marked
from bot.metric_names import LABEL_XID
from bot.models import Evidence, Fault, FaultKind
from bot.triage.checks import CHECK_OF
from bot.triage.xid import describe


def fault_of(alert: Alert) -> Fault | None:
    """The fault a firing Alertmanager alert reports, judged as meowbot's own check judges its
    kind (an Xid by the catalog: an Xid 13 is the application's, not the node's); None when its
    cause is no fault kind, it names no node, or it is an Xid of no known code."""
    if (
        alert.source is not AlertSource.ALERTMANAGER
        or alert.status is not AlertStatus.FIRING
        or not alert.node
    ):
        return None
    kind = kind_of(alert.cause)
    if kind is None:
        return None
    labels: dict[str, str] = {}
    if kind is FaultKind.XID:
        code = xid_of(alert.cause)
        if code is None:
            return None  # the history counts an Xid by its code
        info = describe(code)
        severity, action = info.severity, info.action
        labels[LABEL_XID] = str(code)
    else:
        check = CHECK_OF.get(kind)
        if check is None:
            return None
        severity, action = check.severity, check.action
    return Fault(
        kind=kind,
        node=alert.node,
        gpu=alert.gpu,
        since=alert.starts_at,
        evidence=(
            Evidence(
                series=alert.labels.get("alertname", alert.cause),
                labels=labels,
                value=1.0,
                note="reported by Alertmanager",
            ),
        ),
        severity=severity,
        action=action,
        summary=alert.summary,
    )


def judged(alert: Alert, fault: Fault) -> Alert:
    """`alert` as its fault was judged with its history: a repeat offender's is marked (label
    and summary line, as the sweep marks its own) and at least as severe as the escalation."""
    if fault.repeat is None:
        return alert
    labels, summary = marked(alert.labels, alert.summary, fault.repeat)
    return alert.model_copy(
        update={
            "labels": labels,
            "summary": summary,
            "severity": max(alert.severity, fault.severity, key=lambda s: s.rank),
        }
    )
