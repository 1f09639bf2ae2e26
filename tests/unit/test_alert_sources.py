"""One fault, two sources: the sweep names an Xid's code as Alertmanager does, a cause is read
as its fault kind wherever config names kinds, a node both sources report is one row, and an
Alertmanager alert is recorded in the fault history and marked a repeat offender's as the
sweep's alerts are."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.alerts import pages
from bot.alerts.causes import fault_cause, kind_of, lookup, named_in, xid_code
from bot.alerts.config import AlertsConfig
from bot.alerts.dispatch import Change, group_key, merge, scope_for
from bot.alerts.models import Alert, AlertGroup, AlertStatus, GroupKey, Scope
from bot.alerts.policy import auto_drain
from bot.alerts.reported import fault_of, judged
from bot.alerts.route import route
from bot.alerts.sweep import REPEAT_LABEL, alerts_from_faults
from bot.alerts.webhook import parse_webhook
from bot.backends.fault_history import MemoryFaultHistory
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import Action, Evidence, Fault, FaultKind, Severity
from bot.ports import Located
from bot.render.alerts import BOTH_SOURCES, render_group, render_page, scope_phrase
from bot.triage.checks import HealthConfig
from bot.triage.repeats import OCCURRENCES_SERIES, Occurrence
from bot.triage.service import Triage, judge_reported

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
CFG = AlertsConfig(default_channel="C")


def nowhere(_node: str) -> Located | None:
    return None


def xid_fault(code: int, node: str, gpu: int = 3, *, counted: bool = False) -> Fault:
    # The last-Xid gauge's value is the code; a per-code counter's is a count, its label the code.
    evidence = (
        Evidence(series="DCGM_EXP_XID_ERRORS_COUNT", labels={"xid": str(code)}, value=2.0)
        if counted
        else Evidence(series="DCGM_FI_DEV_XID_ERRORS", labels={"gpu": str(gpu)}, value=code)
    )
    return Fault(
        kind=FaultKind.XID,
        node=node,
        gpu=gpu,
        since=NOW,
        evidence=(evidence,),
        severity=Severity.CRITICAL,
        action=Action.DRAIN,
        summary=f"Xid {code}: from the catalog",
    )


def am_alert(node: str, *, xid: str = "79", gpu: str = "3", fp: str = "", **labels: str) -> Alert:
    body = {
        "version": "4",
        "groupLabels": {"alertname": "GpuXidError", "xid": xid},
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "GpuXidError",
                    "Hostname": node,
                    "gpu": gpu,
                    "xid": xid,
                    "severity": "critical",
                    **labels,
                },
                "annotations": {"summary": f"Xid {xid} on {node}"},
                "startsAt": (NOW - timedelta(minutes=5)).isoformat(),
                "fingerprint": fp or f"am-{node}-{xid}",
            }
        ],
    }
    (alert,) = parse_webhook(json.dumps(body).encode())
    return alert


def test_the_sweep_names_an_xids_code_and_falls_back_to_the_kind() -> None:
    a79 = xid_fault(79, "gpu-0001")
    a48 = xid_fault(48, "gpu-0002", counted=True)
    assert [xid_code(a79), xid_code(a48)] == [79, 48]
    assert [fault_cause(a79), fault_cause(a48)] == ["xid_79", "xid_48"]
    # A repeat offender's added fault counts occurrences: without its label, no code.
    added = a79.model_copy(
        update={"evidence": (Evidence(series=OCCURRENCES_SERIES, labels={}, value=3.0),)}
    )
    assert xid_code(added) is None and fault_cause(added) == "xid"
    ecc = a79.model_copy(update={"kind": FaultKind.ECC_DBE})
    assert fault_cause(ecc) == "ecc_dbe"
    # Xid 79 and Xid 48 are two events; two Xids on one GPU are two alerts.
    alerts = alerts_from_faults([a79, a48, xid_fault(48, "gpu-0001")], NOW)
    assert [a.cause for a in alerts] == ["xid_79", "xid_48", "xid_48"]
    assert len({a.fingerprint for a in alerts}) == 3
    assert {group_key(a, nowhere, CFG).id for a in alerts} == {"xid_79|event|", "xid_48|event|"}


def test_a_cause_is_read_as_its_kind_where_config_names_kinds() -> None:
    assert kind_of("xid_79") is FaultKind.XID and kind_of("ecc_dbe") is FaultKind.ECC_DBE
    assert kind_of("RackPduTripped") is None and kind_of("xid") is FaultKind.XID
    assert named_in("xid_79", {"xid"}) and named_in("xid_79", {"xid_79"})
    assert not named_in("xid_48", {"xid_79"}) and not named_in("RackPduTripped", {"xid"})
    assert lookup("xid_79", {"xid": 1, "xid_79": 2}) == 2 and lookup("xid_13", {"xid": 1}) == 1
    cfg = AlertsConfig.parse(
        {
            "default_channel": "C",
            "routes": [{"match": {"cause": "xid"}, "channel": "C-XID"}],
            "auto_drain_causes": ["xid"],
            "group_scope": {"xid": "rack"},
            "runbooks": {"xid": "https://wiki/xid"},
        }
    )
    assert scope_for("xid_79", cfg) is Scope.RACK and scope_for("ecc_dbe", cfg) is Scope.EVENT
    assert cfg.runbook("xid_79") == "https://wiki/xid"
    (alert,) = alerts_from_faults([xid_fault(79, "gpu-0001")], NOW)
    group = AlertGroup(key=group_key(alert, nowhere, cfg), alerts=(alert,), opened_at=NOW)
    assert group.key == GroupKey(cause="xid_79", scope=Scope.NODE, scope_value="gpu-0001")
    assert route(group, cfg, NOW).channel == "C-XID"
    assert auto_drain(group, cfg)


def test_both_sources_of_one_xid_are_one_event_naming_each_node_once() -> None:
    sweep = alerts_from_faults([xid_fault(79, f"gpu-000{i}") for i in (1, 2, 3)], NOW)
    am = [am_alert(f"gpu-000{i}") for i in (2, 3, 4)]
    assert {group_key(a, nowhere, CFG) for a in (*sweep, *am)} == {
        GroupKey(cause="xid_79", scope=Scope.EVENT)
    }
    group: AlertGroup | None = None
    for a in (*sweep, *am):
        group, _ = merge(group, a, NOW, key=GroupKey(cause="xid_79", scope=Scope.EVENT))
    assert group is not None and len(group.alerts) == 6
    assert scope_phrase(group).startswith("on 4 nodes")
    text = json.dumps(render_group(group, CFG, NOW).blocks)
    for node in ("gpu-0001", "gpu-0002", "gpu-0003", "gpu-0004"):
        assert text.count(f"`{node}` GPU 3") == 1, node
    assert text.count(BOTH_SOURCES) == 2  # gpu-0002 and gpu-0003
    # The sweep no longer sees gpu-0002: Alertmanager still does, so it still fires there.
    gone = sweep[1].model_copy(update={"status": AlertStatus.RESOLVED, "ends_at": NOW})
    group, what = merge(group, gone, NOW)
    assert what is Change.RESOLVED_MEMBER and "gpu-0002" in {a.node for a in group.firing}
    text = json.dumps(render_group(group, CFG, NOW).blocks)
    assert "~`gpu-0002`" not in text and "Resolved on" not in text


def test_a_big_event_of_both_sources_pages_each_node_once() -> None:
    nodes = [f"gpu-{i:04d}" for i in range(1, 31)]
    sweep = alerts_from_faults([xid_fault(79, n) for n in nodes[:20]], NOW)
    am = [am_alert(n) for n in nodes[10:]]
    key = GroupKey(cause="xid_79", scope=Scope.EVENT)
    group = AlertGroup(key=key, alerts=(*sweep, *am), opened_at=NOW, channel="C", ts="1.0")
    head = render_group(group, CFG, NOW).blocks[0]["text"]["text"]
    assert "on 30 nodes" in head
    rows = [r for p in pages.pages(group) for r in p]
    assert [n for n, _ in rows] == nodes
    page = json.dumps(render_page(group, pages.pages(group)[0], 0, CFG).blocks)
    assert "nodes 1-25 of 30" in page and page.count(BOTH_SOURCES) == 10


def test_an_alertmanager_alert_reports_a_fault_and_is_marked_like_the_sweeps() -> None:
    alert = am_alert("gpu-0007")
    fault = fault_of(alert)
    assert fault is not None
    assert (fault.kind, fault.node, fault.gpu, fault.since) == (
        FaultKind.XID,
        "gpu-0007",
        3,
        alert.starts_at,
    )
    assert (fault.severity, fault.action) == (Severity.CRITICAL, Action.DRAIN)  # the catalog's
    assert judged(alert, fault) == alert  # no history: unchanged
    line = "3rd Xid 79 on GPU 3 in 30 days: 14 Nov, 26 Nov, today"
    marked = judged(alert, fault.model_copy(update={"repeat": line}))
    assert marked.labels[REPEAT_LABEL] == line
    assert marked.summary == f"{alert.summary}; repeat offender: {line}"
    # No fault kind, no node, no code, or resolved: nothing to record.
    assert fault_of(am_alert("gpu-0007").model_copy(update={"cause": "RackPduTripped"})) is None
    assert fault_of(alert.model_copy(update={"node": None})) is None
    assert fault_of(alert.model_copy(update={"cause": "xid"})) is None
    assert fault_of(alert.model_copy(update={"status": AlertStatus.RESOLVED})) is None
    assert fault_of(alerts_from_faults([xid_fault(79, "gpu-0007")], NOW)[0]) is None
    # An application's Xid is read by the catalog: reported, but it makes no occurrence.
    app = fault_of(am_alert("gpu-0007", xid="13"))
    assert app is not None and app.severity is Severity.INFO


async def test_alertmanager_alerts_are_recorded_once_and_judged_with_the_history() -> None:
    fleet = SimFleet(16, seed=5, now=NOW, fault_rate=0.0)
    history = MemoryFaultHistory()
    triage = Triage(SimMetrics(fleet), SimInventory(fleet), None, HealthConfig(), history=history)
    node = "gpu-0007"
    earlier = [NOW - timedelta(days=18), NOW - timedelta(days=9)]
    await history.save(
        {node: [Occurrence("xid79", FaultKind.XID, node, 3, t, t) for t in earlier]}, NOW
    )
    alert = am_alert(node)
    fault = fault_of(alert)
    assert fault is not None
    # Delivered again and again, hours apart (Alertmanager's repeat interval): one occurrence.
    for later in (0, 1, 4, 9):
        (judged_fault,) = await judge_reported(triage, [fault], NOW + timedelta(hours=later))
    stored = await history.occurrences([node])
    assert len(stored) == 3 and stored[-1].first_seen == alert.starts_at
    assert judged_fault.repeat is not None and judged_fault.repeat.startswith("3rd Xid 79 on GPU 3")
    assert judged_fault.action is Action.RMA
    marked = judged(alert, judged_fault)
    assert REPEAT_LABEL in marked.labels and "repeat offender: 3rd Xid 79" in marked.summary
    # The sweep seeing the same fault meanwhile adds no occurrence either.
    sweep_fault = xid_fault(79, node).model_copy(update={"since": NOW + timedelta(hours=9)})
    await judge_reported(triage, [sweep_fault], NOW + timedelta(hours=9, minutes=1))
    assert len(await history.occurrences([node])) == 3
