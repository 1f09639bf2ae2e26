"""The passive sweep end to end: the bot on its simulated fleet, real Redis, the Slack emulator.

Faults injected into the bot's own `SimFleet` are found by the health checks of a sweep
(`Alerting.sweep_once`, the body of the sweeper loop), grouped by cause into events, and posted
by the notifier; a fault the fleet heals is resolved by the next sweep and its message updated
in place. The sweep interval is at least 5 s, so the tests call `sweep_once` themselves and make
"the interval passes" happen by deleting the sweep lock, which otherwise lives one interval.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

import pytest

from bot import metric_names as m
from bot.alerts.dispatch import Change
from bot.alerts.models import AlertSource, AlertStatus
from bot.alerts.runtime import SWEEP_LOCK, Alerting
from bot.backends.alert_store import RedisAlertStore
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.backends.state import key
from bot.errors import FenceLost
from bot.models import FaultKind
from bot.render.alerts import RESOLVED_EMOJI
from bot.server import Bot
from bot.shell.emulator import SlackEmulator, validate_blocks
from bot.triage.service import fleet_faults
from tests.e2e.test_alerts import (
    CHANNEL,
    StartReplica,
    named,
    settle,
    start_replica,
    team,
    top_level,
)

__all__ = ["start_replica", "team"]  # fixtures, used by name

# Two leaf switches of 32 nodes; the fleet's seed gives one random fault besides what a test
# injects, so the tests see the sweep report what it finds, not only what they put there.
FLEET = "sim:64"
INTERVAL_S = 5
# A leaf switch's outage is one event of its cause, whichever leaf.
OUTAGE = "InfiniBand link down"
OUTAGE_GID = f"{FaultKind.IB_LINK_DOWN.value}|event|"


def alerting(bot: Bot) -> Alerting:
    assert bot.deps.alerting is not None
    return bot.deps.alerting


def sim_metrics(bot: Bot) -> SimMetrics:
    metrics = bot.deps.triage.metrics
    assert isinstance(metrics, SimMetrics)
    return metrics


def fleet_of(bot: Bot) -> SimFleet:
    return sim_metrics(bot).fleet


def clean_leaf(fleet: SimFleet) -> tuple[str, tuple[str, ...]]:
    """A leaf switch none of whose nodes has a fault yet, and its nodes."""
    faulty = {f.node for f in fleet.injected}
    for leaf in fleet.topology.leaf_switches:
        nodes = tuple(fleet.topology.nodes_on_leaf(leaf))
        if not faulty.intersection(nodes):
            return leaf, nodes
    raise AssertionError("every leaf switch has a fault")


async def next_interval(bot: Bot) -> None:
    """The sweep interval passes: the sweep lock (held for a sweep and the rest of its
    interval) is gone."""
    store = alerting(bot).store
    assert isinstance(store, RedisAlertStore)
    await store.redis.delete(key("", "alerts", "lock", SWEEP_LOCK))


def header(message: dict[str, Any]) -> str:
    return str(message["blocks"][0]["text"]["text"])


def messages_about(emulator: SlackEmulator, needle: str) -> list[dict[str, Any]]:
    return [msg for msg in top_level(emulator) if needle in header(msg)]


def top_posts(emulator: SlackEmulator) -> list[Any]:
    """Top-level posts (a big event's per-node detail goes into its thread)."""
    return [c for c in emulator.calls_to("chat.postMessage") if not c.args.get("thread_ts")]


def calls_on(emulator: SlackEmulator, method: str, ts: str) -> int:
    return sum(1 for c in emulator.calls_to(method) if c.args.get("ts") == ts)


async def test_a_sweep_turns_a_leaf_switch_outage_into_one_message(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica(MEOWBOT_FLEET=FLEET)
    fleet = fleet_of(r.bot)
    leaf, nodes = clean_leaf(fleet)
    fleet.inject_leaf_outage(leaf)
    done = await alerting(r.bot).sweep_once()
    assert done is not None
    await settle(r)

    store = alerting(r.bot).store
    groups = await store.groups(await store.open_ids())
    outage = groups[OUTAGE_GID]
    assert outage.nodes == tuple(sorted(nodes))
    assert {(a.source, a.status) for a in outage.alerts} == {
        (AlertSource.SWEEP, AlertStatus.FIRING)
    }
    # 32 nodes down under one switch: one message, not 32; and one message for each group.
    [msg] = messages_about(emulator, OUTAGE)
    assert f"({FaultKind.IB_LINK_DOWN.value}) on {len(nodes)} nodes in " in header(msg)
    # Where they sit: all under one leaf switch, which the message says.
    assert f"*By leaf switch:* {leaf} {len(nodes)}" in json.dumps(msg["blocks"])
    assert validate_blocks(msg["blocks"]) == []
    assert done.changes[Change.NEW_GROUP] == len(groups) >= 2  # the seed's own fault too
    assert len(top_level(emulator)) == len(groups) == len(top_posts(emulator))
    assert {g.ts for g in groups.values()} == {msg["ts"] for msg in top_level(emulator)}

    # The next interval finds the same faults: nothing changes, nothing is posted again.
    calls = len(emulator.calls)
    await next_interval(r.bot)
    again = await alerting(r.bot).sweep_once()
    assert again is not None and set(again.changes) == {Change.REPEAT}
    await asyncio.sleep(0.5)
    assert len(emulator.calls) == calls


async def test_a_fault_that_clears_resolves_and_its_message_is_updated_in_place(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica(MEOWBOT_FLEET=FLEET)
    fleet = fleet_of(r.bot)
    sweeper = alerting(r.bot)
    leaf, nodes = clean_leaf(fleet)
    fleet.inject_leaf_outage(leaf)
    assert await sweeper.sweep_once() is not None
    await settle(r)
    [msg] = messages_about(emulator, OUTAGE)
    ts = msg["ts"]
    assert f"*{len(nodes)}* firing, *0* resolved" in json.dumps(msg["blocks"])
    updates = calls_on(emulator, "chat.update", ts)  # the sweep's 32 joins may coalesce or not

    # One node's ports come back: that member resolves, the message says so in place.
    assert fleet.heal(nodes[0])
    await next_interval(r.bot)
    done = await sweeper.sweep_once()
    assert done is not None and done.changes[Change.RESOLVED_MEMBER] == 1
    await settle(r)
    shown = json.dumps(emulator.message(CHANNEL, ts)["blocks"])
    assert f"*{len(nodes) - 1}* firing, *1* resolved" in shown
    assert calls_on(emulator, "chat.update", ts) == updates + 1
    gid = OUTAGE_GID
    group = await sweeper.store.group(gid)
    assert group is not None and {a.node for a in group.firing} == set(nodes[1:])

    # The switch is replaced: every member resolves, the same message is marked resolved.
    for node in nodes[1:]:
        fleet.heal(node, FaultKind.IB_LINK_DOWN)
    await next_interval(r.bot)
    done = await sweeper.sweep_once()
    assert done is not None
    assert done.changes[Change.RESOLVED_MEMBER] == len(nodes) - 2
    assert done.changes[Change.GROUP_RESOLVED] == 1
    await settle(r)
    final = emulator.message(CHANNEL, ts)
    assert header(final).startswith(
        f"{RESOLVED_EMOJI} RESOLVED: InfiniBand link down ({FaultKind.IB_LINK_DOWN.value})"
    )
    assert f"*0* firing, *{len(nodes)}* resolved" in json.dumps(final["blocks"])
    assert not any(b["type"] == "actions" for b in final["blocks"])  # nothing left to drain
    assert len(messages_about(emulator, OUTAGE)) == 1
    assert calls_on(emulator, "chat.update", ts) >= updates + 2  # 31 resolves, maybe coalesced
    assert emulator.calls_to("chat.delete") == []
    store = sweeper.store
    group = await store.group(gid)
    assert group is not None and group.resolved and group.ts == ts
    assert gid not in await store.open_ids()

    # A later sweep has nothing more to say about it.
    calls = len(emulator.calls)
    await next_interval(r.bot)
    later = await sweeper.sweep_once()
    assert later is not None and Change.RESOLVED_MEMBER not in later.changes
    await asyncio.sleep(0.5)
    assert len(emulator.calls) == calls


async def test_three_replicas_sweeping_at_once_sweep_once_and_post_each_group_once(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    replicas = [
        await start_replica(MEOWBOT_FLEET=FLEET, MEOWBOT_SWEEP_INTERVAL=str(INTERVAL_S))
        for _ in range(3)
    ]
    fleets = [fleet_of(r.bot) for r in replicas]
    leaf, _ = clean_leaf(fleets[0])
    for fleet in fleets:  # one real fleet, seen by each replica through its own backend
        fleet.inject_leaf_outage(leaf)
    sweepers = [alerting(r.bot) for r in replicas]

    results = await asyncio.gather(*(s.sweep_once() for s in sweepers))
    swept = [res for res in results if res is not None]
    assert len(swept) == 1, results
    store = sweepers[0].store
    assert isinstance(store, RedisAlertStore)
    # The lock outlives the sweep by the rest of the interval: the next sweep is due then.
    ttl_ms = await store.redis.pttl(key("", "alerts", "lock", SWEEP_LOCK))
    assert (INTERVAL_S - 2) * 1000 < ttl_ms <= INTERVAL_S * 1000
    again = await asyncio.gather(*(s.sweep_once() for s in sweepers))
    assert again == [None, None, None]  # within the interval nobody sweeps again
    await settle(replicas[0])
    groups = await store.groups(await store.open_ids())
    assert swept[0].changes[Change.NEW_GROUP] == len(groups)
    assert len(top_posts(emulator)) == len(top_level(emulator)) == len(groups)
    assert len(messages_about(emulator, OUTAGE)) == 1

    # The next interval: the three sweep at once again, one does, nothing is posted twice.
    calls = len(emulator.calls)
    await next_interval(replicas[0].bot)
    results = await asyncio.gather(*(s.sweep_once() for s in sweepers))
    swept = [res for res in results if res is not None]
    assert len(swept) == 1 and set(swept[0].changes) == {Change.REPEAT}
    await asyncio.sleep(0.5)
    assert len(emulator.calls) == calls

    # The sweeper loops themselves, started together on the three replicas: one reads the fleet.
    await next_interval(replicas[0].bot)
    metrics = [sim_metrics(r.bot) for r in replicas]
    before = [x.queries for x in metrics]
    for r in replicas:
        r.bot.background.append(asyncio.create_task(alerting(r.bot).sweeper(r.bot.stopping)))
    deadline = time.monotonic() + 10
    while not any(x.queries > b for x, b in zip(metrics, before, strict=True)):
        assert time.monotonic() < deadline, "no replica swept"
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # the others have tried by now and found the lock held
    read = [x.queries > b for x, b in zip(metrics, before, strict=True)]
    assert sum(read) == 1, read
    assert len(top_posts(emulator)) == len(groups)


async def test_a_lone_replica_sweeps_at_every_beat_not_every_other(
    start_replica: StartReplica,
) -> None:
    # The lock a sweep leaves for the rest of its interval lapses before the next beat: held
    # to the beat itself, the sweep's own next try found it held, one beat in two.
    r = await start_replica(MEOWBOT_FLEET=FLEET, MEOWBOT_SWEEP_INTERVAL="1")
    sweeper = alerting(r.bot)
    tries: list[bool] = []
    inner = sweeper.sweep_once

    async def counted() -> Any:
        done = await inner()
        tries.append(done is not None)
        return done

    sweeper.sweep_once = counted  # type: ignore[method-assign]
    r.bot.background.append(asyncio.create_task(sweeper.sweeper(r.bot.stopping)))
    await asyncio.sleep(4.5)  # beats at 0, 1, 2, 3 and 4 s
    assert sum(tries) >= 4 and tries.count(False) <= 1, tries


class PausedAfterRead(SimMetrics):
    """The simulated fleet, read by a replica that then stalls (a GC pause, a slow host) until
    the test lets it go on: what it read is stale by then."""

    def __init__(self, fleet: SimFleet) -> None:
        super().__init__(fleet)
        self.read_done = asyncio.Event()
        self.go_on = asyncio.Event()

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        table = await super().read(*args, **kwargs)
        self.read_done.set()
        await self.go_on.wait()
        return table


async def test_a_sweeper_that_stalled_past_its_interval_writes_nothing(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    slow, fast = [await start_replica(MEOWBOT_FLEET=FLEET) for _ in range(2)]
    leaf, nodes = clean_leaf(fleet_of(slow.bot))
    for r in (slow, fast):
        fleet_of(r.bot).inject_leaf_outage(leaf)
    assert await alerting(fast.bot).sweep_once() is not None
    await settle(fast)
    [msg] = messages_about(emulator, OUTAGE)

    # The slow replica takes the next sweep and reads the fleet: 32 nodes down. Then it stalls.
    await next_interval(fast.bot)
    stalled = alerting(slow.bot)
    paused = PausedAfterRead(fleet_of(slow.bot))
    stalled.triage = replace(stalled.triage, metrics=paused)
    sweep = asyncio.create_task(stalled.sweep_once())
    await asyncio.wait_for(paused.read_done.wait(), 10)
    # Meanwhile a node is mended, the interval passes and the other replica sweeps.
    for r in (slow, fast):
        fleet_of(r.bot).heal(nodes[0])
    await next_interval(fast.bot)
    done = await alerting(fast.bot).sweep_once()
    assert done is not None and done.changes[Change.RESOLVED_MEMBER] == 1
    # The stalled sweep wakes with a fence that is no longer the lock's: its stale "32 down"
    # (which would fire the mended node again) is refused, not written.
    paused.go_on.set()
    with pytest.raises(FenceLost):
        await sweep
    await settle(fast)
    group = await stalled.store.group(OUTAGE_GID)
    assert group is not None and {a.node for a in group.firing} == set(nodes[1:])
    assert f"*{len(nodes) - 1}* firing, *1* resolved" in json.dumps(
        emulator.message(CHANNEL, msg["ts"])["blocks"]
    )
    assert len(messages_about(emulator, OUTAGE)) == 1


async def test_checks_that_could_not_run_never_resolve_their_alerts(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica(MEOWBOT_FLEET=FLEET)
    fleet = fleet_of(r.bot)
    sweeper = alerting(r.bot)
    faulty = {f.node for f in fleet.injected}
    # The fleet's seed may have a double-bit ECC error of its own: the same cause, one event.
    seeded = {f.node for f in fleet.injected if f.kind is FaultKind.ECC_DBE}
    ecc_node, xid_node = [n for n in fleet.nodes if n not in faulty][:2]
    fleet.inject(FaultKind.ECC_DBE, ecc_node, gpu=2)
    fleet.inject(FaultKind.XID, xid_node, gpu=5, xid=79)
    assert await sweeper.sweep_once() is not None
    await settle(r)
    [ecc_msg] = messages_about(emulator, f"({FaultKind.ECC_DBE.value}) on ")
    assert named(json.dumps(ecc_msg["blocks"])) == {ecc_node, *seeded}
    # The sweep names the Xid by its code, as Alertmanager's `xid` label does.
    [xid_msg] = messages_about(emulator, f"Xid 79 on {xid_node}")

    # dcgm-exporter restarts with its default counter set (no ECC counters), and meanwhile
    # both GPUs are mended: the same fleet, seen through an exporter that no longer has ECC.
    blind = SimFleet(
        fleet.n_nodes,
        seed=fleet.seed,
        now=fleet.now,
        disabled_metrics=[m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL],
    )
    assert {f.node for f in blind.injected} == faulty  # the seed's faults, not the two above
    sweeper.triage = replace(
        sweeper.triage, metrics=SimMetrics(blind), inventory=SimInventory(blind)
    )
    found = await fleet_faults(sweeper.triage, sweeper.cfg.sweep_window_s)
    assert FaultKind.ECC_DBE in found.unchecked and FaultKind.XID not in found.unchecked

    await next_interval(r.bot)
    done = await sweeper.sweep_once()
    assert done is not None and done.changes[Change.GROUP_RESOLVED] == 1
    await settle(r)
    store = sweeper.store
    ecc = await store.group(f"{FaultKind.ECC_DBE.value}|event|")
    xid = await store.group("xid_79|event|")
    assert ecc is not None and not ecc.resolved  # absence of the metric proves nothing
    assert xid is not None and xid.resolved  # the Xid check ran and found the GPU well
    assert "RESOLVED" in header(emulator.message(CHANNEL, xid_msg["ts"]))
    assert "RESOLVED" not in header(emulator.message(CHANNEL, ecc_msg["ts"]))
    assert calls_on(emulator, "chat.update", ecc_msg["ts"]) == 0
    assert calls_on(emulator, "chat.update", xid_msg["ts"]) == 1

    # Once the counters are back and the GPU is found mended, the ECC alert resolves too.
    fleet.heal(ecc_node)
    fleet.heal(xid_node)
    sweeper.triage = replace(
        sweeper.triage, metrics=SimMetrics(fleet), inventory=SimInventory(fleet)
    )
    await next_interval(r.bot)
    done = await sweeper.sweep_once()
    assert done is not None
    assert done.changes[Change.GROUP_RESOLVED if not seeded else Change.RESOLVED_MEMBER] == 1
    await settle(r)
    ecc_shown = emulator.message(CHANNEL, ecc_msg["ts"])
    if seeded:  # the seed's node still has its fault: the event is open, one node resolved
        assert f"*{len(seeded)}* firing, *1* resolved" in json.dumps(ecc_shown["blocks"])
    else:
        assert "RESOLVED" in header(ecc_shown)
