"""Repeat offenders across weeks: the pure core (bot/triage/repeats.py), then the services with
the in-memory history, every surface asked (the Redis store: tests/integration; through the bot:
tests/e2e/test_repeat_offenders.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from bot import drain_reason
from bot.alerts.sweep import REPEAT_LABEL, alerts_from_faults
from bot.backends.fault_history import MemoryFaultHistory
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import Action, Evidence, Fault, FaultKind, Severity, VerdictLevel
from bot.render.triage import glance_lines, render_faults, render_node
from bot.triage import service
from bot.triage.checks import HealthConfig
from bot.triage.repeat_config import RepeatConfig, RepeatRule
from bot.triage.repeats import Occurrence, bounded, escalate, fold, offenders, sightings
from bot.triage.service import FaultsReport, FleetGlance, NodeReport, Triage
from bot.triage.verdict import verdict
from bot.words import ordinal
from tests.every_way import ALONE, HOSTLIST, HW_FAULTS, SWEEP, ask_every_way

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
CFG = RepeatConfig()
MINUTE = timedelta(minutes=1)


def xid(code: int, node: str = "gpu-0042", gpu: int | None = 3, **kw: object) -> Fault:
    fields: dict[str, object] = {
        "kind": FaultKind.XID,
        "node": node,
        "gpu": gpu,
        "since": NOW,
        "evidence": (
            Evidence(series="DCGM_FI_DEV_XID_ERRORS", labels={"gpu": str(gpu)}, value=code),
        ),
        "severity": Severity.CRITICAL,
        "action": Action.DRAIN,
        "summary": f"Xid {code}: GPU has fallen off the bus",
    }
    fields.update(kw)
    return Fault.model_validate(fields)


def seen(fault: Fault, at: datetime) -> list[Occurrence]:
    return sightings([fault], at)


def test_a_fault_seen_in_every_sweep_of_a_day_and_flapping_is_one_occurrence() -> None:
    # 1,440 sweeps a minute apart; the fault flaps: present in two sweeps of three, and once
    # gone for 50 minutes (under the hour's gap). Still one occurrence, never an offender.
    history: list[Occurrence] = []
    start = NOW - timedelta(days=1)
    for i in range(1440):
        if i % 3 == 2 or 600 <= i < 650:
            continue
        history = fold([*history, *seen(xid(79), start + i * MINUTE)], CFG.gap_s)
    assert len(history) == 1
    (occ,) = history
    assert (occ.cause, occ.node, occ.gpu) == ("xid79", "gpu-0042", 3)
    assert occ.first_seen == start and occ.last_seen == start + 1438 * MINUTE
    assert offenders(history, NOW, CFG) == []
    faults = [xid(79)]
    assert escalate(faults, [], NOW) == faults
    assert verdict("gpu-0042", faults).level is VerdictLevel.DRAIN


def test_three_separate_xid_79_on_one_gpu_over_three_weeks_escalate_to_rma() -> None:
    when = [NOW - timedelta(days=21), NOW - timedelta(days=8, hours=3), NOW]
    history: list[Occurrence] = []
    for t in when:
        # Each lasts two hours of sweeps, then the GPU is reset and the node resumed.
        for m in range(0, 120, 1):
            history = fold([*history, *seen(xid(79), t - timedelta(minutes=120 - m))], CFG.gap_s)
    history = fold([*history, *seen(xid(79), NOW)], CFG.gap_s)
    assert len(history) == 3
    (off,) = offenders(history, NOW, CFG)
    assert (off.node, off.gpu, off.cause, off.escalate_to) == (
        "gpu-0042",
        3,
        "xid79",
        VerdictLevel.RMA,
    )
    assert off.line(NOW) == "3rd Xid 79 on GPU 3 in 30 days: 14 Nov, 26 Nov, today"
    faults = escalate([xid(79)], [off], NOW)
    v = verdict("gpu-0042", faults)
    assert v.level is VerdictLevel.RMA
    assert v.drain_reason == "meowbot: xid79 gpu3"
    assert faults[0].repeat == "3rd Xid 79 on GPU 3 in 30 days: 14 Nov, 26 Nov, today"
    assert faults[0].summary == xid(79).summary
    assert v.reasons == (f"{xid(79).summary}; repeat offender: {faults[0].repeat}",)
    # Its sweep alert says so where every alert renderer reads, and in a label.
    (alert,) = alerts_from_faults(faults, NOW)
    assert alert.summary.endswith("; repeat offender: " + faults[0].repeat)
    assert alert.labels[REPEAT_LABEL] == faults[0].repeat
    assert REPEAT_LABEL not in alerts_from_faults([xid(79)], NOW)[0].labels
    # Two are not enough; the third alone a month later is not either.
    assert offenders(history[:2], NOW, CFG) == []
    assert offenders(history, NOW + timedelta(days=22), CFG) == []


def test_faults_on_three_gpus_of_a_node_make_a_node_offender_only_when_configured() -> None:
    history = [
        occ
        for day, gpu in ((20, 1), (10, 4), (0, 6))
        for occ in seen(xid(79, gpu=gpu), NOW - timedelta(days=day))
    ]
    assert offenders(history, NOW, CFG) == []
    per_node = CFG.model_copy(
        update={
            "rules": (
                RepeatRule(causes=frozenset({"xid"}), per="node", escalate_to=VerdictLevel.DRAIN),
            )
        }
    )
    (off,) = offenders(history, NOW, per_node)
    assert (off.node, off.gpu, off.gpus, off.escalate_to) == (
        "gpu-0042",
        None,
        (1, 4, 6),
        VerdictLevel.DRAIN,
    )
    assert (
        off.line(NOW) == "3rd Xid 79 on the node (GPUs 1, 4, 6) in 30 days: 15 Nov, 25 Nov, today"
    )
    # The node rule escalates the fault of any GPU of the node.
    assert verdict("gpu-0042", escalate([xid(79, gpu=2)], [off], NOW)).level is VerdictLevel.DRAIN


def test_an_offender_with_no_fault_now_keeps_its_verdict() -> None:
    history = [o for d in (25, 12, 2) for o in seen(xid(48), NOW - timedelta(days=d))]
    found = offenders(history, NOW, CFG)
    faults = escalate([], found, NOW)
    (added,) = faults
    assert (added.kind, added.node, added.gpu, added.action) == (
        FaultKind.XID,
        "gpu-0042",
        3,
        Action.RMA,
    )
    assert added.summary.startswith("Repeat offender: 3rd Xid 48 on GPU 3 in 30 days:")
    assert drain_reason.for_fault(added) == "meowbot: xid48 gpu3"
    (alert,) = alerts_from_faults(faults, NOW)
    assert alert.summary == added.summary and alert.labels[REPEAT_LABEL] == added.repeat
    assert verdict("gpu-0042", faults).level is VerdictLevel.RMA
    # An added fault is not a sighting: the offender does not keep itself alive.
    assert sightings(faults, NOW) == []


def test_what_does_not_count() -> None:
    info = xid(13, severity=Severity.INFO, action=Action.REQUEUE, summary="Xid 13")
    assert sightings([info], NOW) == []  # an application's Xid says nothing of the GPU
    # A kind no rule names repeats without escalating: a hot GPU three times is watched.
    hot = Fault(
        kind=FaultKind.HIGH_TEMPERATURE,
        node="gpu-0042",
        gpu=3,
        since=NOW,
        severity=Severity.WARNING,
        action=Action.WATCH,
        summary="hot",
    )
    history = [o for d in (20, 10, 0) for o in sightings([hot], NOW - timedelta(days=d))]
    assert offenders(history, NOW, CFG) == []
    # Older than the window: the first of three ages out.
    old = [o for d in (40, 10, 0) for o in seen(xid(79), NOW - timedelta(days=d))]
    assert offenders(old, NOW, CFG) == []
    assert offenders(old, NOW, CFG.model_copy(update={"enabled": False})) == []


def test_three_unexpected_reboots_of_a_node_drain_it() -> None:
    reboot = Fault(
        kind=FaultKind.UNEXPECTED_REBOOT,
        node="gpu-0007",
        since=NOW,
        severity=Severity.WARNING,
        action=Action.WATCH,
        summary="rebooted",
    )
    history = [o for d in (20, 10, 0) for o in sightings([reboot], NOW - timedelta(days=d))]
    (off,) = offenders(history, NOW, CFG)
    assert off.escalate_to is VerdictLevel.DRAIN
    assert verdict("gpu-0007", escalate([reboot], [off], NOW)).level is VerdictLevel.DRAIN


def test_bounded_by_time_and_count() -> None:
    history = [o for d in range(0, 120, 2) for o in seen(xid(79), NOW - timedelta(days=d))]
    assert len(bounded(history, NOW, 90, 200)) == 46  # days 0..90
    kept = bounded(history, NOW, 90, 10)
    assert len(kept) == 10 and min(o.last_seen for o in kept) == NOW - timedelta(days=18)


def test_the_config_section() -> None:
    cfg = HealthConfig.model_validate(
        {"repeat": {"window_days": 14, "occurrences": 2, "escalate_to": "drain"}}
    )
    history = [o for d in (10, 0) for o in seen(xid(79), NOW - timedelta(days=d))]
    (off,) = offenders(history, NOW, cfg.repeat)
    assert off.escalate_to is VerdictLevel.DRAIN and off.line(NOW).startswith("2nd Xid 79")
    with pytest.raises(ValueError):
        HealthConfig.model_validate({"repeat": {"occurrences": 1}})
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
    ]


# The services with the history ------------------------------------------------------------------


async def _offender_triage() -> tuple[Triage, MemoryFaultHistory]:
    fleet = SimFleet(64, seed=21, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.XID, "gpu-0042", 3, NOW - timedelta(minutes=10), xid=79)
    history = MemoryFaultHistory()
    await history.save({}, NOW - timedelta(days=40))  # the sweeps have recorded for 40 days
    # Two earlier Xid 79s on the same GPU, as the sweeps recorded them; and one on another node
    # whose GPU is fine now.
    earlier = [
        Occurrence("xid79", FaultKind.XID, node, 3, t, t + timedelta(hours=2))
        for node in ("gpu-0042", "gpu-0050")
        for t in (NOW - timedelta(days=18), NOW - timedelta(days=9))
    ]
    third = NOW - timedelta(days=1)
    earlier.append(Occurrence("xid79", FaultKind.XID, "gpu-0050", 3, third, third))
    # A node retired since, its history left: no offender of the fleet's.
    retired = [
        Occurrence("xid79", FaultKind.XID, "gpu-0999", 1, t, t + timedelta(hours=1))
        for t in (NOW - timedelta(days=d) for d in (3, 2, 1))
    ]
    await history.save({"gpu-0042": earlier[:2], "gpu-0050": earlier[2:], "gpu-0999": retired}, NOW)
    assert [o.node for o in offenders(await history.occurrences(None), NOW, CFG)] == [
        "gpu-0050",
        "gpu-0999",
    ]
    triage = Triage(SimMetrics(fleet), SimInventory(fleet), None, HealthConfig(), history=history)
    return triage, history


async def test_every_surface_escalates_a_repeat_offender_alike() -> None:
    triage, history = await _offender_triage()
    nodes = list(triage.inventory.names())
    answers = await ask_every_way(triage, nodes, ["gpu-0042", "gpu-0050", "gpu-0001"])
    assert answers.disagreements() == []
    for surface in (ALONE, HOSTLIST, HW_FAULTS, SWEEP):
        assert answers.levels[surface]["gpu-0042"] is VerdictLevel.RMA, surface
        assert answers.levels[surface]["gpu-0050"] is VerdictLevel.RMA, surface
    assert answers.home[VerdictLevel.RMA] == 2
    # /node-health recorded today's Xid: the third occurrence, once however often asked.
    stored = await history.occurrences(["gpu-0042"])
    assert len(stored) == 3 and stored[-1].first_seen == NOW

    report = answers.reports["gpu-0042"]
    assert [o.line(NOW) for o in report.offenders] == [
        "3rd Xid 79 on GPU 3 in 30 days: 17 Nov, 26 Nov, today"
    ]
    text = str(render_node(report))
    assert (
        "Repeat offender" in text
        and "3rd Xid 79 on GPU 3 in 30 days: 17 Nov, 26 Nov, today" in text
    )
    assert report.verdict.drain_reason == "meowbot: xid79 gpu3"


async def test_hw_faults_repeat_lists_the_offenders_and_app_home_counts_them() -> None:
    triage, _ = await _offender_triage()
    report = await service.hw_faults(triage, "repeat")
    assert isinstance(report, FaultsReport) and report.repeat_only
    assert [(o.node, o.gpu) for o in report.offenders] == [("gpu-0042", 3), ("gpu-0050", 3)]
    text = str(render_faults(report))
    assert "Repeat offenders: the fleet" in text
    assert "`gpu-0050`: 3rd Xid 79 on GPU 3 in 30 days: 17 Nov, 26 Nov, yesterday (rma)" in text
    # Narrowed by node, and by a kind no offender has.
    one = await service.hw_faults(triage, "repeat gpu-0050")
    assert isinstance(one, FaultsReport) and [o.node for o in one.offenders] == ["gpu-0050"]
    none = await service.hw_faults(triage, "temperature repeat")
    assert isinstance(none, FaultsReport) and none.offenders == []
    assert "No GPU or node has had the same fault again" in str(render_faults(none))
    assert "history since 2026-10-" in str(render_faults(none))
    glance = await service.fleet_glance(triage)
    assert isinstance(glance, FleetGlance)
    assert any(
        "*2 repeat offenders* on 2 nodes (`gpu-[0042,0050]`)" in line
        for line in glance_lines(glance)
    )
    # By the recorded history alone (an Alertmanager alert's node): /hw-faults and App Home read
    # without recording, so gpu-0042 has two occurrences there, gpu-0050 three.
    known = await service.known_offenders(triage, ["gpu-0042", "gpu-0050", "gpu-0001"])
    assert [o.node for o in known] == ["gpu-0050"]
    health = await service.node_health(triage, "gpu-0001")
    assert isinstance(health, NodeReport) and health.offenders == []


def test_the_readme_shows_the_defaults() -> None:
    # The operator's guide moved out of the README: docs/node-health.md shows the section.
    page = Path(__file__).resolve().parents[2] / "docs/node-health.md"
    readme = page.read_text(encoding="utf-8")
    start = readme.index("  repeat:  ")
    shown = yaml.safe_load(readme[start : readme.index("```", start)])
    assert RepeatConfig.model_validate(shown["repeat"]) == RepeatConfig()
