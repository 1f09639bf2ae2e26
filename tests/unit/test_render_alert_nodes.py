"""An alert group's per-node buttons follow the scheduler: Drain for a node in service, Resume
for one out of scheduling, both only while the scheduler cannot say."""

from __future__ import annotations

from bot.render.alerts import ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION, render_group, split_value
from tests.unit.test_render_alerts import CFG, NOW, elements, leaf_group, member, valid


def per_node(out_of_service: frozenset[str] | None) -> list[tuple[str, str]]:
    group = leaf_group([member(i) for i in range(3)])
    msg = valid(render_group(group, CFG, NOW, out_of_service))
    return [
        (e["action_id"].partition("#")[0], split_value(e["value"])[1])
        for e in elements(msg)
        if e["action_id"].startswith((ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION))
    ]


def test_a_drained_node_offers_resume_and_one_in_service_drain() -> None:
    assert per_node(frozenset({"n001"})) == [
        (ALERT_DRAIN_ACTION, "n000"),
        (ALERT_RESUME_ACTION, "n001"),
        (ALERT_DRAIN_ACTION, "n002"),
    ]
    assert per_node(frozenset()) == [(ALERT_DRAIN_ACTION, f"n00{i}") for i in range(3)]
    # The scheduler could not say: both, and each press reads the state itself.
    unknown = per_node(None)
    assert unknown.count((ALERT_DRAIN_ACTION, "n001")) == 1
    assert unknown.count((ALERT_RESUME_ACTION, "n001")) == 1
