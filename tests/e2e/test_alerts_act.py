"""Alerts only where someone should act, end to end: the bot on its simulated fleet, real
Redis, the Slack emulator, buttons pressed with real block_actions payloads.

- an application's Xid (13) on a healthy node is kept (the store, /hw-faults) but not posted,
  unless `alerts.post` names it;
- each node's button follows its scheduler state when the message is drawn: Drain in service,
  Resume only after meowbot's own drain, neither for an operator's drain (the message says who
  holds it), and a stale Drain pressed after the state changed is still checked;
- an alert's "since" after a restart is its fault's recorded history, or says that meowbot
  saw it only from when it began watching.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.alerts.runtime import NOTIFY_LOCK, Alerting
from bot.backends.alert_store import RedisAlertStore
from bot.backends.state import key
from bot.models import FaultKind
from bot.render.alerts import ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION
from bot.server import Bot
from bot.shell.emulator import SlackEmulator, validate_blocks
from bot.triage.owners import TellingScheduler
from tests.e2e.test_alerts import (
    CHANNEL,
    StartReplica,
    am_alert,
    settle,
    start_replica,
    team,
    top_level,
    webhook,
)
from tests.e2e.test_alerts_sweep import fleet_of, next_interval
from tests.waiting import eventually

__all__ = ["start_replica", "team"]  # fixtures, used by name

FLEET = "sim:64"


def alerting(bot: Bot) -> Alerting:
    assert bot.deps.alerting is not None
    return bot.deps.alerting


def healthy_node(bot: Bot) -> str:
    """A node with no fault of the seed's own."""
    fleet = fleet_of(bot)
    faulty = {f.node for f in fleet.injected}
    return next(n for n in fleet.topology.names if n not in faulty)


def blocks_of(emulator: SlackEmulator, ts: str) -> str:
    return json.dumps(emulator.message(CHANNEL, ts)["blocks"])


