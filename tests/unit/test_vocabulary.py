"""One vocabulary of fault kinds and one reading of node names (bot/triage/vocabulary.py), read
the same by every command and by plain words; and the answers' words that go with them: state
apart from advice, whose job runs on a node, times with their date, evidence in words, how far
back the fault history sees, and a suggestion as a button."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.ask.entities import KINDS, Vocabulary, extract
from bot.backends.fault_history import MemoryFaultHistory
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import Action, Evidence, Fault, FaultKind, Job, JobState, Severity
from bot.ports import SchedulerNode
from bot.precursors.ask import parse_why
from bot.render.blocks import base_action_id
from bot.render.picks import ASK_PICK_ACTION, read_pick
from bot.render.triage import render_faults, render_node, render_user_error
from bot.triage import service
from bot.triage.checks import CHECKS, HealthConfig
from bot.triage.service import FaultsReport, HistoryReach, NodeReport, Triage, UserError
from bot.triage.targets import BadInput, expand_nodes, parse_kinds
from bot.triage.vocabulary import PHRASES, kinds_named, resolve_names, unquote
from bot.triage.window import DataReach
from bot.words import when

NOW = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)
HISTORY_KINDS = ("unexpected_reboot", "xid", "ib_link_down")
R = frozenset({FaultKind.UNEXPECTED_REBOOT})


@pytest.mark.parametrize(
    "word", ["reboot", "reboots", "REBOOTS", "rebooting", "unexpected_reboot", "Unexpected-Reboot",
             "unexpected reboot", "'reboot'"]
)  # fmt: skip
def test_every_way_of_saying_reboot_names_the_unexpected_reboots(word: str) -> None:
    assert kinds_named(word) == R
    assert parse_kinds(word) == R  # /hw-faults reads the same words
    assert parse_why(f"{word.replace(' ', '_')} --since 2d", HISTORY_KINDS).kind == (
        "unexpected_reboot"
    )


def test_families_and_codes_and_what_names_nothing() -> None:
    assert kinds_named("nvlink") == {FaultKind.NVLINK_CRC, FaultKind.NVLINK_REPLAY}
    assert kinds_named("xids") == {FaultKind.XID}
    assert kinds_named("link down") == {FaultKind.IB_LINK_DOWN}
    assert kinds_named("ib") == {c.kind for c in CHECKS if "ib" in c.filters}
    for node in ("gpu-0042", "gpu42", "gpu-[0001-0004]"):
        assert kinds_named(node) is None
    # Every check's code, words and filter words are in the one vocabulary.
    for c in CHECKS:
        assert kinds_named(c.kind.value) == {c.kind}
        assert c.kind in (kinds_named(c.words) or set())


def test_plain_words_read_the_same_vocabulary() -> None:
    assert KINDS == PHRASES
    vocab = Vocabulary.build([f"gpu-{i:04d}" for i in range(1, 65)])
    said = extract("any reboots on gpu42 last night?", vocab)
    assert said.kind is not None and kinds_named(said.kind) == R
    assert list(said.nodes) == ["gpu-0042"]
    assert resolve_names(["gpu42"], vocab.nodes) == ["gpu-0042"]


def test_why_takes_a_family_word_and_says_why_it_cannot() -> None:
    assert parse_why("ib", HISTORY_KINDS).kind == "ib_link_down"
    assert parse_why("xids gpu-0042", HISTORY_KINDS).nodes == ("gpu-0042",)
    listed = parse_why('reboots "gpu-0042", gpu-0043 --since 2d', HISTORY_KINDS)
    assert listed.nodes == ("gpu-0042", "gpu-0043") and listed.window_s == 2 * 86400
    with pytest.raises(BadInput, match="names `nvlink_crc`, `nvlink_replay`, whose history"):
        parse_why("nvlink", HISTORY_KINDS)
    assert parse_why("nvlink", (*HISTORY_KINDS, "nvlink_crc")).kind == "nvlink_crc"
    with pytest.raises(BadInput, match=r"several kinds .*`nvlink_crc`, `nvlink_replay`; name"):
        parse_why("nvlink", (*HISTORY_KINDS, "nvlink_crc", "nvlink_replay"))
    with pytest.raises(BadInput, match="cannot look back at `fizz` faults"):
        parse_why("fizz", HISTORY_KINDS)


def test_node_names_quoted_in_any_case_loosely_or_listed() -> None:
    known = frozenset(f"gpu-{i:04d}" for i in range(1, 65))
    assert unquote('"gpu-0042", \u2018gpu-0043\u2019') == "gpu-0042,gpu-0043"
    assert expand_nodes('"gpu-0042"') == ["gpu-0042"]
    assert expand_nodes("gpu-0042, gpu-0043") == ["gpu-0042", "gpu-0043"]
    typed = ["gpu42", "GPU-0042", "gpu-042", "Gpu_43", "gpu-0099"]
    assert resolve_names(typed, known) == ["gpu-0042", "gpu-0043", "gpu-0099"]


@pytest.fixture
def triage() -> Triage:
    fleet = SimFleet(64, seed=21, now=NOW, fault_rate=0.0)
    return Triage(SimMetrics(fleet), SimInventory(fleet), None, HealthConfig())


@pytest.mark.parametrize("typed", ["gpu42", "GPU-0042", '"gpu-0042"', "\u201cgpu-0042\u201d"])
async def test_node_health_reads_every_form_of_a_name(triage: Triage, typed: str) -> None:
    report = await service.node_health(triage, typed)
    assert isinstance(report, NodeReport) and report.node == "gpu-0042"


async def test_hw_faults_reads_a_comma_list_and_the_kinds_words(triage: Triage) -> None:
    report = await service.hw_faults(triage, "reboots GPU-0042, gpu43 --since 2d")
    assert isinstance(report, FaultsReport)
    assert report.scope == "2 nodes (unexpected reboot)"


async def test_a_suggestion_is_a_button_that_runs_the_command(triage: Triage) -> None:
    error = await service.node_health(triage, "gpu-00x2")
    assert isinstance(error, UserError) and "Did you mean" in error.sentence
    msg = render_user_error(error)
    buttons = [el for b in msg.blocks if b["type"] == "actions" for el in b["elements"]]
    assert len(buttons) == len(error.retries) > 0
    for b, (label, command, text) in zip(buttons, error.retries, strict=True):
        assert base_action_id(b["action_id"]) == ASK_PICK_ACTION
        assert read_pick(b["value"]) == ("/node-health", label) == (command, text)
    # /hw-faults keeps the rest of what was typed.
    faults = await service.hw_faults(triage, "gpu-00x2 reboot --since 2d")
    assert isinstance(faults, UserError)
    assert all(t == f"{n} reboot --since 2d" for n, _, t in faults.retries) and faults.retries
    # A plain refusal stays a sentence.
    assert "actions" not in json.dumps(render_user_error(UserError("No.")).blocks)


def _report(**kw: object) -> NodeReport:
    fleet = SimFleet(8, seed=3, now=NOW, fault_rate=0.0)
    inv = SimInventory(fleet)
    base = dict(
        node="gpu-0001",
        verdict=service.verdicts(["gpu-0001"], [])["gpu-0001"],
        faults=[],
        not_run={},
        info=inv.node("gpu-0001") if inv.names() else None,
        scheduler=SchedulerNode(name="gpu-0001", state="allocated"),
        scheduler_note=None,
        at=NOW,
        window_s=3600.0,
    )
    base.update(kw)
    return NodeReport(**base)  # type: ignore[arg-type]


def test_a_node_answer_says_state_apart_from_advice_and_whose_job() -> None:
    job = Job(
        job_id="4100123", name="llm-pretrain", user="alice", state=JobState.RUNNING,
        nodes=("gpu-0001",), start=NOW - timedelta(hours=3), partition="gpu", gpus_per_node=8,
    )  # fmt: skip
    text = json.dumps(render_node(_report(jobs=[job])).blocks, ensure_ascii=False)
    assert "state: in service · advice: *healthy*" in text
    assert "allocated; running job `4100123` (llm-pretrain, alice)" in text
    assert "Checked 2026-12-06 05:00 UTC" in text
    drained = SchedulerNode(name="gpu-0001", state="idle", flags=("DRAIN",), reason="bad DIMM")
    text = json.dumps(render_node(_report(scheduler=drained)).blocks, ensure_ascii=False)
    assert "state: out of service · advice:" in text
    text = json.dumps(render_node(_report(scheduler=None)).blocks, ensure_ascii=False)
    assert "state: not known · advice:" in text


def test_a_reboot_is_shown_in_words() -> None:
    booted = NOW - timedelta(minutes=10)
    reboot = Fault(
        kind=FaultKind.UNEXPECTED_REBOOT, node="gpu-0001", severity=Severity.WARNING,
        action=Action.WATCH,
        summary="the node rebooted in the last hour (boot time moved)", since=NOW,
        evidence=(Evidence(series="node_boot_time_seconds", labels={}, value=booted.timestamp()),),
    )  # fmt: skip
    text = json.dumps(render_node(_report(faults=[reboot])).blocks, ensure_ascii=False)
    assert "rebooted in the last hour (boot time moved)" in text
    assert "booted 2026-12-06 04:50 UTC" in text
    assert "node_boot_time_seconds" not in text


async def test_a_reboot_carries_the_boot_time_it_moved_to(triage: Triage) -> None:
    """The simulated fleet's check holds the new boot time, as Prometheus' does (tested
    against the real one in tests/integration/test_prometheus.py)."""
    fleet = triage.metrics.fleet  # type: ignore[union-attr]
    booted = NOW - timedelta(minutes=20)
    fleet.inject(FaultKind.UNEXPECTED_REBOOT, "gpu-0007", None, booted)
    report = await service.node_health(triage, "gpu-0007")
    assert isinstance(report, NodeReport)
    (fault,) = [f for f in report.faults if f.kind is FaultKind.UNEXPECTED_REBOOT]
    assert fault.evidence[0].value == booted.timestamp()
    text = json.dumps(render_node(report).blocks, ensure_ascii=False)
    assert f"booted {when(booted)}" in text


def test_times_come_with_their_date() -> None:
    assert when(NOW) == "2026-12-06 05:00 UTC"
    assert when(NOW - timedelta(hours=1), NOW) == "2026-12-06 04:00 UTC, today"
    assert when(NOW - timedelta(days=1), NOW) == "2026-12-05 05:00 UTC, yesterday"
    assert when(NOW - timedelta(days=3), NOW) == "2026-12-03 05:00 UTC"


def _faults(reach: HistoryReach | None) -> FaultsReport:
    return FaultsReport(
        groups=[], counts={}, repeat_gpus=[], not_run={}, window_s=3600.0, scope="the fleet",
        at=NOW, verdict_window_s=3600.0, repeat_only=True, history=reach,
    )  # fmt: skip


def test_a_window_the_metrics_fall_short_of_says_how_far_back_they_see() -> None:
    week = dataclasses.replace(_faults(None), window_s=7 * 86400.0, repeat_only=False)
    young = DataReach("Prometheus", NOW - timedelta(minutes=50))
    text = json.dumps(render_faults(dataclasses.replace(week, reach=young)).blocks)
    assert "Prometheus holds data since 2026-12-06 04:10 UTC (asked: 7 days)." in text
    # Reaching back, nothing more is said.
    assert "holds data" not in json.dumps(render_faults(week).blocks)


def test_an_empty_young_history_is_no_finding() -> None:
    young = HistoryReach(NOW - timedelta(minutes=50), keep_days=90, rule_days=30)
    text = json.dumps(render_faults(_faults(young)).blocks)
    assert "too short to tell" in text and "since 2026-12-06 04:10 UTC, today" in text
    assert "again and again" not in text
    old = HistoryReach(NOW - timedelta(days=40), keep_days=90, rule_days=30)
    text = json.dumps(render_faults(_faults(old)).blocks)
    assert "No GPU or node has had the same fault again and again" in text
    assert "history since 2026-10-27 05:00 UTC, kept 90 days" in text
    none = json.dumps(render_faults(_faults(HistoryReach(None, 90, 30))).blocks)
    assert "nothing yet" in none and "no history recorded yet" in none


async def test_the_memory_history_begins_with_its_first_record() -> None:
    history = MemoryFaultHistory()
    assert await history.began() is None
    await history.save({}, NOW)
    await history.save({}, NOW + timedelta(hours=1))
    assert await history.began() == NOW
    fleet = SimFleet(8, seed=3, now=NOW, fault_rate=0.0)
    triage = Triage(SimMetrics(fleet), SimInventory(fleet), None, HealthConfig(), history=history)
    reach = await service.history_reach(triage, NOW + timedelta(days=100))
    assert reach is not None and reach.since == NOW + timedelta(days=10)  # kept 90 days


def test_past_events_join_the_window_s_faults_once_a_node() -> None:
    from bot.precursors.models import Event

    present = Fault(
        kind=FaultKind.UNEXPECTED_REBOOT, node="gpu-0001", severity=Severity.WARNING,
        action=Action.WATCH, summary="the node rebooted", since=NOW,
    )  # fmt: skip
    past = [
        Event("unexpected_reboot", "gpu-0001", NOW - timedelta(days=1)),  # found already
        Event("unexpected_reboot", "gpu-0002", NOW - timedelta(days=3)),
        Event("unexpected_reboot", "gpu-0002", NOW - timedelta(hours=2)),
        Event("xid", "gpu-0003", NOW - timedelta(days=2)),
        Event("no_such_kind", "gpu-0004", NOW),
    ]
    faults = service.with_past([present], past, NOW)
    assert [(f.node, f.kind.value) for f in faults] == [
        ("gpu-0001", "unexpected_reboot"),
        ("gpu-0002", "unexpected_reboot"),
        ("gpu-0003", "xid"),
    ]
    assert faults[1].summary == (
        "unexpected reboot at each of 2026-12-03 05:00 UTC, 2026-12-06 03:00 UTC, today "
        "(from the event history)"
    )
    assert faults[1].since == NOW - timedelta(days=3)
