"""The passive sweep as an alert source: faults in, alerts out, cleared faults resolved."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta

from bot.alerts.causes import fault_cause, kind_of
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus
from bot.drain_reason import short_cause
from bot.models import Fault
from bot.triage.repeats import Occurrence, fold

# Times this close are one sweep's (a store keeps milliseconds, a sweep takes its own time).
SAME_SWEEP = timedelta(seconds=1)

# The label of an alert whose fault is a repeat offender's: its history in a line.
REPEAT_LABEL = "repeat_offender"


def sweep_fingerprint(cause: str, node: str, gpu: int | None) -> str:
    """Stable across runs and replicas (not Python's salted `hash`)."""
    raw = f"{cause}|{node}|{'' if gpu is None else gpu}".encode()
    return "sweep-" + hashlib.sha256(raw).hexdigest()[:16]


def marked(labels: dict[str, str], summary: str, repeat: str) -> tuple[dict[str, str], str]:
    """A repeat offender's alert, marked where every renderer reads it (its summary) and as a
    label for those that count them; the same for both sources."""
    if repeat not in summary:
        summary = (
            f"{summary}; repeat offender: {repeat}" if summary else f"repeat offender: {repeat}"
        )
    return {**labels, REPEAT_LABEL: repeat}, summary


def first_seen(
    faults: Iterable[Fault], history: Iterable[Occurrence], now: datetime, gap_s: float
) -> dict[str, datetime]:
    """By sweep fingerprint, when the fault history first saw each of `faults` in the
    occurrence still going on now (seen within `gap_s`): an alert opened after a restart
    dates its fault from there, not from the restart."""
    current = {
        o.key: o.first_seen
        for o in fold(history, gap_s)
        if o.last_seen >= now - timedelta(seconds=gap_s)
    }
    out: dict[str, datetime] = {}
    for fault in faults:
        seen = current.get((short_cause(fault), fault.node, fault.gpu))
        if seen is not None:
            fp = sweep_fingerprint(fault_cause(fault), fault.node, fault.gpu)
            out[fp] = min(seen, out.get(fp, seen))
    return out


def alerts_from_faults(
    faults: list[Fault],
    now: datetime,
    *,
    seen: Mapping[str, datetime] | None = None,
    watch_start: datetime | None = None,
    read_at: datetime | None = None,
) -> list[Alert]:
    """One firing alert per (cause, node, gpu); the same fault found twice is one alert. An
    Xid's cause names its code (`xid_79`, bot/alerts/causes.py: fault_cause).

    Each starts when it is first known to have been there: the fault's own `since`, the fault
    history's first sighting (`seen`, by fingerprint: `first_seen`), else now. Found by the
    first sweep of a watch (`watch_start` is `now`) and known from nothing before that
    sweep's reading (`read_at`, which the history holds as this sweep's sighting), it is
    marked `began_unseen`: it was there before meowbot looked."""
    alerts: dict[str, Alert] = {}
    known = seen or {}
    # Within a second: the stores keep times to the millisecond.
    first_of_watch = watch_start is not None and watch_start >= now - SAME_SWEEP
    reading = min(read_at or now, now)
    for fault in faults:
        cause = fault_cause(fault)
        fp = sweep_fingerprint(cause, fault.node, fault.gpu)
        if fp in alerts:
            continue
        start = min(fault.since, now, known.get(fp, now))
        labels = {"node": fault.node}
        if fault.gpu is not None:
            labels["gpu"] = str(fault.gpu)
        summary = fault.summary
        if fault.repeat is not None:
            labels, summary = marked(labels, summary, fault.repeat)
        alerts[fp] = Alert(
            fingerprint=fp,
            source=AlertSource.SWEEP,
            status=AlertStatus.FIRING,
            cause=cause,
            node=fault.node,
            gpu=fault.gpu,
            severity=fault.severity,
            summary=summary,
            labels=labels,
            starts_at=start,
            action=fault.action,
            began_unseen=first_of_watch and start >= reading - SAME_SWEEP,
        )
    return list(alerts.values())


def resolved_by_sweep(
    open_sweep: Mapping[str, Alert], current: list[Alert], now: datetime
) -> list[Alert]:
    """Firing sweep alerts this sweep no longer saw, as resolved copies ending `now`."""
    seen = {a.fingerprint for a in current}
    return [
        alert.model_copy(update={"status": AlertStatus.RESOLVED, "ends_at": now})
        for fp, alert in open_sweep.items()
        if alert.source is AlertSource.SWEEP
        and alert.status is AlertStatus.FIRING
        and fp not in seen
    ]


def swept(
    faults: list[Fault],
    unchecked: Collection[str],
    groups: Iterable[AlertGroup],
    now: datetime,
    seen: Mapping[str, datetime] | None = None,
    watch_start: datetime | None = None,
    read_at: datetime | None = None,
) -> list[Alert]:
    """A sweep's alerts: one firing per fault found, and a resolved copy of each open sweep
    alert it no longer saw. Those of a check that could not run (`unchecked`, by kind) resolve
    nothing. `seen`, `watch_start` and `read_at` date them (`alerts_from_faults`). Pure; at 50,000
    nodes it is thousands of alerts, so the bot runs it on a worker."""
    current = alerts_from_faults(faults, now, seen=seen, watch_start=watch_start, read_at=read_at)
    open_sweep = {
        a.fingerprint: a
        for g in groups
        for a in g.firing
        # An `xid_79` alert is the Xid check's: a check that could not run resolves nothing.
        if a.source is AlertSource.SWEEP and kind_of(a.cause) not in unchecked
    }
    return [*current, *resolved_by_sweep(open_sweep, current, now)]
