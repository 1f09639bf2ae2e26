"""One answer, whichever command asks: every node of one simulated fleet asked every way.

A node's verdict is one function of its evidence (bot.triage.verdict.level_of), so
/node-health of the node, /node-health of a hostlist, /hw-faults over the same window, the
alert sweep and App Home's counts must say the same of it; where two answers read different
windows (/hw-faults' day against /node-health's hour), each names its own.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from bot.alerts.models import AlertGroup, GroupKey, Scope
from bot.alerts.policy import DRAIN_AFTER_JOBS, DRAIN_NOW, offered_actions
from bot.alerts.sweep import alerts_from_faults
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import FaultKind, VerdictLevel
from bot.render.triage import DRAIN_ACTION, glance_lines, render_faults, render_node
from bot.triage import service
from bot.triage.checks import HealthConfig, enabled_checks, requests_for, run_checks
from bot.triage.service import FaultsReport, Triage
from bot.triage.verdict import fault_level
from tests.every_way import ALONE, HOSTLIST, HW_FAULTS, SWEEP, ask_every_way, counts

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
K = FaultKind


def _ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


# node -> (kind, gpu, since, detail): the faults of the trial, and a few more.
FAULTS: dict[str, tuple[FaultKind, int | None, datetime, dict[str, float | str]]] = {
    "gpu-0005": (K.DRIVER_DRIFT, None, _ago(600), {"version": "535.104.05"}),
    "gpu-0040": (K.DRIVER_DRIFT, None, _ago(30), {"version": "535.104.05"}),
    "gpu-0012": (K.KERNEL_DRIFT, None, _ago(90), {}),
    "gpu-0020": (K.FIRMWARE_DRIFT, None, _ago(90), {}),
    "gpu-0030": (K.NVLINK_CRC, 3, _ago(20 * 60), {"per_min": 13.0}),
    "gpu-0033": (K.ROW_REMAP_PENDING, 4, _ago(45), {}),
    "gpu-0050": (K.UNEXPECTED_REBOOT, None, _ago(20), {}),
    "gpu-0070": (K.XID, 2, _ago(10), {"xid": 79}),
    # Only in a day's counters: rebooted 5 h ago; NVLink errors trickling at 60 an hour,
    # under the hour's threshold of 100 and far over it in a day.
    "gpu-0060": (K.UNEXPECTED_REBOOT, None, _ago(300), {}),
    "gpu-0081": (K.NVLINK_CRC, 1, _ago(20 * 60), {"per_min": 1.0}),
}
NOW_FAULTY = {n for n in FAULTS if n not in {"gpu-0060", "gpu-0081"}}


def fleet() -> SimFleet:
    f = SimFleet(96, seed=21, now=NOW, fault_rate=0.0, host_label="mixed")
    for node, (kind, gpu, since, detail) in FAULTS.items():
        f.inject(kind, node, gpu, since, **detail)
    return f


@pytest.fixture(scope="module")
def triage() -> Triage:
    f = fleet()
    return Triage(SimMetrics(f), SimInventory(f), None, HealthConfig())


async def test_every_surface_gives_each_node_the_same_verdict(triage: Triage) -> None:
    nodes = list(triage.inventory.names())
    alone = [*sorted(FAULTS), "gpu-0001", "gpu-0096"]
    answers = await ask_every_way(triage, nodes, alone)
    assert answers.disagreements() == []
    hostlist = answers.levels[HOSTLIST]
    assert set(answers.levels[ALONE]) == set(alone)
    for surface in (HW_FAULTS, SWEEP):
        assert answers.levels[surface] == hostlist, surface
    # App Home counts the whole fleet as /node-health of the whole hostlist does.
    assert answers.home == counts(hostlist)
    unhealthy = {n for n, lv in hostlist.items() if lv is not VerdictLevel.HEALTHY}
    assert unhealthy == NOW_FAULTY  # and the test's fleet is what it claims to be
    assert hostlist["gpu-0005"] is hostlist["gpu-0040"] is VerdictLevel.DEGRADED
    assert hostlist["gpu-0033"] is VerdictLevel.DRAIN  # a pending row remap: drain, reset


async def test_a_fault_carries_the_same_count_and_words_for_the_same_window(
    triage: Triage,
) -> None:
    answers = await ask_every_way(triage, list(triage.inventory.names()), sorted(NOW_FAULTY))
    listed = {(f.node, f.kind, f.gpu): f for g in answers.faults.groups for f in g.faults}
    for node, report in answers.reports.items():
        assert report.faults, node
        for fault in report.faults:
            same = listed[(fault.node, fault.kind, fault.gpu)]
            assert same.summary == fault.summary
            assert [e.value for e in same.evidence] == [e.value for e in fault.evidence]
            assert (same.severity, same.action) == (fault.severity, fault.action)
    crc = answers.reports["gpu-0030"].faults[0]
    assert crc.summary.endswith("NVLink CRC flit errors in the last hour")


async def test_answers_over_other_windows_name_them(triage: Triage) -> None:
    day = await service.hw_faults(triage, "")
    assert isinstance(day, FaultsReport) and day.window_s == 86400
    by_node = {f.node: f for g in day.groups for f in g.faults}
    # In the day's list, named as the day's; /node-health of those nodes names its hour.
    assert by_node["gpu-0060"].summary == "the node rebooted in the last 24 h (boot time moved)"
    assert by_node["gpu-0081"].summary.endswith("NVLink CRC flit errors in the last 24 h")
    text = json.dumps(render_faults(day).blocks)
    assert "counters in the last 24 h" in text and "in the window" not in text
    assert "reads its counters in the last hour: a fault of this list may be over" in text
    for node in ("gpu-0060", "gpu-0081"):
        report = await service.node_health(triage, node)
        assert isinstance(report, service.NodeReport)
        assert report.verdict.level is VerdictLevel.HEALTHY and report.window_s == 3600
        assert "counters in the last hour" in json.dumps(render_node(report).blocks)
    # The day's NVLink count of gpu-0030 against its hour's: two windows, each named.
    hour = await service.node_health(triage, "gpu-0030")
    assert isinstance(hour, service.NodeReport)
    day_count = by_node["gpu-0030"].evidence[0].value
    assert day_count > hour.faults[0].evidence[0].value
    glance = await service.fleet_glance(triage)
    assert not isinstance(glance, service.UserError)
    home = " ".join(glance_lines(glance))
    assert "counters in the last hour" in home and "Faults in the last 24 h by kind" in home


async def test_a_pending_row_remap_reads_the_same_in_hw_faults_and_node_health(
    triage: Triage,
) -> None:
    report = await service.node_health(triage, "gpu-0033")
    faults = await service.hw_faults(triage, "gpu-0033")
    assert isinstance(report, service.NodeReport) and isinstance(faults, FaultsReport)
    (fault,) = report.faults
    assert fault.kind is K.ROW_REMAP_PENDING and fault_level(fault) is VerdictLevel.DRAIN
    node_text = json.dumps(render_node(report).blocks)
    faults_text = json.dumps(render_faults(faults).blocks)
    tag = "(`row_remap_pending`) (warning; advice: drain)"
    assert tag in node_text and DRAIN_ACTION in node_text
    assert "(`row_remap_pending`) (warning; advice: drain)" in faults_text


async def test_an_alert_offers_a_drain_where_node_health_offers_one(triage: Triage) -> None:
    """Where /node-health offers Drain, so does the alert; where it calls the node healthy
    (an application's Xid), the alert offers none; a watched warning's alert lets a person
    drain after jobs, where /node-health only watches."""
    swept = await service.fleet_faults(triage)
    for alert in alerts_from_faults(swept.faults, NOW):
        assert alert.node is not None
        key = GroupKey(cause=alert.cause, scope=Scope.NODE, scope_value=alert.node)
        group = AlertGroup(key=key, alerts=(alert,), opened_at=NOW)
        report = await service.node_health(triage, alert.node)
        assert isinstance(report, service.NodeReport)
        node_offers = DRAIN_ACTION in json.dumps(render_node(report).blocks)
        offered = set(offered_actions(group))
        alert_offers = bool({DRAIN_NOW, DRAIN_AFTER_JOBS} & offered)
        if node_offers:
            assert alert_offers, (alert.node, alert.cause)
        healthy = report.verdict.level is VerdictLevel.HEALTHY
        assert alert_offers is not healthy or node_offers, (alert.node, alert.cause)


def test_a_fault_kind_has_one_severity_and_action_whichever_check_finds_it() -> None:
    """Two checks find PCIe down-training (width, generation) and two NIC errors (receive,
    transmit): what the fault makes of the node must not depend on which one spoke. Xids
    are the exception by design: their catalog decides per code."""
    f = SimFleet(32, seed=5, now=NOW, fault_rate=0.0)
    f.inject(K.PCIE_DOWNTRAINED, "gpu-0003", 1, _ago(30), width=8)
    f.inject(K.PCIE_DOWNTRAINED, "gpu-0005", 2, _ago(30), gen=4)
    f.inject(K.NIC_ERRORS, "gpu-0007", None, _ago(30), device="eth0", per_min=500.0)
    for kind, node in ((K.NVLINK_CRC, "gpu-0009"), (K.ROW_REMAP_PENDING, "gpu-0011")):
        f.inject(kind, node, 0, _ago(30))
    cfg = HealthConfig()
    table = SimMetrics(f).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    faults = run_checks(table, cfg).faults
    seen: dict[FaultKind, set[tuple[str, str]]] = defaultdict(set)
    for fault in faults:
        seen[fault.kind].add((fault.severity.value, fault.action.value))
    # Both checks of each pair spoke: the receive and the transmit one, width and generation.
    nic = {x.summary.split()[2] for x in faults if x.kind is K.NIC_ERRORS}
    assert nic == {"receive", "transmit"}
    assert {x.node for x in faults if x.kind is K.PCIE_DOWNTRAINED} == {"gpu-0003", "gpu-0005"}
    assert {k: len(v) for k, v in seen.items()} == dict.fromkeys(seen, 1)