async def redrawn(emulator: SlackEmulator, ts: str, needle: str, timeout_s: float = 10) -> str:
    """The message's blocks once they hold `needle` (the notifier redraws within a tick)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        text = blocks_of(emulator, ts)
        if needle in text:
            return text
        await asyncio.sleep(0.05)
    raise AssertionError(f"{needle!r} never drawn: {blocks_of(emulator, ts)}")


async def test_an_application_xid_on_a_healthy_node_stays_out_of_the_channel(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica(MEOWBOT_FLEET=FLEET)
    node = healthy_node(r.bot)
    fleet_of(r.bot).inject(FaultKind.XID, node, 2, datetime.now(UTC) - timedelta(minutes=5), xid=13)
    assert await alerting(r.bot).sweep_once() is not None
    await settle(r)
    store = alerting(r.bot).store
    groups = await store.groups(await store.open_ids())
    # Kept: the event is in the store, firing on the node...
    xid13 = groups["xid_13|event|"]
    assert [a.node for a in xid13.firing] == [node] and xid13.ts is None
    # ...and not posted: every other event has its message, this one none, and nothing waits.
    posted = {m["ts"] for m in top_level(emulator)}
    assert posted and {g.ts for g in groups.values() if g.key.id != xid13.key.id} == posted
    assert not any("Xid 13" in json.dumps(m["blocks"]) for m in top_level(emulator))
    assert await store.dirty() == []
    # /hw-faults still lists it.
    await r.slack.command("/hw-faults", "xid")
    await emulator.wait_for_responses(1, timeout=20)
    listed = json.dumps(emulator.responses[-1][1])
    assert "Xid 13" in listed and node in listed


async def test_an_info_finding_named_in_alerts_post_is_posted_without_drain_or_resume(
    start_replica: StartReplica, emulator: SlackEmulator, tmp_path: Path
) -> None:
    config = tmp_path / "meowbot.yaml"
    config.write_text("alerts:\n  post: [critical, warning, xid_13]\n")
    r = await start_replica(MEOWBOT_FLEET=FLEET, MEOWBOT_CONFIG=str(config))
    node = healthy_node(r.bot)
    fleet_of(r.bot).inject(FaultKind.XID, node, 2, datetime.now(UTC) - timedelta(minutes=5), xid=13)
    assert await alerting(r.bot).sweep_once() is not None
    await settle(r)
    [shown] = [m for m in top_level(emulator) if "Xid 13" in json.dumps(m["blocks"])]
    # An application's Xid says nothing against the node: no Drain, and no Resume for a node
    # nobody drained.
    text = json.dumps(shown["blocks"])
    assert ALERT_DRAIN_ACTION not in text and ALERT_RESUME_ACTION not in text


async def test_each_node_gets_the_button_its_scheduler_state_gives(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    sched = r.bot.deps.triage.scheduler
    assert isinstance(sched, TellingScheduler)
    inner = sched.inner
    # An operator drained gpu-0003 by hand before the alert came.
    await inner.drain("gpu-0003", "rack maintenance (ops)")
    await r.send(
        webhook([am_alert(n, "NvlinkReplayErrors") for n in ("gpu-0001", "gpu-0002", "gpu-0003")])
    )
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    [msg] = top_level(emulator)
    ts = msg["ts"]
    text = json.dumps(msg["blocks"])
    assert validate_blocks(msg["blocks"]) == []
    # A warning: Drain after jobs for the nodes in service, no Resume for nodes nobody drained.
    assert "Drain gpu-0001 after jobs" in text and "Drain gpu-0002 after jobs" in text
    assert ALERT_RESUME_ACTION not in text
    # The operator's node: neither button, and who holds it.
    assert "gpu-0003 after jobs" not in text and "Resume gpu-0003" not in text
    assert "`gpu-0003` drained by an operator" in text
    assert "rack maintenance (ops)" in text

    # A Drain pressed from this message once an operator took gpu-0002 out: the press reads
    # the node first and changes nothing.
    stale = emulator.block_actions_payload(CHANNEL, ts, f"{ALERT_DRAIN_ACTION}#2")
    assert stale["actions"][0]["value"].endswith("|gpu-0002")
    await inner.drain("gpu-0002", "bad DIMM, ticket 4411")
    await r.slack.interactive(stale)
    await emulator.wait_for_responses(1)
    assert "I do not overwrite it" in emulator.responses[-1][1]["text"]
    assert (await inner.nodes(["gpu-0002"]))["gpu-0002"].reason == "bad DIMM, ticket 4411"
    # Redrawn with the state as it now is: gpu-0002 is the operator's too.
    text = await redrawn(emulator, ts, "`gpu-0002` drained by an operator")
    assert "Drain gpu-0002 after jobs" not in text

    # meowbot drains gpu-0001: Resume in Drain's place, and the message says whose drain it is.
    await r.slack.interactive(emulator.block_actions_payload(CHANNEL, ts, ALERT_DRAIN_ACTION))
    await emulator.wait_for_responses(2)
    text = await redrawn(emulator, ts, "Resume gpu-0001")
    assert "Drain gpu-0001" not in text and "`gpu-0001` drained by meowbot" in text
    # Resumed: back in service, Drain again.
    await r.slack.interactive(emulator.block_actions_payload(CHANNEL, ts, ALERT_RESUME_ACTION))
    await emulator.wait_for_responses(3)
    assert not (await inner.nodes(["gpu-0001"]))["gpu-0001"].out_of_service
    text = await redrawn(emulator, ts, "Drain gpu-0001 after jobs")
    assert ALERT_RESUME_ACTION not in text


async def test_without_a_scheduler_an_alert_offers_no_drain_or_resume(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    # The same bot with its scheduler gone (a metrics source and no Slurm, no Kubernetes).
    r.bot.deps.triage.scheduler = None
    if r.bot.deps.alerting is not None:  # handed the scheduler on their own
        r.bot.deps.alerting.scheduler = None
    await r.send(webhook([am_alert("gpu-0001", "GpuXid79", severity="critical")]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    [msg] = top_level(emulator)
    text = json.dumps(msg["blocks"])
    assert ALERT_DRAIN_ACTION not in text and ALERT_RESUME_ACTION not in text
    assert "No scheduler is configured" in text


def since_of(emulator: SlackEmulator, needle: str) -> str:
    [msg] = [m for m in top_level(emulator) if needle in json.dumps(m["blocks"])]
    contexts = [
        e["text"]
        for b in msg["blocks"]
        if b["type"] == "context"
        for e in b["elements"]
        if "ince" in e.get("text", "")
    ]
    return str(contexts[0])


async def test_after_a_restart_an_alert_dates_its_fault_from_its_history(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica(MEOWBOT_FLEET=FLEET)
    node = healthy_node(r.bot)
    fleet_of(r.bot).inject(
        FaultKind.XID, node, 1, datetime.now(UTC) - timedelta(minutes=30), xid=79
    )
    assert await alerting(r.bot).sweep_once() is not None

    def posted() -> bool:
        return any(node in json.dumps(m["blocks"]) for m in top_level(emulator))

    # On a loaded machine the notifier can start after `settle` looked: wait for the post.
    await eventually(posted, "the sweep's alert is posted")
    await settle(r)
    # The first sweep of a fresh store: meowbot says it saw the fault from then, no more
    # (not "Since 04:10 (0 min ago)" for a fault already there).
    first = since_of(emulator, node)
    assert first.startswith("Seen since meowbot began watching at ")
    assert "how long before that is not known" in first
    store = alerting(r.bot).store
    assert isinstance(store, RedisAlertStore)
    [group] = [
        g for g in (await store.groups(await store.open_ids())).values() if g.key.cause == "xid_79"
    ]
    seen_at = group.firing[0].starts_at

    # Later, the alert state is gone (its keys lost), the fault history kept, which first saw
    # the fault ten minutes before this; a sweep after a pause longer than the watch's gap is
    # a new watch.
    history_key = key("", "triage", "faults", node)
    stored = json.loads(await store.redis.get(history_key))
    [entry] = [o for o in stored if o[0] == "xid79"]
    assert abs(entry[3] - seen_at.timestamp()) < 1  # the history holds the first sweep's
    entry[3] -= 600
    await store.redis.set(history_key, json.dumps(stored))
    await store.redis.delete(*[k async for k in store.redis.scan_iter("meowbot:_:alerts:*")])
    await store.redis.hset(key("", "alerts", "watch"), mapping={"last": "1", "since": "1"})
    await next_interval(r.bot)
    assert await alerting(r.bot).sweep_once() is not None

    async def reposted() -> bool:
        groups = await store.groups(await store.open_ids())
        return any(g.key.cause == "xid_79" and g.ts for g in groups.values())

    calls_before = len(emulator.calls)
    try:
        await eventually(reposted, "the alert is posted again")
    except AssertionError as exc:  # what the notifier had, so that a failure can be read
        groups = await store.groups(await store.open_ids())
        state = {
            "groups": [
                (g.key.cause, g.ts, g.channel, g.severity.value, g.firing[0].summary[-80:])
                for g in groups.values()
                if g.firing
            ],
            "dirty": await store.dirty(),
            "notify lock": await store.redis.get(key("", "alerts", "lock", NOTIFY_LOCK)),
            "slack calls since": [
                (c.method, c.status, c.error) for c in emulator.calls[calls_before:]
            ],
        }
        raise AssertionError(f"{exc}; {state}") from exc
    await settle(r)
    groups = await store.groups(await store.open_ids())
    [again] = [g for g in groups.values() if g.key.cause == "xid_79"]
    alert: Any = again.firing[0]
    # Dated from the history's first sighting, not from this sweep; said as a plain "Since".
    before = seen_at - timedelta(seconds=600)
    assert alert.starts_at == before and not alert.began_unseen
    assert again.ts is not None
    text = blocks_of(emulator, again.ts)
    assert f"Since {before:%Y-%m-%d %H:%M} UTC (" in text
    assert "began watching" not in text
