"""An alert group's per-node buttons follow the scheduler: Drain for a node in service, Resume
only for one meowbot took out, neither (and who holds it) for one an operator took out, and
no Drain or Resume at all without a scheduler."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.alerts.standing import (
    NO_SCHEDULER,
    NodeStanding,
    Standing,
    Standings,
    standing_of,
    standings,
)
from bot.models import Severity
from bot.ports import SchedulerNode
from bot.render.alerts import ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION, render_group, split_value
from tests.unit.test_render_alerts import CFG, NOW, elements, leaf_group, member, valid


def per_node(stand: Standings, severity: Severity = Severity.WARNING) -> list[tuple[str, str]]:
    group = leaf_group([member(i, severity=severity) for i in range(3)])
    msg = valid(render_group(group, CFG, NOW, stand))
    return [
        (e["action_id"].partition("#")[0], split_value(e["value"])[1])
        for e in elements(msg)
        if e["action_id"].startswith((ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION))
    ]


def text(stand: Standings) -> str:
    group = leaf_group([member(i) for i in range(3)])
    return json.dumps(valid(render_group(group, CFG, NOW, stand)).blocks)


IN = NodeStanding(Standing.IN_SERVICE)
OURS = NodeStanding(Standing.OURS, "drained", "meowbot: ib_link_down by @ana")
HELD = NodeStanding(Standing.HELD, "drained", "rack maintenance", "root")


def test_each_node_gets_the_button_its_state_gives() -> None:
    stand = Standings("Slurm", {"n000": IN, "n001": OURS, "n002": HELD})
    assert per_node(stand) == [(ALERT_DRAIN_ACTION, "n000"), (ALERT_RESUME_ACTION, "n001")]
    said = text(stand)
    # The operator's node: neither button, and the message says who holds it.
    assert "`n002` drained by root in Slurm" in said and "rack maintenance" in said
    assert "no Drain or Resume here" in said
    assert "`n001` drained by meowbot in Slurm" in said
    # A critical group's node in service is drained now (with a confirmation).
    crit = per_node(Standings("Slurm", {"n000": IN, "n001": IN, "n002": IN}), Severity.CRITICAL)
    assert crit == [(ALERT_DRAIN_ACTION, f"n00{i}") for i in range(3)]


def test_without_a_scheduler_there_is_no_drain_or_resume() -> None:
    assert per_node(NO_SCHEDULER) == []
    assert "No scheduler is configured" in text(NO_SCHEDULER)


def test_a_scheduler_that_did_not_answer_gets_drain_never_resume() -> None:
    unknown = Standings("Slurm", None)
    assert per_node(unknown) == [(ALERT_DRAIN_ACTION, f"n00{i}") for i in range(3)]
    assert "Slurm did not answer" in text(unknown)


def test_a_node_the_scheduler_does_not_list_gets_no_button() -> None:
    stand = standings("Slurm", {"n000": SchedulerNode(name="n000", state="idle")}, ["n000"])
    assert per_node(stand) == [(ALERT_DRAIN_ACTION, "n000")]
    assert "`n001` not a node Slurm lists" in text(stand)


def test_standing_reads_the_reason_not_only_the_state() -> None:
    at = datetime(2026, 12, 6, tzinfo=UTC)
    ours = SchedulerNode(name="a", state="idle", flags=("DRAIN",), reason="meowbot: xid79 by @ana")
    assert standing_of(ours).standing is Standing.OURS
    down_ours = SchedulerNode(name="a", state="down", reason="meowbot: xid79 by @ana")
    assert standing_of(down_ours) == NodeStanding(
        Standing.OURS, "down", "meowbot: xid79 by @ana", ""
    )
    by_hand = SchedulerNode(
        name="a",
        state="idle",
        flags=("DRAIN",),
        reason="maint",
        reason_set_by="root",
        reason_changed_at=at,
    )
    assert standing_of(by_hand) == NodeStanding(Standing.HELD, "drained", "maint", "root")
    # An operator's taint on a node still scheduling: theirs, not a node to drain over it.
    tainted = SchedulerNode(name="a", state="idle", reason="taints: gpu=bad:NoSchedule")
    assert standing_of(tainted).standing is Standing.HELD
    not_ready = SchedulerNode(name="a", state="down")
    assert standing_of(not_ready) == NodeStanding(Standing.HELD, "down", "", "")
    assert standing_of(SchedulerNode(name="a", state="allocated")).standing is Standing.IN_SERVICE
