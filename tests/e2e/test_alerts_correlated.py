"""Correlated faults through the real Alertmanager and Redis, three bot replicas: one cause on
many nodes is one message naming them all, with its per-node detail and Drain buttons paged into
the thread; two causes are two messages; many unrelated events are one storm summary that names
every node, and a 200-node event amid them still gets its own message, thread and Drain buttons;
resolving updates the same messages in place. An Xid the sweep and Alertmanager both see is one
event naming each node once."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import hostlist

from bot.alerts.pages import NODES_PER_PAGE
from bot.backends.alertmanager import AlertmanagerClient
from bot.backends.sim.metrics import SimMetrics
from bot.models import FaultKind
from bot.render.alerts import ALERT_DRAIN_ACTION, BOTH_SOURCES, split_value
from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.e2e.test_alerts import (
    CHANNEL,
    Replica,
    StartReplica,
    am_alert,
    named,
    settle,
    start_replica,
    team,
    top_posts,
    webhook,
)
from tests.e2e.test_alerts_alertmanager import am

__all__ = ["am", "start_replica", "team"]  # fixtures, used by name

NODES = [f"gpu-{i:04d}" for i in range(1, 41)]


def firing(name: str, node: str, **labels: str) -> dict[str, Any]:
    """An alert as a Prometheus server posts it to Alertmanager's API."""
    return {
        "labels": {"alertname": name, "Hostname": node, "severity": "critical", **labels},
        "annotations": {"summary": f"GPU fell off the bus on {node}"},
        "startsAt": (datetime.now(UTC) - timedelta(seconds=30)).isoformat(),
    }


def ended(alert: dict[str, Any]) -> dict[str, Any]:
    """The same alert, resolved (Prometheus sends it again with `endsAt` now)."""
    return {**alert, "endsAt": datetime.now(UTC).isoformat()}


def tops(emulator: SlackEmulator) -> list[dict[str, Any]]:
    return [m for m in emulator.messages(CHANNEL) if m.get("thread_ts", m["ts"]) == m["ts"]]


