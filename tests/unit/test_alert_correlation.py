"""Correlation: causes read from labels, an event's picture, its per-node detail paged into the
thread within Block Kit's limits, and the planner writing those pages after the message."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.alerts import pages
from bot.alerts.causes import cause_of, xid_of
from bot.alerts.config import AlertsConfig
from bot.alerts.correlate import facts_from_labels, picture
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Page, Scope
from bot.alerts.notify import StepKind, drawn, plan
from bot.alerts.standing import NodeStanding, Standing, Standings
from bot.alerts.webhook import parse_webhook
from bot.models import Severity
from bot.render.alerts import ALERT_DRAIN_ACTION, render_group, render_page, split_value
from bot.shell.emulator import validate_blocks
from tests.unit.test_render_alerts import serving

T0 = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
CFG = AlertsConfig(default_channel="C")


def xid79(i: int, *, rack: str = "", status: AlertStatus = AlertStatus.FIRING) -> Alert:
    facts = {
        "rack": rack or f"rack-{i // 16:03d}",
        "leaf_switch": f"leaf-{i // 32:03d}",
        "driver": "550.54.15",
        "kernel": "5.15.0",
    }
    return Alert(
        fingerprint=f"fp{i}",
        source=AlertSource.ALERTMANAGER,
        status=status,
        cause="xid_79",
        node=f"gpu-{i:04d}",
        gpu=i % 8,
        severity=Severity.CRITICAL,
        summary="GPU has fallen off the bus",
        starts_at=T0 + timedelta(seconds=3 * i),
        facts=facts,
    )


def event(alerts: list[Alert], **extra: object) -> AlertGroup:
    key = GroupKey(cause="xid_79", scope=Scope.EVENT)
    return AlertGroup(key=key, alerts=tuple(alerts), opened_at=T0, channel="C", **extra)  # type: ignore[arg-type]


def test_causes_come_from_labels_before_the_alertname() -> None:
    assert cause_of("GpuFellOffBus", {"xid": "79"}) == "xid_79" and xid_of("xid_79") == 79
    assert cause_of("GpuFellOffBus", {"xid": "79", "meowbot_cause": "pdu-b"}) == "pdu-b"
    assert cause_of("GpuFellOffBus", {"meowbot_cause": "no spaces | bars"}) == "GpuFellOffBus"
    assert cause_of("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", {}) == "ecc_dbe"
    assert cause_of("NodeNetworkReceiveErrs", {}) == "nic_errors"
    assert cause_of("RackPduTripped", {}) == "RackPduTripped"  # unknown: its own name
    assert cause_of("A|B", {}) == "A/B"  # never splits a group id
    assert xid_of("xid") is None and xid_of("ecc_dbe") is None


def test_facts_from_labels_never_take_prometheus_job_label() -> None:
    facts = facts_from_labels({"job": "dcgm", "slurm_job_id": "4242", "driver_version": "550"})
    assert facts == {"job": "4242", "driver": "550"}


def test_webhook_reads_cause_facts_and_the_grouping_beyond_the_cause() -> None:
    def body(group_labels: dict[str, str]) -> bytes:
        raw = {
            "status": "firing",
            "fingerprint": "f1",
            "startsAt": "2026-12-05T03:00:00Z",
            "labels": {
                "alertname": "GpuFellOffBus",
                "Hostname": "gpu-0001",
                "xid": "79",
                "rack": "r7",
                "severity": "critical",
            },
            "annotations": {},
        }
        return json.dumps({"version": "4", "groupLabels": group_labels, "alerts": [raw]}).encode()

    [a] = parse_webhook(body({"alertname": "GpuFellOffBus"}))
    assert (a.cause, a.event, a.facts) == ("xid_79", "", {"rack": "r7"})
    [by_host] = parse_webhook(body({"alertname": "GpuFellOffBus", "Hostname": "gpu-0001"}))
    assert by_host.event == ""  # grouping by host is how rules storm: still one event
    [by_cluster] = parse_webhook(body({"alertname": "GpuFellOffBus", "cluster": "b"}))
    assert by_cluster.event and by_cluster.event != a.event


def test_the_picture_names_counts_and_what_nodes_share() -> None:
    group = event([xid79(i) for i in range(1, 41)])
    pic = picture(group)
    assert pic.hostlist == "gpu-[0001-0040]" and pic.span_s == 117
    assert pic.by_rack == (("rack-001", 16), ("rack-000", 15), ("rack-002", 9))
    assert pic.by_leaf == (("leaf-000", 31), ("leaf-001", 9))
    assert ("driver", "550.54.15") in pic.shared and ("rack", 3) in pic.differ
    # Some resolve: named apart, and no longer counted.
    resolved = [xid79(i, status=AlertStatus.RESOLVED) for i in range(1, 11)]
    later = picture(event([*resolved, *(xid79(i) for i in range(11, 41))]))
    assert later.hostlist == "gpu-[0011-0040]" and later.resolved_hostlist == "gpu-[0001-0010]"


def test_two_hundred_nodes_page_into_replies_within_block_kit_limits() -> None:
    group = event([xid79(i) for i in range(1, 201)], ts="1.0")
    main = render_group(group, CFG, T0)
    assert validate_blocks(main.blocks) == [] and "`gpu-[0001-0200]`" in json.dumps(main.blocks)
    assert main.blocks[0]["text"]["text"] == ":red_circle: Xid 79 on 200 nodes in 10 min"
    contents = pages.pages(group)
    assert len(contents) == -(-200 // pages.NODES_PER_PAGE)
    named: list[str] = []
    for index, rows in enumerate(contents):
        msg = render_page(group, rows, index, CFG, serving(group))
        assert validate_blocks(msg.blocks) == [] and len(msg.blocks) <= 50
        for block in msg.blocks:
            button = block.get("accessory")
            if button:
                assert button["action_id"].startswith(ALERT_DRAIN_ACTION)
                named.append(split_value(button["value"])[1])
    assert named == [f"gpu-{i:04d}" for i in range(1, 201)]
    # A node meowbot drained offers Resume in its place; one an operator drained neither,
    # and says who holds it; a resolved one no button at all.
    stand = serving(group)
    assert stand.nodes is not None
    nodes = {
        **stand.nodes,
        "gpu-0002": NodeStanding(Standing.OURS, "drained", "meowbot: xid79 by @ana"),
        "gpu-0003": NodeStanding(Standing.HELD, "drained", "maintenance", "root"),
    }
    drained = json.dumps(render_page(group, contents[0], 0, CFG, Standings("Slurm", nodes)).blocks)
    assert "Resume gpu-0002" in drained
    assert "gpu-0003" not in {
        split_value(b["accessory"]["value"])[1]
        for b in render_page(group, contents[0], 0, CFG, Standings("Slurm", nodes)).blocks
        if b.get("accessory")
    }
    assert "drained by root in Slurm" in drained and "maintenance" in drained


def test_the_planner_writes_the_message_then_its_stale_pages_then_redraws() -> None:
    group = event([xid79(i) for i in range(1, 41)], ts="1.0")
    [step] = plan([group], T0, {}, CFG)
    assert step.kind is StepKind.UPDATE  # never drawn: the message first
    group = group.model_copy(update={"drawn": drawn(group)})
    [step] = plan([group], T0, {}, CFG)
    assert (step.kind, step.page) == (StepKind.PAGE, 0)
    first = Page(ts="2.0", digest=pages.digest(pages.pages(group)[0], False))
    group = group.model_copy(update={"pages": (first,)})
    [step] = plan([group], T0, {}, CFG)
    assert (step.kind, step.page) == (StepKind.PAGE, 1)
    second = Page(ts="3.0", digest=pages.digest(pages.pages(group)[1], False))
    group = group.model_copy(update={"pages": (first, second)})
    assert pages.stale(group) is None
    # Still queued with nothing changed: a redraw was asked for (a drain): the message only.
    [step] = plan([group], T0, {}, CFG)
    assert step.kind is StepKind.UPDATE
    # A node resolves: the message, then the one page showing it.
    gone = xid79(30, status=AlertStatus.RESOLVED)
    changed = group.model_copy(
        update={"alerts": tuple(gone if a.fingerprint == "fp30" else a for a in group.alerts)}
    )
    assert plan([changed], T0, {}, CFG)[0].kind is StepKind.UPDATE
    changed = changed.model_copy(update={"drawn": drawn(changed)})
    [step] = plan([changed], T0, {}, CFG)
    assert (step.kind, step.page) == (StepKind.PAGE, 1)


def test_a_storm_too_big_for_one_message_counts_the_rest_and_stays_within_limits() -> None:
    from bot.render.alerts import render_storm
    from bot.render.blocks import block_text_length

    groups = [
        AlertGroup(
            key=GroupKey(cause=f"Rule{k:04d}", scope=Scope.EVENT),
            alerts=tuple(
                xid79(3 * k + j).model_copy(
                    update={"cause": f"Rule{k:04d}", "fingerprint": f"{k}-{j}"}
                )
                for j in range(3)
            ),
            opened_at=T0,
            channel="C",
        )
        for k in range(1000)
    ]
    msg = render_storm(groups, T0)
    assert validate_blocks(msg.blocks) == [] and msg.overflow == []
    assert block_text_length(msg.blocks) <= 11_000
    text = json.dumps(msg.blocks, ensure_ascii=False)
    assert "Alert storm: 1,000 events on 3,000 nodes" in text
    shown = text.count("on 3 nodes: ")
    assert 50 < shown < 1000 and f"…and {1000 - shown:,} more events on" in text
