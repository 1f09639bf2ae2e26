"""What newer dcgm-exporters offer, and what a last-value gauge hides: the checks on the
simulated fleet with each family present and absent (the real Prometheus runs the same in
tests/integration/test_prometheus.py).

``host_label="hostname"`` is a fleet of the newer exporter only (cumulative Xid counter,
violation counters, DCGM health watches); ``"Hostname"`` the released one without them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot import metric_names as m
from bot.backends.resume_store import MemoryResumes
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import Action, Evidence, Fault, FaultKind, Severity, VerdictLevel
from bot.triage import service
from bot.triage.checks import HealthConfig, HealthRun, enabled_checks, requests_for, run_checks
from bot.triage.resumes import forget_before_resume
from bot.triage.service import NodeReport, Triage
from bot.triage.verdict import verdicts

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CFG = HealthConfig()
NEWER, OLDER = "hostname", "Hostname"


def _run(fleet: SimFleet, window_s: float = CFG.window_s) -> HealthRun:
    table = SimMetrics(fleet).read_now(
        requests_for(enabled_checks(CFG), CFG), nodes=None, window_s=window_s
    )
    return run_checks(table, CFG)


def _found(run: HealthRun, kind: FaultKind) -> set[tuple[str, int | None]]:
    return {(f.node, f.gpu) for f in run.faults if f.kind is kind}


def _fleet(host_label: str) -> SimFleet:
    return SimFleet(32, seed=3, now=NOW, fault_rate=0.0, host_label=host_label)  # type: ignore[arg-type]


# --- Xid: the cumulative counter against the last-value gauge -----------------------------------


@pytest.mark.parametrize("host_label", [NEWER, OLDER])
def test_a_new_xid_is_found_whichever_families_the_exporter_has(host_label: str) -> None:
    fleet = _fleet(host_label)
    fleet.inject(FaultKind.XID, "gpu-0005", 3, NOW - timedelta(minutes=10), xid=79)
    run = _run(fleet)
    xids = [f for f in run.faults if f.kind is FaultKind.XID]
    assert [(f.node, f.gpu) for f in xids] == [("gpu-0005", 3)]
    series = xids[0].evidence[0].series
    # The newer exporter's counter is the evidence where it exists: a series born in the
    # window (its first Xid, at 1) counts whole.
    expected = m.DCGM_EXP_XID_ERRORS_TOTAL if host_label == NEWER else m.DCGM_EXP_XID_ERRORS_COUNT
    assert series == expected
    assert xids[0].action is Action.DRAIN


def test_a_reset_gpu_keeps_its_last_xid_on_the_gauge_but_not_in_the_totals() -> None:
    """dcgm-exporter #500: the gauge still says 79 two hours after the reset; the totals say
    no Xid in the window, and they are what a node of the newer exporter is judged on."""
    for host_label, drained in ((NEWER, False), (OLDER, True)):
        fleet = SimFleet(
            32,
            seed=3,
            now=NOW,
            fault_rate=0.0,
            host_label=host_label,  # type: ignore[arg-type]
            disabled_metrics=[m.DCGM_EXP_XID_ERRORS_COUNT],
        )
        since = NOW - timedelta(hours=3)
        fleet.inject(FaultKind.XID, "gpu-0005", 3, since, until=since + timedelta(minutes=20))
        snap = fleet.snapshot(NOW, ["gpu-0005"])
        assert (snap.values(m.DCGM_FI_DEV_XID_ERRORS) or [])[3] > 0  # the gauge stays set
        xids = [f for f in _run(fleet).faults if f.kind is FaultKind.XID]
        assert [(f.node, f.gpu) for f in xids] == [("gpu-0005", 3)]
        assert (xids[0].action is Action.DRAIN) is drained, host_label
        if not drained:  # said, as history: counted since the exporter started, not lately
            assert xids[0].severity is Severity.INFO and "before the window" in xids[0].summary


# --- meowbot's memory of a resume -----------------------------------------------------------------


def _triage(fleet: SimFleet, memory: MemoryResumes | None) -> Triage:
    return Triage(SimMetrics(fleet), SimInventory(fleet), None, CFG, resumes=memory)


async def _health(fleet: SimFleet, memory: MemoryResumes | None, node: str) -> NodeReport:
    report = await service.node_health(_triage(fleet, memory), node)
    assert isinstance(report, NodeReport)
    return report


@pytest.mark.parametrize("host_label", [NEWER, OLDER])
async def test_a_node_resumed_after_its_xid_is_not_drained_again_for_it(host_label: str) -> None:
    """Xid 79 40 minutes ago, the GPU reset and the node drained, resumed 20 minutes ago:
    inside the hour both the gauge and the totals still show it. Remembered, it is history."""
    fleet = _fleet(host_label)
    xid_at = NOW - timedelta(minutes=40)
    fleet.inject(FaultKind.XID, "gpu-0005", 3, xid_at, until=xid_at + timedelta(minutes=5), xid=79)
    forgetful = await _health(fleet, None, "gpu-0005")
    assert forgetful.verdict.level is VerdictLevel.DRAIN  # without the memory: drained again
    memory = MemoryResumes()
    await memory.record_resume("gpu-0005", NOW - timedelta(minutes=20))
    report = await _health(fleet, memory, "gpu-0005")
    assert report.verdict.level is VerdictLevel.HEALTHY
    (xid,) = [f for f in report.faults if f.kind is FaultKind.XID]
    assert xid.severity is Severity.INFO and "before meowbot resumed the node" in xid.summary
    # Another node's memory changes nothing here, and this node's changes nothing elsewhere.
    other = MemoryResumes()
    await other.record_resume("gpu-0006", NOW - timedelta(minutes=20))
    assert (await _health(fleet, other, "gpu-0005")).verdict.level is VerdictLevel.DRAIN


@pytest.mark.parametrize("host_label", [NEWER, OLDER])
async def test_a_new_xid_after_the_resume_drains_again(host_label: str) -> None:
    fleet = _fleet(host_label)
    xid_at = NOW - timedelta(minutes=40)
    fleet.inject(FaultKind.XID, "gpu-0005", 3, xid_at, until=xid_at + timedelta(minutes=5), xid=79)
    # After the resume, another Xid: a different code on the same GPU moves the gauge too.
    fleet.inject(FaultKind.XID, "gpu-0005", 3, NOW - timedelta(minutes=10), xid=48)
    memory = MemoryResumes()
    await memory.record_resume("gpu-0005", NOW - timedelta(minutes=20))
    report = await _health(fleet, memory, "gpu-0005")
    assert report.verdict.level is VerdictLevel.DRAIN
    assert "xid48" in (report.verdict.drain_reason or "")


async def test_a_resume_before_the_xid_forgets_nothing() -> None:
    fleet = _fleet(OLDER)
    fleet.inject(FaultKind.XID, "gpu-0005", 3, NOW - timedelta(minutes=10), xid=79)
    memory = MemoryResumes()
    await memory.record_resume("gpu-0005", NOW - timedelta(minutes=30))
    assert (await _health(fleet, memory, "gpu-0005")).verdict.level is VerdictLevel.DRAIN


def test_forget_before_resume_compares_each_series_at_the_resume() -> None:
    def xid(series: str, value: float, **labels: str) -> Fault:
        return Fault(
            kind=FaultKind.XID,
            node="n1",
            gpu=int(labels.get("gpu", "0")),
            since=NOW,
            evidence=(Evidence(series=series, labels=labels, value=value),),
            severity=Severity.CRITICAL,
            action=Action.DRAIN,
            summary="Xid 79",
        )

    gauge = xid(m.DCGM_FI_DEV_XID_ERRORS, 79.0, gpu="1")
    total = xid(m.DCGM_EXP_XID_ERRORS_TOTAL, 1.0, gpu="2", xid="79")
    run = HealthRun(at=NOW, faults=[gauge, total], not_run={})
    at = NOW - timedelta(minutes=5)
    now = {
        (m.DCGM_FI_DEV_XID_ERRORS, "n1", "1", ""): 79.0,
        (m.DCGM_EXP_XID_ERRORS_TOTAL, "n1", "2", "79"): 3.0,
    }
    then = {"n1": {**now, (m.DCGM_EXP_XID_ERRORS_TOTAL, "n1", "2", "79"): 2.0}}
    out = forget_before_resume(run, {"n1": at}, now, then)
    # The gauge held 79 at the resume: history. The count grew since: a new Xid 79.
    assert [f.action for f in out.faults] == [Action.NONE, Action.DRAIN]
    # A series the resume did not have (the exporter restarted since) is new.
    assert forget_before_resume(run, {"n1": at}, now, {}).faults == run.faults
    # The windowed count: the same count is history only while its window reaches the resume.
    windowed = xid(m.DCGM_EXP_XID_ERRORS_COUNT, 1.0, gpu="3", xid="79", window_size_in_ms="300000")
    key = (m.DCGM_EXP_XID_ERRORS_COUNT, "n1", "3", "79")
    one = HealthRun(at=NOW, faults=[windowed], not_run={})
    inside = forget_before_resume(one, {"n1": at}, {key: 1.0}, {"n1": {key: 1.0}})
    assert [f.action for f in inside.faults] == [Action.NONE]
    long_ago = NOW - timedelta(minutes=30)
    outside = forget_before_resume(one, {"n1": long_ago}, {key: 1.0}, {"n1": {key: 1.0}})
    assert [f.action for f in outside.faults] == [Action.DRAIN]


# --- throttling: violation counters against the instant bitmask -----------------------------------


def test_a_power_cap_burst_at_the_instant_read_is_not_a_fault_where_the_counter_says_so() -> None:
    """GPU Boost touches the power cap for moments: the bitmask may catch one. Where the
    power violation counter exists, it says how long: 1 % of the hour is no fault."""
    for host_label, flagged in ((NEWER, False), (OLDER, True)):
        fleet = _fleet(host_label)
        # At the power cap for the last half minute: the bitmask catches it at the read.
        fleet.inject(FaultKind.THROTTLE_POWER, "gpu-0007", 2, NOW - timedelta(seconds=30))
        run = _run(fleet)
        found = _found(run, FaultKind.THROTTLE_POWER) == {("gpu-0007", 2)}
        assert found is flagged, host_label
        if not flagged:
            assert run.faults == [] or all(f.node != "gpu-0007" for f in run.faults)


def test_a_throttle_that_ended_before_the_read_shows_in_the_counters_only() -> None:
    """Held in thermal slowdown for 40 minutes of the hour, cool again at the read: the bitmask
    says nothing; the thermal violation counter says 40 minutes."""
    for host_label, found in ((NEWER, True), (OLDER, False)):
        fleet = _fleet(host_label)
        since = NOW - timedelta(minutes=50)
        fleet.inject(
            FaultKind.THROTTLE_SW_THERMAL, "gpu-0009", 6, since, until=since + timedelta(minutes=40)
        )
        faults = [f for f in _run(fleet).faults if f.kind is FaultKind.THROTTLE_SW_THERMAL]
        assert bool(faults) is found, host_label
        if found:
            (fault,) = faults
            assert (fault.node, fault.gpu) == ("gpu-0009", 6)
            assert fault.evidence[0].series == m.DCGM_FI_DEV_THERMAL_VIOLATION
            assert "67% of the window" in fault.summary


def test_a_gpu_held_back_all_hour_is_one_fault_with_its_share() -> None:
    fleet = _fleet(NEWER)
    fleet.inject(FaultKind.THROTTLE_POWER, "gpu-0007", 2, NOW - timedelta(hours=2))
    fleet.inject(FaultKind.THROTTLE_HW_THERMAL, "gpu-0008", 4, NOW - timedelta(hours=2))
    run = _run(fleet)
    power = [f for f in run.faults if f.kind is FaultKind.THROTTLE_POWER]
    assert [(f.node, f.gpu) for f in power] == [("gpu-0007", 2)]
    assert "100% of the window" in power[0].summary
    # Hardware thermal slowdown: the bitmask's finding, not a second software one.
    on_8 = {f.kind for f in run.faults if f.node == "gpu-0008"}
    assert FaultKind.THROTTLE_HW_THERMAL in on_8 and FaultKind.THROTTLE_SW_THERMAL not in on_8


def test_a_hardware_slowdown_that_came_and_went_shows_in_the_clock_event_counter() -> None:
    """On at 11:30 for ten minutes: off at the read, so the bitmask says nothing; the newer
    exporter's edge-counted DCGM_EXP_CLOCK_EVENTS_TOTAL says it came on in the window."""
    for host_label, found in ((NEWER, True), (OLDER, False)):
        fleet = _fleet(host_label)
        since = NOW - timedelta(minutes=30)
        fleet.inject(
            FaultKind.THROTTLE_HW_SLOWDOWN,
            "gpu-0012",
            2,
            since,
            until=since + timedelta(minutes=10),
        )
        run = _run(fleet)
        faults = [f for f in run.faults if f.kind is FaultKind.THROTTLE_HW_SLOWDOWN]
        assert bool(faults) is found, host_label
        if found:
            (fault,) = faults
            assert (fault.node, fault.gpu, fault.action) == ("gpu-0012", 2, Action.DRAIN)
            assert fault.evidence[0].series == m.DCGM_EXP_CLOCK_EVENTS_TOTAL
            assert "came on 1 time in the last hour" in fault.summary
        # GPUs coming on their power cap every ten minutes are counted too, and no fault.
        assert {f.node for f in run.faults} <= {"gpu-0012"}
    assert any(
        m.CLOCK_EVENT_NAMES[m.CLOCK_EVENT_SW_POWER_CAP] in events
        for events in _fleet(NEWER).snapshot(NOW).clock_event_counts().values()
    )


