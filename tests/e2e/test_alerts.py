"""Channel alerts end to end: Alertmanager's webhook into the real aiohttp server, real Redis,
the notifier posting to the Slack emulator, buttons pressed with real block_actions payloads."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import hostlist
import pytest
import redis.asyncio as aioredis

from bot.app import create_bot
from bot.render.alerts import (
    ALERT_ACK_ACTION,
    ALERT_DRAIN_ACTION,
    ALERT_RESUME_ACTION,
    ALERT_RESUME_ANYWAY_ACTION,
)
from bot.server import SLACK_EVENTS_PATH, Bot
from bot.shell.emulator import SlackEmulator, validate_blocks
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.conftest import RedisServer
from tests.e2e.conftest import Slack, bot_settings
from tests.waiting import eventually

TOKEN = "e2e-webhook-token"
CHANNEL = "C0ALERTS"


def am_alert(
    node: str, name: str = "InfinibandLinkDown", *, resolved: bool = False, **labels: str
) -> dict[str, Any]:
    """One alert as Alertmanager's webhook (version 4) carries it."""
    now = datetime.now(UTC)
    all_labels = {"alertname": name, "Hostname": node, "severity": "warning", **labels}
    fp = hashlib.sha256(json.dumps(all_labels, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "status": "resolved" if resolved else "firing",
        "labels": all_labels,
        "annotations": {"summary": f"{name} on {node}"},
        "startsAt": (now - timedelta(minutes=5)).isoformat().replace("+00:00", "Z"),
        "endsAt": now.isoformat().replace("+00:00", "Z") if resolved else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example/graph",
        "fingerprint": fp,
    }


def webhook(alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": '{}:{alertname="x"}',
        "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": "meowbot",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example",
        "alerts": alerts,
    }


class Replica:
    def __init__(
        self, bot: Bot, port: int, http: aiohttp.ClientSession, emulator: SlackEmulator
    ) -> None:
        self.bot, self.port, self.http = bot, port, http
        self.slack = Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)

    async def send(
        self, payload: dict[str, Any], *, auth: str | None = f"Bearer {TOKEN}"
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Content-Type": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth
        url = f"http://127.0.0.1:{self.port}{ALERTMANAGER_PATH}"
        async with self.http.post(url, data=json.dumps(payload), headers=headers) as resp:
            return resp.status, await resp.json()


StartReplica = Callable[..., Awaitable[Replica]]


@pytest.fixture
async def team(redis_url: str) -> AsyncIterator[None]:
    yield
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    keys = [k async for k in client.scan_iter("meowbot:_:alerts:*")]
    # The fault history and meowbot's resumes: a node resumed in one test would make an old
    # fault on it in the next "before meowbot resumed the node" (info, not posted).
    keys += [k async for k in client.scan_iter("meowbot:_:triage:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


@pytest.fixture
async def start_replica(
    emulator: SlackEmulator, redis_url: str, team: None
) -> AsyncIterator[StartReplica]:
    emulator.add_channel(CHANNEL, "gpu-alerts")
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())

        async def start(url: str = redis_url, port: int = 0, **extra: Any) -> Replica:
            base = {
                "ALERTMANAGER_WEBHOOK_TOKEN": TOKEN,
                "MEOWBOT_ALERT_CHANNEL": CHANNEL,
                "MEOWBOT_ADMINS": "U0ADMIN",
                "ALERTMANAGER_URL": None,
            }
            settings = bot_settings(emulator, url, **{**base, **extra})
            bot = await create_bot(settings)
            stack.push_async_callback(bot.close)
            bound = await bot.start_http("127.0.0.1", port)
            bot.start_background(sweep=False)
            return Replica(bot, bound, http, emulator)

        yield start


def top_level(emulator: SlackEmulator) -> list[dict[str, Any]]:
    return [
        m for m in emulator.messages(CHANNEL) if "thread_ts" not in m or m["thread_ts"] == m["ts"]
    ]


def top_posts(emulator: SlackEmulator) -> list[Any]:
    """Top-level posts (a big event's per-node detail goes into its thread)."""
    return [c for c in emulator.calls_to("chat.postMessage") if not c.args.get("thread_ts")]


def named(text: str) -> set[str]:
    """Every node a message names in code spans, its hostlists expanded."""
    out: set[str] = set()
    for span in re.findall(r"`([^`]+)`", text):
        with contextlib.suppress(hostlist.BadHostlist):
            out.update(n for n in hostlist.expand_hostlist(span) if n.startswith("gpu-"))
    return out


async def settle(r: Replica, quiet_s: float = 1.2, timeout_s: float = 30) -> None:
    """Waits until the notifier's queue is empty and Slack has heard nothing for `quiet_s`."""
    alerting = r.bot.deps.alerting
    assert alerting is not None
    emulator = r.slack.emulator
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        last = max((c.at for c in emulator.calls), default=0.0)
        if time.monotonic() - last > quiet_s and not await alerting.store.dirty():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("the notifier did not finish")


def leaf_nodes(bot: Bot, count: int) -> tuple[str, list[str]]:
    """`count` nodes under one leaf switch of the bot's simulated fleet."""
    inv = bot.deps.triage.inventory
    by_leaf: dict[str, list[str]] = {}
    for name in inv.names():
        by_leaf.setdefault(inv.leaf_switch(name) or "", []).append(name)
    leaf, nodes = max(by_leaf.items(), key=lambda kv: len(kv[1]))
    assert len(nodes) >= count
    return leaf, nodes[:count]


async def test_webhook_needs_the_token_and_bad_posts_change_nothing(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    payload = webhook([am_alert("gpu-0001")])
    basic_wrong = "Basic " + base64.b64encode(b"alertmanager:nope").decode()
    for auth in (None, "Bearer wrong", f"Bearer {TOKEN}x", basic_wrong):
        status, _ = await r.send(payload, auth=auth)
        assert status == 401
    status, body = await r.send({"version": "3", "alerts": "no"})
    assert status == 400 and "error" in body
    await asyncio.sleep(0.5)
    assert emulator.calls_to("chat.postMessage") == []
    basic = "Basic " + base64.b64encode(f"alertmanager:{TOKEN}".encode()).decode()
    status, _ = await r.send(payload, auth=basic)
    assert status == 200


async def test_one_broken_switch_is_one_message_updated_in_place(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    leaf, nodes = leaf_nodes(r.bot, 8)
    down = [am_alert(n, leaf_switch=leaf) for n in nodes]
    status, body = await r.send(webhook(down[:4]))
    assert status == 200 and body["alerts"] == 4 and body["groups"] == 1
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await r.send(webhook(down))  # 4 repeats, 4 new members
    await r.send(webhook(down))  # delivered twice: nothing new
    await settle(r)
    [msg] = top_level(emulator)
    assert len(top_posts(emulator)) == 1
    assert emulator.calls_to("chat.update"), "the message grows in place"
    text = json.dumps(msg["blocks"])
    assert leaf in text and named(text) >= set(nodes)
    assert validate_blocks(msg["blocks"]) == []
    # Every member resolves: the same message says so; nothing is deleted.
    await r.send(webhook([am_alert(n, resolved=True, leaf_switch=leaf) for n in nodes]))
    await settle(r)
    [msg] = top_level(emulator)
    assert "resolved" in json.dumps(msg["blocks"]).lower()
    assert emulator.calls_to("chat.delete") == []


async def test_three_replicas_given_the_same_webhooks_post_each_group_once(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    replicas = [await start_replica() for _ in range(3)]
    _, nodes = leaf_nodes(replicas[0].bot, 6)
    payloads = [
        webhook([am_alert(n, leaf_switch="leaf-x") for n in nodes]),
        webhook([am_alert("gpu-0100", "GpuXid79", severity="critical")]),
    ]
    answers = await asyncio.gather(*(r.send(p) for p in payloads for r in replicas))
    assert all(status == 200 for status, _ in answers)
    await settle(replicas[0])
    assert len(top_level(emulator)) == 2 and len(top_posts(emulator)) == 2


async def test_slack_rate_limit_is_waited_out_and_nothing_is_lost(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    emulator.fail_next("chat.postMessage", status=429, retry_after=1, count=2)
    await r.send(webhook([am_alert("gpu-0003")]))
    await emulator.wait_for_call("chat.postMessage", count=3, timeout=15)
    await settle(r)
    [msg] = top_level(emulator)
    assert "gpu-0003" in json.dumps(msg["blocks"])
    failed = [c for c in emulator.calls_to("chat.postMessage") if c.status == 429]
    assert len(failed) == 2


async def test_a_restarted_bot_updates_the_same_messages(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    first = await start_replica()
    await first.send(webhook([am_alert("gpu-0007")]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(first)
    await first.bot.close()
    second = await start_replica()
    await second.send(webhook([am_alert("gpu-0007", resolved=True)]))
    await settle(second)
    [msg] = top_level(emulator)
    assert len(emulator.calls_to("chat.postMessage")) == 1
    update = emulator.calls_to("chat.update")[-1]
    assert update.args["ts"] == msg["ts"]
    assert "resolved" in json.dumps(msg["blocks"]).lower()


async def test_redis_stopped_mid_storm_loses_nothing_and_posts_nothing_twice(
    start_replica: StartReplica, emulator: SlackEmulator, own_redis: RedisServer
) -> None:
    r = await start_replica(own_redis.url)
    first = [am_alert(f"gpu-{i:04d}", "GpuXid79", severity="critical") for i in range(1, 11)]
    rest = [am_alert(f"gpu-{i:04d}", "GpuXid79", severity="critical") for i in range(11, 21)]
    assert (await r.send(webhook(first)))[0] == 200
    own_redis.stop()
    status, body = await r.send(webhook(rest))
    assert status == 503, body  # Alertmanager sends it again later
    await asyncio.sleep(1.0)  # the notifier meets Redis down too, and carries on
    own_redis.start()
    deadline = time.monotonic() + 10
    while (status := (await r.send(webhook(rest)))[0]) != 200:  # Alertmanager's retry
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.2)
    await r.send(webhook(first + rest))  # and a repeat of everything
    await settle(r, timeout_s=60)
    text = json.dumps([m["blocks"] for m in top_level(emulator)])
    assert named(text) >= {f"gpu-{i:04d}" for i in range(1, 21)}
    assert len(top_posts(emulator)) == len(top_level(emulator)) == 1  # one cause, one event


async def test_buttons_need_authorised_people_and_are_audited(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    await r.send(webhook([am_alert("gpu-0009", "GpuXid79", severity="critical")]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    [msg] = top_level(emulator)
    slack = r.slack
    # Bob is not in MEOWBOT_ADMINS: refused, ephemerally, and the node stays as it was.
    press = emulator.block_actions_payload(CHANNEL, msg["ts"], ALERT_DRAIN_ACTION, user="U0USER")
    status, _, _ = await slack.interactive(press)
    assert status == 200
    await emulator.wait_for_responses(1)
    refusal = emulator.responses[-1][1]
    assert refusal["response_type"] == "ephemeral"
    # Who may act, as a mention Bob can write to; not the name of a setting he cannot see.
    assert "Only the cluster admins may drain nodes (ask <@U0ADMIN>)" in refusal["text"]
    assert "MEOWBOT_ADMINS" not in refusal["text"]
    sched = r.bot.deps.triage.scheduler
    assert sched is not None and not (await sched.nodes(["gpu-0009"]))["gpu-0009"].draining
    # Anyone may acknowledge.
    await slack.interactive(
        emulator.block_actions_payload(CHANNEL, msg["ts"], ALERT_ACK_ACTION, user="U0USER")
    )
    await emulator.wait_for_responses(2)
    # Ana may drain: the reason is meowbot's and names her. An Xid 79 is critical, so the node
    # is taken out now (set down: its broken jobs are stopped), not left to finish its jobs.
    await slack.interactive(emulator.block_actions_payload(CHANNEL, msg["ts"], ALERT_DRAIN_ACTION))
    await emulator.wait_for_responses(3)
    node = (await sched.nodes(["gpu-0009"]))["gpu-0009"]
    assert node.down and node.out_of_service and node.reason is not None
    assert node.reason.startswith("meowbot: ") and "@ana" in node.reason
    assert "running jobs are stopped" in emulator.responses[-1][1]["text"]
    await settle(r)
    thread = [
        m
        for m in emulator.messages(CHANNEL)
        if m.get("thread_ts") == msg["ts"] and m["ts"] != msg["ts"]
    ]
    assert any("bob" in m["text"] for m in thread) and any("ana" in m["text"] for m in thread)
    entries = await r.bot.deps.alerting.store.audit_entries()  # type: ignore[union-attr]
    assert [e["verb"] for e in entries][:2] == ["drain_now", "acknowledge"]
    assert "is on it" in json.dumps(emulator.message(CHANNEL, msg["ts"])["blocks"])


def thread_of(emulator: SlackEmulator, ts: str) -> list[dict[str, Any]]:
    return [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") == ts and m["ts"] != ts]


async def test_a_warning_drains_after_jobs_and_a_foreign_reason_needs_a_confirmed_resume(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    await r.send(webhook([am_alert("gpu-0011", "NvlinkReplayErrors", severity="warning")]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    [msg] = top_level(emulator)
    assert "after jobs" in json.dumps(msg["blocks"])
    slack = r.slack
    await slack.interactive(emulator.block_actions_payload(CHANNEL, msg["ts"], ALERT_DRAIN_ACTION))
    await emulator.wait_for_responses(1)
    sched = r.bot.deps.triage.scheduler
    assert sched is not None
    node = (await sched.nodes(["gpu-0011"]))["gpu-0011"]
    assert (
        node.draining
        and not node.down
        and "running jobs finish" in emulator.responses[-1][1]["text"]
    )

    # The drain redraws the alert after its answer: Resume in Drain's place.
    for _ in range(100):
        if ALERT_RESUME_ACTION in json.dumps(top_level(emulator)[0]["blocks"]):
            break
        await asyncio.sleep(0.1)
    # An operator then puts their own reason on it: a plain resume is refused, with a
    # confirmed "Resume anyway" that only an authorised person may press.
    await sched.drain("gpu-0011", "bad DIMM, ticket 4411 (ops)")
    await slack.interactive(emulator.block_actions_payload(CHANNEL, msg["ts"], ALERT_RESUME_ACTION))
    await emulator.wait_for_responses(2)
    refused = emulator.responses[-1][1]
    assert "unless you confirm" in refused["text"] and refused["response_type"] == "ephemeral"
    assert (await sched.nodes(["gpu-0011"]))["gpu-0011"].draining
    validate_blocks(refused["blocks"])
    button = json.dumps(refused["blocks"])
    assert ALERT_RESUME_ANYWAY_ACTION in button and '"confirm"' in button

    await slack.interactive(
        emulator.ephemeral_actions_payload(1, ALERT_RESUME_ANYWAY_ACTION, user="U0USER")
    )
    await emulator.wait_for_responses(3)
    assert "Only the cluster admins may resume nodes" in emulator.responses[-1][1]["text"]
    assert (await sched.nodes(["gpu-0011"]))["gpu-0011"].draining

    await slack.interactive(emulator.ephemeral_actions_payload(1, ALERT_RESUME_ANYWAY_ACTION))
    await emulator.wait_for_responses(4)
    assert "Resumed" in emulator.responses[-1][1]["text"]
    assert not (await sched.nodes(["gpu-0011"]))["gpu-0011"].out_of_service
    entries = await r.bot.deps.alerting.store.audit_entries()  # type: ignore[union-attr]
    assert [e["verb"] for e in entries][:2] == ["resume_confirmed", "drain"]
    await settle(r)
    assert any("confirmed" in m["text"] for m in thread_of(emulator, msg["ts"]))


async def test_auto_drain_takes_named_causes_out_once_and_holds_past_the_limit(
    start_replica: StartReplica, emulator: SlackEmulator, tmp_path: Path
) -> None:
    config = tmp_path / "meowbot.yaml"
    # A limit of one drain an hour on this fleet: the second node is held for a person.
    config.write_text(
        "alerts:\n  auto_drain_causes: [GpuXid79]\n  drain_share_per_hour: 0.000001\n"
    )
    r = await start_replica(MEOWBOT_CONFIG=str(config))
    await r.send(webhook([am_alert("gpu-0021", "GpuXid79", severity="critical")]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    sched = r.bot.deps.triage.scheduler
    assert sched is not None
    node = (await sched.nodes(["gpu-0021"]))["gpu-0021"]
    assert node.down and node.reason is not None and "meowbot-auto-drain" in node.reason
    # A cause not named is never drained by itself.
    await r.send(webhook([am_alert("gpu-0022", "NvlinkReplayErrors", severity="warning")]))
    # The same alert again and a second Xid 79 node: the first is not drained again, the
    # second waits for a person because the hour's limit is spent.
    await r.send(
        webhook(
            [
                am_alert("gpu-0021", "GpuXid79", severity="critical"),
                am_alert("gpu-0023", "GpuXid79", severity="critical"),
            ]
        )
    )
    await settle(r)
    assert not (await sched.nodes(["gpu-0022"]))["gpu-0022"].out_of_service
    assert not (await sched.nodes(["gpu-0023"]))["gpu-0023"].out_of_service
    entries = await r.bot.deps.alerting.store.audit_entries()  # type: ignore[union-attr]
    verbs = [e["verb"] for e in entries]
    assert verbs.count("drain_now") == 1 and verbs.count("auto_drain_held") == 1

    def replies() -> list[str]:
        return [
            m["text"]
            for m in emulator.messages(CHANNEL)
            if m.get("thread_ts") not in (None, m["ts"])
        ]

    # The held line is queued by the auto-drain after the notifier's step: the next tick's.
    await eventually(
        lambda: any("set down" in t and "gpu-0021" in t for t in replies()), "the drain's line"
    )
    await eventually(
        lambda: any("held" in t and "gpu-0023" in t for t in replies()), "the held node's line"
    )


async def test_an_alert_that_fires_again_is_a_line_in_the_thread(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    leaf, nodes = leaf_nodes(r.bot, 2)
    a, b = (am_alert(n, "InfinibandLinkDown", leaf_switch=leaf) for n in nodes)
    await r.send(webhook([a, b]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    resolved_a = {**a, "status": "resolved", "endsAt": datetime.now(UTC).isoformat()}
    await r.send(webhook([resolved_a]))
    await settle(r)
    await r.send(webhook([a]))  # nodes[0]'s port flaps back down
    await settle(r)
    [msg] = top_level(emulator)
    replies = thread_of(emulator, msg["ts"])
    assert len(replies) == 1 and "again" in replies[0]["text"] and nodes[0] in replies[0]["text"]
    assert len(emulator.calls_to("chat.postMessage")) == 2  # the group and its one reply
    store = r.bot.deps.alerting.store  # type: ignore[union-attr]
    [gid] = await store.open_ids()
    group = await store.group(gid)
    assert group is not None and group.replies == () and len(group.firing) == 2
