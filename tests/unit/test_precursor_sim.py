"""/hw-faults why over the simulated week: the hidden precursor is found and said with its
counts, threshold and lead; where none is hidden nothing is claimed; the world is the same
whenever it is made; the answer, its detail and its chart render."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.hidden_precursors import HiddenPrecursor, PrecursorWorld, fleet_world
from bot.backends.sim.precursor_history import SimPrecursorHistory
from bot.precursors.config import PrecursorsConfig
from bot.precursors.models import Event, PrecursorReport
from bot.precursors.service import find_precursors, merge_events
from bot.render.precursor_chart import _figure, precursor_chart
from bot.render.precursors import render_answer, render_detail

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NAMES = tuple(f"gpu-{i:04d}" for i in range(256))


def _find(
    world: PrecursorWorld, kind: str, nodes: tuple[str, ...] | None = None
) -> PrecursorReport:
    return asyncio.run(
        find_precursors(
            SimPrecursorHistory(world),
            kind,
            nodes=nodes,
            fleet=world.names,
            start=world.start,
            end=world.end,
        )
    )


def _text(report: PrecursorReport) -> str:
    return "\n".join(
        str(b) for m in (render_answer(report), render_detail(report)) for b in m.blocks
    )


def test_the_simulated_fleets_reboots_follow_its_nic_and_the_answer_says_so() -> None:
    fleet = SimFleet(256, seed=1, now=NOW, fault_rate=0.0)
    report = _find(fleet_world(fleet), "unexpected_reboot")
    top = report.leading
    assert top is not None and top.name == "network transmit (eth0)"
    assert top.threshold is not None and 30 < top.threshold < 38
    assert top.preceded >= 4 and len(report.events) == 9
    assert all(0 < lead <= 600 for lead in top.leads_s)
    text = _text(report)
    assert f"*{top.preceded} of {top.events}* unexpected reboots followed" in text
    assert "alert: UnexpectedRebootPrecursor" in text
    assert "No difference:" in text and "GPU temperature" in text
    # The chart: one line an event, the threshold drawn.
    labels = [t.get_label() for t in _figure(report).axes[0].get_lines()]
    assert any(label.startswith("threshold 3") for label in labels)
    assert precursor_chart(report)[:8] == b"\x89PNG\r\n\x1a\n"


def test_kinds_with_nothing_before_them_claim_nothing() -> None:
    world = fleet_world(SimFleet(256, seed=1, now=NOW, fault_rate=0.0))
    for kind in ("xid", "ib_link_down"):
        report = _find(world, kind)
        assert report.events and report.leading is None
        assert "No candidate separates" in _text(report)


def test_few_events_say_the_evidence_is_thin_and_one_says_it_is_not_evidence() -> None:
    world = PrecursorWorld(
        NAMES, 5, NOW, events_per_kind={"xid": 3}, hidden=HiddenPrecursor(kind="xid", share=1.0)
    )
    report = _find(world, "xid")
    assert report.thin and report.leading is None
    assert "The evidence is thin" in _text(report)
    # Nor is a candidate said to make no difference on so few.
    assert "Not told apart with so few events:" in _text(report)
    assert "No difference:" not in _text(report)
    one = _find(world, "xid", nodes=(world.events[0].node,))
    assert len(one.events) == 1 and "One event is not evidence" in _text(one)


def test_no_events_is_said_plainly() -> None:
    world = PrecursorWorld(NAMES, 5, NOW, events_per_kind={})
    report = _find(world, "unexpected_reboot")
    assert not report.events and not report.ranked
    assert "No unexpected reboots between" in _text(report)


def test_a_falling_clock_is_found_and_the_world_is_the_same_each_time() -> None:
    def world() -> PrecursorWorld:
        return PrecursorWorld(
            NAMES,
            11,
            NOW,
            events_per_kind={"unexpected_reboot": 10},
            hidden=HiddenPrecursor(candidate="SM clock", share=0.9),
        )

    a, b = world(), world()
    assert a.events == b.events
    assert (a.series("SM clock", "gpu-0003") == b.series("SM clock", "gpu-0003")).all()
    report = _find(a, "unexpected_reboot")
    assert report.leading is not None and report.leading.name == "SM clock"
    assert report.leading.threshold is not None and report.leading.threshold < 1700


def test_a_configured_candidate_the_simulator_cannot_show_has_no_data() -> None:
    cfg = PrecursorsConfig.model_validate(
        {"add": [{"name": "NVMe write", "query": "rate(x{$nodes}[2m])", "unit": "GB/s"}]}
    )
    world = PrecursorWorld(NAMES, 2, NOW, events_per_kind={"xid": 5})
    report = asyncio.run(
        find_precursors(
            SimPrecursorHistory(world),
            "xid",
            nodes=None,
            fleet=NAMES,
            start=NOW - timedelta(days=7),
            end=NOW,
            cfg=cfg,
        )
    )
    assert report.missing == ("NVMe write",)
    assert "No data: NVMe write" in _text(report)


def test_the_sweeps_recorded_faults_are_events_too_and_one_reboot_counts_once() -> None:
    # ECC double-bit errors: no metric history finds them over days, the sweep records them.
    rng = random.Random(3)
    recorded = [
        Event("ecc_dbe", NAMES[rng.randrange(256)], NOW - timedelta(hours=rng.uniform(2, 160)))
        for _ in range(10)
    ]
    world = PrecursorWorld(
        NAMES,
        8,
        NOW,
        events_per_kind={},
        extra_events=recorded,
        hidden=HiddenPrecursor(kind="ecc_dbe", candidate="GPU temperature", share=0.9),
    )
    history = SimPrecursorHistory(world)
    assert "ecc_dbe" not in history.kinds()
    report = asyncio.run(
        find_precursors(
            history,
            "ecc_dbe",
            nodes=None,
            fleet=NAMES,
            start=world.start,
            end=world.end,
            recorded=recorded,
        )
    )
    assert len(report.events) == 10
    assert report.leading is not None and report.leading.name == "GPU temperature"
    # The sweep sees a reboot a little after its boot time: the same event, counted once.
    reboot = Event("unexpected_reboot", "gpu-0001", NOW - timedelta(hours=5))
    later = Event("unexpected_reboot", "gpu-0001", reboot.at + timedelta(minutes=3))
    other = Event("unexpected_reboot", "gpu-0001", reboot.at + timedelta(hours=2))
    assert merge_events([reboot], [later, other]) == [reboot, other]


def test_a_window_longer_than_the_metrics_says_where_they_begin() -> None:
    """Two days of metrics (and the day before them) asked over a week: the answer says
    where they begin; over the days they hold, nothing more is said."""
    world = PrecursorWorld(NAMES, 5, NOW, days=2.0, events_per_kind={"xid": 3})
    history = SimPrecursorHistory(world)
    week = asyncio.run(
        find_precursors(
            history, "xid", nodes=None, fleet=NAMES, start=NOW - timedelta(days=7), end=NOW
        )
    )
    assert week.reach is not None and week.reach.since == NOW - timedelta(days=3)
    assert "The simulated fleet holds data since 2026-11-27 12:00 UTC (asked: 7 days)." in (
        _text(week)
    )
    report = _find(world, "xid")
    assert report.reach is None and "holds data" not in _text(report)