def replies(emulator: SlackEmulator, ts: str) -> list[dict[str, Any]]:
    return [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") == ts and m["ts"] != ts]


def detail(emulator: SlackEmulator, ts: str) -> list[dict[str, Any]]:
    """The thread replies holding the per-node detail (not the lines of who did what)."""
    return [m for m in replies(emulator, ts) if re.search(r": nodes \d+-\d+ of \d+", m["text"])]


def text_of(msg: dict[str, Any]) -> str:
    return json.dumps(msg["blocks"])


async def until(check: Any, what: str, timeout_s: float = 40) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


async def three(
    start_replica: StartReplica, url: str, ports: list[int], token: str
) -> list[Replica]:
    return [
        await start_replica(port=p, ALERTMANAGER_URL=url, ALERTMANAGER_WEBHOOK_TOKEN=token)
        for p in ports
    ]


async def test_forty_nodes_losing_a_gpu_at_once_are_one_message_naming_them_all(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    replicas = await three(start_replica, url, ports, token)
    alerts = [firing("GpuFellOffBus", n, gpu=str(i % 8), xid="79") for i, n in enumerate(NODES)]
    client = AlertmanagerClient(url)
    try:
        await client.post_alerts(alerts)
        await until(lambda: len(tops(emulator)) >= 1, "no message from Alertmanager's webhook")
        await until(
            lambda: len(replies(emulator, tops(emulator)[0]["ts"])) >= 2, "no per-node detail"
        )
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)

        # One message for the event, however many replicas and webhooks carried it.
        [msg] = tops(emulator)
        assert len(top_posts(emulator)) == 1
        head = msg["blocks"][0]["text"]["text"]
        assert re.fullmatch(r":red_circle: Xid 79 on 40 nodes in (under 1|\d+) min", head), head
        text = text_of(msg)
        assert "`gpu-[0001-0040]`" in text
        assert "Xid 79 on 40 nodes" in msg["text"] and "gpu-[0001-0040]" in msg["text"]
        # One call a second a channel at most, across three replicas and two webhooks each.
        times = sorted(c.at for c in emulator.calls if c.method.startswith("chat."))
        assert all(b - a >= 0.9 for a, b in itertools.pairwise(times))
        # Counted by rack and leaf switch, as the inventory places them; what they share.
        inv = replicas[0].bot.deps.triage.inventory
        racks = Counter(inv.node(n).rack for n in NODES)  # type: ignore[union-attr]
        leaves = Counter(inv.node(n).leaf_switch for n in NODES)  # type: ignore[union-attr]
        for rack, count in racks.items():
            assert f"{rack} {count}" in text
        for leaf, count in leaves.items():
            assert f"{leaf} {count}" in text
        drivers = {inv.node(n).driver_version for n in NODES}  # type: ignore[union-attr]
        if len(drivers) == 1:
            assert f"driver `{drivers.pop()}`" in text
        else:
            assert f"driver ({len(drivers)} values)" in text
        assert "rack (" in text and "leaf switch (" in text  # 40 nodes span racks
        assert ALERT_DRAIN_ACTION not in text  # the buttons are per node, in the thread
        assert validate_blocks(msg["blocks"]) == []

        # The thread: every node on its own line with its Drain button, paged within Block Kit.
        pages = detail(emulator, msg["ts"])
        assert len(pages) == -(-40 // NODES_PER_PAGE)
        buttons: list[str] = []
        for page in pages:
            assert validate_blocks(page["blocks"]) == [] and len(page["blocks"]) <= 50
            for block in page["blocks"]:
                acc = block.get("accessory") or {}
                if acc.get("action_id", "").startswith(ALERT_DRAIN_ACTION):
                    buttons.append(split_value(acc["value"])[1])
                    assert split_value(acc["value"])[1] in block["text"]["text"]
        assert sorted(buttons) == NODES

        # A Drain pressed in the thread drains that node, as the message's own button would.
        page = pages[0]
        block = next(b for b in page["blocks"] if "gpu-0007" in json.dumps(b))
        press = emulator.block_actions_payload(CHANNEL, page["ts"], block["accessory"]["action_id"])
        await replicas[2].slack.interactive(press)
        await emulator.wait_for_responses(1, timeout=10)
        assert "gpu-0007" in emulator.responses[-1][1]["text"]
        sched = replicas[2].bot.deps.triage.scheduler  # each replica simulates its own Slurm
        assert sched is not None and (await sched.nodes(["gpu-0007"]))["gpu-0007"].out_of_service

        # Ten resolve: the same message says so, and their thread lines lose their buttons.
        await client.post_alerts([ended(a) for a in alerts[:10]])
        await until(lambda: "*30* firing" in text_of(tops(emulator)[0]), "not updated in place")
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)
        [msg] = tops(emulator)
        text = text_of(msg)
        assert "*30* firing, *10* resolved" in text
        assert "`gpu-[0011-0040]`" in text and "`gpu-[0001-0010]`" in text
        assert len(top_posts(emulator)) == 1 and emulator.calls_to("chat.update")
        pages = detail(emulator, msg["ts"])
        assert len(pages) == -(-40 // NODES_PER_PAGE)
        first = json.dumps(pages[0]["blocks"])
        assert "~`gpu-0003`" in first and f"{ALERT_DRAIN_ACTION}" in first
        assert not any(
            "gpu-0003" in json.dumps(b) and b.get("accessory") for b in pages[0]["blocks"]
        )

        # All resolve: the message is marked resolved in place, nothing is deleted.
        await client.post_alerts([ended(a) for a in alerts])
        await until(lambda: "RESOLVED" in text_of(tops(emulator)[0]), "never marked resolved")
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)
        assert len(top_posts(emulator)) == 1 and emulator.calls_to("chat.delete") == []
        assert ALERT_DRAIN_ACTION not in json.dumps(
            [p["blocks"] for p in detail(emulator, msg["ts"])]
        )
    finally:
        await client.close()


async def test_two_causes_at_once_are_two_messages(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    replicas = await three(start_replica, url, ports, token)
    name = f"GpuXidErrors{int(time.time() * 1000)}"  # one Alertmanager group, two Xids
    client = AlertmanagerClient(url)
    try:
        await client.post_alerts(
            [firing(name, f"gpu-{i:04d}", xid="79") for i in range(101, 107)]
            + [firing(name, f"gpu-{i:04d}", xid="48") for i in range(201, 205)]
        )
        await until(lambda: len(tops(emulator)) >= 2, "two causes did not give two messages")
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)
        messages = {m["blocks"][0]["text"]["text"]: text_of(m) for m in tops(emulator)}
        assert len(messages) == 2 and len(top_posts(emulator)) == 2
        xid79 = next(t for h, t in messages.items() if "Xid 79 on 6 nodes" in h)
        xid48 = next(t for h, t in messages.items() if "Xid 48 on 4 nodes" in h)
        assert "`gpu-[0101-0106]`" in xid79 and "`gpu-[0201-0204]`" in xid48
    finally:
        await client.close()


async def test_many_unrelated_events_are_one_storm_summary_naming_every_node(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    await three(start_replica, url, ports, token)
    stamp = int(time.time() * 1000)
    # 25 unrelated rules firing at once, on 3 nodes each (storm_groups is 20).
    events = {
        f"Rule{k:02d}x{stamp}": [f"gpu-{300 + 3 * k + j:04d}" for j in range(3)] for k in range(25)
    }
    client = AlertmanagerClient(url)
    try:
        await client.post_alerts(
            [firing(name, n, severity="warning") for name, nodes in events.items() for n in nodes]
        )
        want = {n for nodes in events.values() for n in nodes}
        await until(
            lambda: any(named(text_of(m)) >= want for m in tops(emulator)),
            "no storm summary naming every node",
            timeout_s=60,
        )
        # The events a summary stands for stay queued until the storm passes: wait for quiet.
        await until(
            lambda: time.monotonic() - max(c.at for c in emulator.calls) > 2.0, "never quiet"
        )
        [summary] = tops(emulator)  # the storm is one message, not 25
        assert len(top_posts(emulator)) == 1
        text = text_of(summary)
        assert "Alert storm: 25 events on 75 nodes" in text
        for name, nodes in events.items():
            assert f"`{name}` on 3 nodes: `{hostlist.collect_hostlist(nodes)}`" in text
        assert validate_blocks(summary["blocks"]) == []
    finally:
        await client.post_alerts(
            [
                ended(firing(name, n, severity="warning"))
                for name, nodes in events.items()
                for n in nodes
            ]
        )
        await client.close()


async def test_a_200_node_event_in_a_storm_of_small_ones_stands_on_its_own(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    replicas = await three(start_replica, url, ports, token)
    stamp = int(time.time() * 1000)
    # 25 unrelated rules on 3 nodes each (storm_groups is 20) and, in the same burst, one Xid 79
    # on 200 nodes (storm_own_nodes is 10).
    events = {
        f"Rule{k:02d}x{stamp}": [f"gpu-{300 + 3 * k + j:04d}" for j in range(3)] for k in range(25)
    }
    xid_nodes = [f"gpu-{i:04d}" for i in range(1, 201)]
    small = [firing(name, n, severity="warning") for name, nodes in events.items() for n in nodes]
    xid = [firing("GpuFellOffBus", n, gpu=str(i % 8), xid="79") for i, n in enumerate(xid_nodes)]
    want = {n for nodes in events.values() for n in nodes} | set(xid_nodes)

    def xid_message() -> dict[str, Any] | None:
        return next((m for m in tops(emulator) if "Xid 79 on 200" in m["text"]), None)

    def chat_times() -> list[float]:
        return sorted(
            c.at for c in emulator.calls if c.method in ("chat.postMessage", "chat.update")
        )

    client = AlertmanagerClient(url)
    try:
        await client.post_alerts([*small, *xid])
        await until(
            lambda: (m := xid_message()) is not None and len(detail(emulator, m["ts"])) == 8,
            "the 200-node event did not get its own message and thread",
            timeout_s=90,
        )
        await until(
            lambda: (
                any("Alert storm: 26 events" in text_of(m) for m in tops(emulator))
                and any("its message" in text_of(m) for m in tops(emulator))
            ),
            "no storm summary linking the big event",
            timeout_s=60,
        )
        # The events the summary stands for stay queued until the storm passes: wait for quiet.
        await until(lambda: time.monotonic() - max(c.at for c in emulator.calls) > 2.0, "busy")

        # Two messages: the summary and the big event's own; no small event posted.
        assert len(tops(emulator)) == 2 and len(top_posts(emulator)) == 2
        msg = xid_message()
        assert msg is not None
        [summary] = [m for m in tops(emulator) if m["ts"] != msg["ts"]]
        text = text_of(summary)
        assert "Alert storm: 26 events on 275 nodes" in text
        assert named(text) == want  # the summary names every node, the big event's too
        for name, nodes in events.items():
            assert f"`{name}` on 3 nodes: `{hostlist.collect_hostlist(nodes)}`" in text
        # It links the big event's message, with Slack's permalink for it.
        poster = replicas[0].bot.deps.alerting.poster  # type: ignore[union-attr]
        got = await poster.client.chat_getPermalink(channel=CHANNEL, message_ts=msg["ts"])
        lines = json.dumps(summary["blocks"], ensure_ascii=False)
        assert f"on 200 nodes: `gpu-[0001-0200]` · <{got['permalink']}|its message>" in lines
        assert "message linked has its per-node detail and buttons there" in text
        assert validate_blocks(summary["blocks"]) == []

        # The big event's thread: every node with its Drain button, paged within Block Kit.
        assert "`gpu-[0001-0200]`" in text_of(msg)
        buttons: list[str] = []
        for page in detail(emulator, msg["ts"]):
            assert validate_blocks(page["blocks"]) == [] and len(page["blocks"]) <= 50
            for block in page["blocks"]:
                acc = block.get("accessory") or {}
                if acc.get("action_id", "").startswith(ALERT_DRAIN_ACTION):
                    buttons.append(split_value(acc["value"])[1])
        assert sorted(buttons) == xid_nodes
        assert all(b - a >= 0.9 for a, b in itertools.pairwise(chat_times()))

        # Six small events resolve: 20 open, the storm has passed. The summary says so, the
        # other 19 small events are posted on their own, the big one not again.
        gone = list(events)[:6]
        await client.post_alerts(
            [ended(firing(name, n, severity="warning")) for name in gone for n in events[name]]
        )
        await until(
            lambda: len(top_posts(emulator)) >= 2 + 19, "the storm's events were not posted"
        )
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)
        heads = [c.args.get("text", "") for c in top_posts(emulator)]
        assert len(heads) == 21
        assert sum("Xid 79 on" in h for h in heads) == 1
        for name in list(events)[6:]:
            assert sum(name in h for h in heads) == 1, name
        assert not any(name in h for name in gone for h in heads[2:])
        assert any("storm is over" in text_of(m) for m in tops(emulator))
        assert all(b - a >= 0.9 for a, b in itertools.pairwise(chat_times()))
    finally:
        await client.post_alerts([ended(a) for a in small] + [ended(a) for a in xid])
        await client.close()


async def test_an_unknown_alertname_groups_by_name_and_meowbot_cause_joins_rules(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    replicas = await three(start_replica, url, ports, token)
    stamp = int(time.time() * 1000)
    cause = f"pdu-feed-b-{stamp}"
    # Two rules the operator tagged as one cause (a PDU feed), and one rule meowbot does not know.
    tagged = [
        firing(f"PduOverCurrent{stamp}", f"gpu-{i:04d}", meowbot_cause=cause)
        for i in range(401, 405)
    ] + [
        firing(f"GpuPowerLost{stamp}", f"gpu-{i:04d}", meowbot_cause=cause) for i in range(405, 409)
    ]
    unknown = [
        firing(f"BmcSelFull{stamp}", f"gpu-{i:04d}", severity="warning") for i in range(451, 456)
    ]
    client = AlertmanagerClient(url)
    try:
        await client.post_alerts(tagged + unknown)
        await until(lambda: len(tops(emulator)) >= 2, "expected two messages")
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)
        heads = {m["blocks"][0]["text"]["text"]: text_of(m) for m in tops(emulator)}
        assert len(heads) == 2 and len(top_posts(emulator)) == 2
        feed = next(t for h, t in heads.items() if h.startswith(f":red_circle: {cause} on 8"))
        assert "`gpu-[0401-0408]`" in feed
        bmc = next(t for h, t in heads.items() if f"BmcSelFull{stamp} on 5 nodes" in h)
        assert "`gpu-[0451-0455]`" in bmc
    finally:
        await client.post_alerts([ended(a) for a in tagged + unknown])
        await client.close()


async def test_an_event_on_nodes_of_one_job_says_the_job_is_shared(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    fleet = r.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    # One job on the first six (the simulated scheduler's own jobs there end at its start),
    # one job a node on the next three; the alerts carry no job label: Slurm's word alone.
    one, apart = NODES[:6], NODES[6:9]
    fleet.add_job(one, user="bob", job_id="9200001", name="llm-big")
    for i, node in enumerate(apart):
        fleet.add_job([node], user="bob", job_id=f"920001{i}", name="llm-small")
    status, _ = await r.send(webhook([am_alert(n, "GpuXid79", xid="79") for n in one]))
    assert status == 200
    await until(lambda: len(tops(emulator)) == 1, "no message for the job's nodes")
    await settle(r)
    text = text_of(tops(emulator)[0])
    assert "job `9200001`" in text, text

    await r.send(webhook([am_alert(n, "GpuXid48", xid="48") for n in apart]))
    await until(lambda: len(tops(emulator)) == 2, "no message for the other nodes")
    await settle(r)
    [other] = [m for m in tops(emulator) if "gpu-0007" in text_of(m)]
    assert "job (3 values)" in text_of(other), text_of(other)


async def test_an_xid_both_sources_see_is_one_message_naming_each_node_once(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    replicas = await three(start_replica, url, ports, token)
    bot = replicas[0].bot
    metrics = bot.deps.triage.metrics
    assert isinstance(metrics, SimMetrics)
    fleet = metrics.fleet
    faulty = {f.node for f in fleet.injected}
    clean = [n for n in fleet.nodes if n not in faulty][:6]
    swept, reported, both = clean[:4], clean[2:], clean[2:4]
    for node in swept:
        fleet.inject(FaultKind.XID, node, 3, xid=79)
    alerting = bot.deps.alerting
    assert alerting is not None
    assert await alerting.sweep_once() is not None
    store = alerting.store
    gid = "xid_79|event|"  # the sweep's cause names the code, as Alertmanager's `xid` label does

    name = f"GpuXid{int(time.time() * 1000)}"  # apart from other tests' alerts
    alerts = [firing(name, n, gpu="3", xid="79") for n in reported]
    client = AlertmanagerClient(url)

    async def sources() -> dict[str, set[str]]:
        group = await store.group(gid)
        out: dict[str, set[str]] = {}
        for a in group.firing if group else ():
            out.setdefault(a.node or "", set()).add(a.source.value)
        return out

    try:
        await client.post_alerts(alerts)
        deadline = time.monotonic() + 40
        while any(len(s) < 2 for s in [(await sources()).get(n, set()) for n in both]):
            assert time.monotonic() < deadline, "Alertmanager's alerts did not join the event"
            await asyncio.sleep(0.2)
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)

        # One event, one message; the nodes both sources report are counted once.
        group = await store.group(gid)
        assert group is not None
        nodes = set(group.nodes)
        assert set(clean) <= nodes
        [msg] = [m for m in tops(emulator) if "Xid 79" in m["blocks"][0]["text"]["text"]]
        head = msg["blocks"][0]["text"]["text"]
        assert f"Xid 79 on {len(nodes)} nodes" in head, head
        assert named(text_of(msg)) >= set(clean)
        # Its thread names each node once, on one line saying both sources saw it.
        lines = [
            b["text"]["text"]
            for page in detail(emulator, msg["ts"])
            for b in page["blocks"]
            if b.get("type") == "section"
        ]
        for node in nodes:
            assert sum(f"`{node}`" in line for line in lines) == 1, node
        seen_by_both = [line for line in lines if BOTH_SOURCES in line]
        assert named(" ".join(seen_by_both)) == set(both)

        # Alertmanager's alerts resolve: the nodes the sweep still sees keep the event firing.
        await client.post_alerts([ended(a) for a in alerts])
        deadline = time.monotonic() + 40
        while any("alertmanager" in s for s in (await sources()).values()):
            assert time.monotonic() < deadline, "Alertmanager's alerts did not resolve"
            await asyncio.sleep(0.2)
        await settle(replicas[0], quiet_s=2.0, timeout_s=60)
        group = await store.group(gid)
        assert group is not None and not group.resolved
        assert set(swept) <= {a.node for a in group.firing}
        text = text_of(emulator.message(CHANNEL, msg["ts"]))
        assert "RESOLVED" not in text
        assert "Resolved on" in text and named(text.split("Resolved on")[1]) >= set(clean[4:])
    finally:
        await client.close()
