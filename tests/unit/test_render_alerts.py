"""Alert messages: what they say, the buttons they carry, escaping, and Slack's limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.alerts.config import AlertsConfig
from bot.alerts.lines import audit_line, repeat_line
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, Claim, GroupKey, Scope
from bot.alerts.pages import IN_MESSAGE_NODES
from bot.alerts.standing import NodeStanding, Standing, Standings
from bot.models import Severity
from bot.mrkdwn import WORD_JOINER
from bot.render.alerts import (
    ALERT_ACK_ACTION,
    ALERT_DRAIN_ACTION,
    ALERT_RESUME_ACTION,
    ALERT_RUNBOOK_ACTION,
    ALERT_SILENCE_ACTION,
    render_group,
    render_storm,
    split_value,
)
from bot.render.blocks import base_action_id
from bot.shell.emulator import validate_blocks
from bot.slack_message import SlackMessage

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=25)
CFG = AlertsConfig(default_channel="C", runbooks={"ib_link_down": "https://wiki/ib"})


def member(
    i: int,
    *,
    status: AlertStatus = AlertStatus.FIRING,
    summary: str = "port down",
    severity: Severity = Severity.WARNING,
) -> Alert:
    return Alert(
        fingerprint=f"fp{i}",
        source=AlertSource.ALERTMANAGER,
        status=status,
        cause="ib_link_down",
        node=f"n{i:03d}",
        severity=severity,
        summary=summary,
        starts_at=T0,
        ends_at=NOW if status is AlertStatus.RESOLVED else None,
    )


def leaf_group(alerts: list[Alert], **extra: Any) -> AlertGroup:
    key = GroupKey(cause="ib_link_down", scope=Scope.LEAF_SWITCH, scope_value="leaf-07")
    return AlertGroup(key=key, alerts=tuple(alerts), opened_at=T0, channel="C", **extra)


def serving(group: AlertGroup, scheduler: str = "Slurm") -> Standings:
    """Every node of `group` in service in the scheduler, as the notifier would read them."""
    return Standings(scheduler, {n: NodeStanding(Standing.IN_SERVICE) for n in group.nodes})


def elements(msg: SlackMessage) -> list[dict[str, Any]]:
    return [e for b in msg.blocks if b["type"] == "actions" for e in b["elements"]]


def text_of(msg: SlackMessage) -> str:
    return repr(msg.blocks)


def valid(msg: SlackMessage) -> SlackMessage:
    assert validate_blocks(msg.blocks) == []
    return msg


def test_group_header_says_cause_scope_and_count() -> None:
    msg = valid(render_group(leaf_group([member(i) for i in range(32)]), CFG, NOW))
    header = msg.blocks[0]
    assert header["type"] == "header"
    assert header["text"]["text"] == (
        ":large_orange_circle: InfiniBand link down (ib_link_down) on 32 nodes under leaf-07"
    )
    # Past a few nodes the message names them as a hostlist; their lines are in the thread.
    assert "`n[000-031]`" in text_of(msg) and "port down" not in text_of(msg)
    assert "2026-12-03 12:00 UTC (25 min ago)" in text_of(msg)


def test_buttons_carry_the_group_id_and_per_node_values() -> None:
    group = leaf_group([member(i) for i in range(IN_MESSAGE_NODES)])
    els = elements(valid(render_group(group, CFG, NOW, serving(group))))
    by_action: dict[str, list[dict[str, Any]]] = {}
    for e in els:
        by_action.setdefault(base_action_id(e["action_id"]), []).append(e)
    assert by_action[ALERT_ACK_ACTION][0]["value"] == group.key.id
    drains = by_action[ALERT_DRAIN_ACTION]
    assert len(drains) == IN_MESSAGE_NODES
    assert next(split_value(d["value"]) for d in drains) == (group.key, "n000")
    assert "after jobs" in drains[0]["text"]["text"]  # warning: a drain that waits for jobs
    assert ALERT_RESUME_ACTION not in by_action  # nodes in service: nothing to resume
    runbook = by_action[ALERT_RUNBOOK_ACTION][0]
    assert runbook["url"] == "https://wiki/ib" and runbook["value"] == group.key.id
    silence = by_action[ALERT_SILENCE_ACTION][0]
    assert silence["type"] == "static_select"
    values = [o["value"] for o in silence["options"]]
    assert values == [f"{group.key.id}|{s}" for s in (3600, 14400, 86400)] + [
        f"{group.key.id}|custom"
    ]
    assert [o["text"]["text"] for o in silence["options"]] == ["1 h", "4 h", "1 d", "custom…"]
    # One node more: the message keeps Acknowledge, Silence and Runbook; each node's button
    # is beside its line in the thread.
    bigger = leaf_group([member(i) for i in range(IN_MESSAGE_NODES + 1)])
    msg = valid(render_group(bigger, CFG, NOW, serving(bigger)))
    assert {base_action_id(e["action_id"]) for e in elements(msg)} == {
        ALERT_ACK_ACTION,
        ALERT_SILENCE_ACTION,
        ALERT_RUNBOOK_ACTION,
    }
    assert "Drain button are in the thread" in text_of(msg)


def test_critical_group_offers_drain_now_with_a_confirmation() -> None:
    group = leaf_group([member(0, severity=Severity.CRITICAL)])
    (drain,) = [
        e
        for e in elements(valid(render_group(group, CFG, NOW, serving(group))))
        if e["action_id"].startswith(ALERT_DRAIN_ACTION)
    ]
    assert (
        drain["style"] == "danger"
        and "confirm" in drain
        and "after jobs" not in drain["text"]["text"]
    )


def test_claim_silence_and_resolved_members() -> None:
    group = leaf_group(
        [member(0), member(1, status=AlertStatus.RESOLVED)],
        claim=Claim(user_id="U0ANA", user_name="ana", at=T0),
        silenced_until=NOW + timedelta(hours=4),
    )
    text = text_of(valid(render_group(group, CFG, NOW)))
    assert "<@U0ANA> is on it" in text
    assert "Silenced until 2026-12-03 16:25 UTC" in text
    assert "~`n001`~ resolved" in text
    assert text.index("`n000`") < text.index("`n001`")  # firing first


def test_resolved_group_is_marked_and_has_no_buttons() -> None:
    group = leaf_group([member(i, status=AlertStatus.RESOLVED) for i in range(3)])
    msg = valid(render_group(group, CFG, NOW))
    assert msg.blocks[0]["text"]["text"].startswith(
        ":white_check_mark: RESOLVED: InfiniBand link down (ib_link_down)"
    )
    assert elements(msg) == []


def test_annotations_cannot_ping_anyone() -> None:
    nasty = "<!channel> @here <@U999> <https://evil|click> & *bold*"
    group = leaf_group([member(0, summary=nasty)])
    msg = valid(render_group(group, CFG, NOW))
    text = text_of(msg)
    assert "<!channel>" not in text and "<@U999>" not in text and "<https://evil" not in text
    assert "@here" not in text  # a word joiner follows the "@"
    assert "&lt;!channel&gt;" in text
    line = repeat_line(member(0, summary=nasty))
    assert "<!channel>" not in line and "@here" not in line
    audit = audit_line("here", "drained", "<!everyone> n001")
    assert "<!everyone>" not in audit and "@here" not in audit


def test_huge_groups_and_long_labels_stay_within_limits() -> None:
    alerts = [member(i, summary="x" * 5000 + " @channel") for i in range(1000)]
    group = leaf_group(alerts)
    msg = valid(render_group(group, CFG, NOW))
    assert len(msg.blocks) <= 50
    long_cause = "c" * 100
    key = GroupKey(cause=long_cause, scope=Scope.NODE, scope_value="n" * 30)
    odd = AlertGroup(
        key=key,
        alerts=tuple(a.model_copy(update={"cause": long_cause}) for a in alerts[:3]),
        opened_at=T0,
    )
    valid(render_group(odd, AlertsConfig(), NOW))


def test_storm_summary_counts_events_worst_first_and_names_every_node() -> None:
    groups = []
    for i in range(60):
        cause = f"cause_{i:02d}"
        sev = Severity.CRITICAL if i == 59 else Severity.WARNING
        key = GroupKey(cause=cause, scope=Scope.EVENT)
        alerts = tuple(
            member(3 * i + j, severity=sev).model_copy(update={"cause": cause}) for j in range(3)
        )
        groups.append(AlertGroup(key=key, alerts=alerts, opened_at=T0, channel="C"))
    msg = valid(render_storm(groups, NOW))
    text = text_of(msg)
    assert msg.blocks[0]["text"]["text"] == ":rotating_light: Alert storm: 60 events on 180 nodes"
    assert "60 causes, 180 firing alerts" in text
    assert text.index("cause_59") < text.index("cause_00")  # the critical one first
    assert "`cause_07` on 3 nodes: `n[021-023]`" in text  # every event names its nodes
    assert "more" not in text
    over = valid(render_storm([], NOW))
    assert "storm is over" in text_of(over)


def test_storm_summary_links_the_events_posted_on_their_own_and_says_so() -> None:
    def event(cause: str, first: int, count: int, ts: str | None = None) -> AlertGroup:
        alerts = tuple(
            member(first + j, severity=Severity.CRITICAL).model_copy(update={"cause": cause})
            for j in range(count)
        )
        key = GroupKey(cause=cause, scope=Scope.EVENT)
        return AlertGroup(key=key, alerts=alerts, opened_at=T0, channel="C0A", ts=ts)

    big = event("xid_79", 100, 200, ts="1764900000.000100")
    unlinked = event("xid_48", 400, 12, ts="1764900001.000100")
    small = [event(f"rule{k}", 10 * k, 2) for k in range(5)]
    url = "https://meowbot-test.slack.com/archives/C0A/p1764900000000100"
    msg = valid(render_storm([*small, unlinked, big], NOW, {big.key.id: url}))
    text = text_of(msg)
    assert msg.blocks[0]["text"]["text"] == ":rotating_light: Alert storm: 7 events on 222 nodes"
    assert f"on 200 nodes: `n[100-299]` · <{url}|its message>" in text
    assert "on 12 nodes: `n[400-411]` · posted on its own in this channel" in text
    assert "`rule3` on 2 nodes: `n[030-031]` ·" not in text  # waits for the storm to pass
    assert "`rule3` on 2 nodes: `n[030-031]`" in text
    assert "message linked has its per-node detail and buttons there; the others are posted" in text
    # none posted on its own: the context line says all wait for the storm to pass
    alone = text_of(valid(render_storm(small, NOW, {})))
    assert "Each event is posted on its own" in alone and "linked" not in alone


def test_audit_and_repeat_lines() -> None:
    assert (
        audit_line("ana", "silenced for 4 h", "until 16:00 UTC")
        == f"@{WORD_JOINER}ana silenced for 4 h: until 16:00 UTC"
    )
    assert repeat_line(member(7)) == ":repeat: `n007` again: port down"


def test_storm_summary_and_headers_name_fault_kinds_in_words() -> None:
    from bot.render.alerts import cause_words

    key = GroupKey(cause="ecc_dbe", scope=Scope.NODE, scope_value="n1")
    a = member(1).model_copy(update={"cause": "ecc_dbe"})
    text = text_of(
        valid(render_storm([AlertGroup(key=key, alerts=(a,), opened_at=T0, channel="C")], NOW))
    )
    assert "double-bit ECC error (`ecc_dbe`) on 1 node: `n001`" in text
    # An Alertmanager rule's own name is its author's words: kept as it is.
    assert cause_words("GpuFellOffTheBus") == "GpuFellOffTheBus"
