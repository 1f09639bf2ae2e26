"""When an alert says its fault began: from the fault history's first sighting, or honestly
"seen since meowbot began watching" when nothing before that was seen (a restart, a fresh
store), never the process's start dressed as the fault's."""

from __future__ import annotations

import json
from datetime import timedelta

from bot.alerts.models import Alert, AlertGroup, GroupKey, Scope
from bot.alerts.sweep import alerts_from_faults, first_seen, sweep_fingerprint
from bot.render.alerts import render_group, since_line
from bot.triage.repeats import Occurrence
from tests.unit.test_alert_sources import NOW, xid_fault
from tests.unit.test_render_alerts import CFG, valid

LATER = NOW + timedelta(minutes=30)


def event(alerts: list[Alert]) -> AlertGroup:
    key = GroupKey(cause=alerts[0].cause, scope=Scope.EVENT)
    return AlertGroup(key=key, alerts=tuple(alerts), opened_at=LATER, channel="C")


def test_the_first_sweep_of_a_watch_says_it_saw_the_fault_from_then_only() -> None:
    fault = xid_fault(79, "gpu-0001").model_copy(update={"since": LATER})
    [alert] = alerts_from_faults([fault], LATER, watch_start=LATER)
    assert alert.began_unseen and alert.starts_at == LATER
    line = since_line(event([alert]), LATER)
    assert line.startswith("Seen since meowbot began watching at ")
    assert "how long before that is not known" in line
    assert f"{LATER:%Y-%m-%d %H:%M} UTC (0 min ago)" in line
    text = json.dumps(valid(render_group(event([alert]), CFG, LATER)).blocks)
    assert "began watching" in text
    # A reading timed a little before the sweep began (a minute's step): the same sweep's.
    read = LATER - timedelta(seconds=40)
    early = fault.model_copy(update={"since": read})
    [same] = alerts_from_faults([early], LATER, watch_start=LATER, read_at=read)
    assert same.began_unseen and same.starts_at == read
    # A check that knows when its fault began (before the reading) dates it: not unseen.
    known = fault.model_copy(update={"since": LATER - timedelta(hours=1)})
    [dated] = alerts_from_faults([known], LATER, watch_start=LATER, read_at=LATER)
    assert not dated.began_unseen
    # A later sweep of the same watch found it: it began between the two sweeps.
    [found_later] = alerts_from_faults([fault], LATER, watch_start=NOW)
    assert not found_later.began_unseen
    assert (
        since_line(event([found_later]), LATER) == f"Since {LATER:%Y-%m-%d %H:%M} UTC (0 min ago)"
    )


def test_the_fault_history_dates_a_fault_the_bot_finds_after_a_restart() -> None:
    fault = xid_fault(79, "gpu-0001").model_copy(update={"since": LATER})
    history = [
        # The occurrence going on now, first seen two hours before the restart...
        Occurrence("xid79", fault.kind, "gpu-0001", 3, NOW - timedelta(hours=2), LATER),
        # ...and one of last week, long over: not this fault.
        Occurrence(
            "xid79", fault.kind, "gpu-0001", 3, NOW - timedelta(days=7), NOW - timedelta(days=7)
        ),
        # Another GPU's is not this one's.
        Occurrence("xid79", fault.kind, "gpu-0001", 4, NOW - timedelta(hours=9), LATER),
    ]
    seen = first_seen([fault], history, LATER, gap_s=3600)
    fp = sweep_fingerprint("xid_79", "gpu-0001", 3)
    assert seen == {fp: NOW - timedelta(hours=2)}
    [alert] = alerts_from_faults([fault], LATER, seen=seen, watch_start=LATER)
    assert not alert.began_unseen and alert.starts_at == NOW - timedelta(hours=2)
    before = NOW - timedelta(hours=2)
    assert since_line(event([alert]), LATER) == f"Since {before:%Y-%m-%d %H:%M} UTC (2 h ago)"