# --- DCGM's own health watches --------------------------------------------------------------------


def test_a_failing_health_watch_drains_and_power_warnings_do_not() -> None:
    fleet = _fleet(NEWER)
    fleet.inject(FaultKind.DCGM_HEALTH, "gpu-0004", 5, NOW - timedelta(minutes=30))
    run = _run(fleet)
    health = [f for f in run.faults if f.kind is FaultKind.DCGM_HEALTH]
    assert [(f.node, f.gpu, f.action) for f in health] == [("gpu-0004", 5, Action.DRAIN)]
    assert "INFOROM" in health[0].summary and "DCGM_FR_CORRUPT_INFOROM" in health[0].summary
    # A third of busy GPUs touch their power cap and DCGM's power watch warns on each of them
    # (DCGM #285): none of those healthy nodes is flagged.
    warned = fleet.snapshot(NOW).health_rows()
    noisy = {p // 8 for p, watch, result, _ in warned if watch == "POWER" and result}
    assert len(noisy) > 3
    flagged = {
        v.node
        for v in verdicts(fleet.nodes, run.faults).values()
        if v.level is not VerdictLevel.HEALTHY
    }
    assert flagged == {"gpu-0004"}


def test_health_watches_corroborate_the_other_checks() -> None:
    fleet = _fleet(NEWER)
    fleet.inject(FaultKind.ECC_DBE, "gpu-0010", 1, NOW - timedelta(minutes=30))
    fleet.inject(FaultKind.PCIE_REPLAY, "gpu-0011", 0, NOW - timedelta(minutes=30))
    run = _run(fleet)
    on = {(f.node, f.kind, f.action) for f in run.faults if f.kind is FaultKind.DCGM_HEALTH}
    assert on == {
        ("gpu-0010", FaultKind.DCGM_HEALTH, Action.DRAIN),  # MEM fails: a double-bit error
        ("gpu-0011", FaultKind.DCGM_HEALTH, Action.WATCH),  # PCIE warns: the replay rate
    }


def test_without_the_health_watches_the_check_says_it_could_not_run() -> None:
    fleet = _fleet(OLDER)
    fleet.inject(FaultKind.DCGM_HEALTH, "gpu-0004", 5, NOW - timedelta(minutes=30))
    run = _run(fleet)
    assert run.not_run == {"dcgm_health": [m.DCGM_EXP_GPU_HEALTH_STATUS]}
    assert run.faults == []
