"""Redis Sentinel failover end to end: the real bot on REDIS_URL=redis+sentinel://..., a primary,
a replica and three Sentinels as real processes on loopback. The primary is killed (SIGKILL) in
the middle of a reaction storm (signed events into the bot's HTTP endpoint) and an alert storm
(Alertmanager's webhook); Sentinel promotes the replica and the bot carries on: every reaction
counted once, every alert in exactly one posted message, nothing posted twice."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.backends.highlight_store import RedisHighlightStore
from bot.backends.redis_client import retry_policy
from bot.backends.state import RedisStore
from bot.shell.emulator import SlackEmulator
from scripts.testsvc import sentinel
from tests.conftest import need_service
from tests.e2e.conftest import bot_settings
from tests.e2e.test_alerts import (
    CHANNEL,
    TOKEN,
    Replica,
    am_alert,
    named,
    settle,
    top_level,
    top_posts,
    webhook,
)

TEAM = "T0TEST"
PEOPLE = [f"U0P{i:02d}" for i in range(12)]
MESSAGES = 20
XID_NODES = [f"gpu-{i:04d}" for i in range(1, 31)]
IB_NODES = [f"gpu-{i:04d}" for i in range(101, 121)]
# As Slack: a delivery not answered 200 within 3 s is sent again, a few times.
SLACK_TIMEOUT_S = 3.0
DELIVERY_DEADLINE_S = 40.0


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[sentinel.SentinelSet]:
    need_service("REDIS_URL")  # the session's server says redis-server is installed
    with sentinel.start(tmp_path) as s:
        yield s


@dataclass
class Tally:
    """What the test's Slack and Alertmanager saw."""

    delivered: int = 0
    resent: int = 0
    refused: int = 0
    latencies: list[float] = field(default_factory=list)


async def deliver(send: Callable[[int | None], Awaitable[int]], tally: Tally) -> None:
    """Sends until answered 200, as Slack and Alertmanager do: a refusal or no answer within
    SLACK_TIMEOUT_S is sent again (the first try may still be running: that is the point)."""
    started = time.monotonic()
    retry: int | None = None
    while True:
        try:
            status = await asyncio.wait_for(send(retry), SLACK_TIMEOUT_S)
        except TimeoutError:
            status = 0
        if status == 200:
            tally.delivered += 1
            tally.latencies.append(time.monotonic() - started)
            return
        tally.refused += status != 0
        tally.resent += 1
        assert time.monotonic() - started < DELIVERY_DEADLINE_S, "never accepted"
        retry = (retry or 0) + 1
        await asyncio.sleep(0.2)


def ts(n: int) -> str:
    return f"{int(time.time()) - 3600 + n}.000100"


async def test_primary_killed_mid_storm_loses_nothing_and_posts_nothing_twice(
    emulator: SlackEmulator, sentinels: sentinel.SentinelSet
) -> None:
    emulator.add_channel(CHANNEL, "gpu-alerts")
    for person in PEOPLE:
        emulator.add_user(person, person.lower())
    stamps = [ts(n) for n in range(MESSAGES)]
    for n, stamp in enumerate(stamps):
        emulator.add_message("C0GENERAL", ts=stamp, text=f"result {n}", user="U0ADMIN")
    settings = bot_settings(
        emulator,
        sentinels.url,
        ALERTMANAGER_WEBHOOK_TOKEN=TOKEN,
        MEOWBOT_ALERT_CHANNEL=CHANNEL,
        MEOWBOT_ADMINS="U0ADMIN",
        ALERTMANAGER_URL=None,
    )
    bot = await create_bot(settings)
    async with aiohttp.ClientSession() as http:
        try:
            port = await bot.start_http("127.0.0.1", 0)
            bot.start_background(sweep=False)
            r = Replica(bot, port, http, emulator)
            await storm(r, emulator, sentinels)
        finally:
            await bot.close()


async def storm(r: Replica, emulator: SlackEmulator, sentinels: sentinel.SentinelSet) -> None:
    store = r.bot.deps.store
    assert isinstance(store, RedisStore) and store.wait_replicas == 1
    assert r.bot.deps.highlights.hl is not None
    hl_store = r.bot.deps.highlights.hl.store
    assert isinstance(hl_store, RedisHighlightStore)
    policy = retry_policy(store.redis)
    old_primary = sentinels.primary_named_by_sentinels()
    assert old_primary == sentinels.primary_port

    # Every person reacts once to every message, in a random order; the alerts come in small
    # webhooks: two causes, so two events, each to be posted once.
    reactions = [(stamp, p) for stamp in _stamps(emulator) for p in PEOPLE]
    random.Random(7).shuffle(reactions)
    alerts = [am_alert(n, "GpuXid79", severity="critical") for n in XID_NODES]
    alerts += [am_alert(n, leaf_switch="leaf-x") for n in IB_NODES]
    random.Random(8).shuffle(alerts)
    batches = [alerts[i : i + 2] for i in range(0, len(alerts), 2)]

    tally_rx, tally_am = Tally(), Tally()
    lanes = asyncio.Semaphore(8)

    async def react(stamp: str, person: str) -> None:
        event = emulator.react("C0GENERAL", stamp, person, "meow_party")

        async def send(retry: int | None) -> int:
            return (await r.slack.event(event, retry=retry))[0]

        async with lanes:
            await deliver(send, tally_rx)

    async def alert(batch: list[dict[str, Any]]) -> None:
        async def send(_retry: int | None) -> int:
            return (await r.send(webhook(batch)))[0]

        async with lanes:
            await deliver(send, tally_am)
            await asyncio.sleep(0.05)

    work = [asyncio.create_task(react(s, p)) for s, p in reactions]
    work += [asyncio.create_task(alert(b)) for b in batches]
    # Kill the primary once a third of the reactions are in: mid-storm for both.
    deadline = time.monotonic() + DELIVERY_DEADLINE_S
    while tally_rx.delivered < len(reactions) // 3:
        assert time.monotonic() < deadline, f"only {tally_rx.delivered} reactions in"
        await asyncio.sleep(0.01)
    killed_at = sentinels.kill_primary()
    in_before_kill = tally_rx.delivered + tally_am.delivered
    # Only these may be lost: acknowledged while the old primary lived, no replica confirming.
    unconfirmed_at_kill = hl_store.unconfirmed
    retried_before = policy.retried
    # The first write started after the kill ends on the promoted replica: the failover as the
    # bot sees it (the retry policy waits it out).
    await store.redis.set("meowbot:_:failover-probe", str(killed_at))
    first_write_s = time.monotonic() - killed_at
    await asyncio.gather(*work)
    await settle(r, timeout_s=60)

    # Every Sentinel names the promoted replica (the last to hear may lag a little).
    deadline = time.monotonic() + 20
    while (new_primary := sentinels.primary_named_by_sentinels()) != sentinels.replica_port:
        assert time.monotonic() < deadline, f"the Sentinels name {new_primary}"
        await asyncio.sleep(0.2)
    rx_lat = sorted(tally_rx.latencies)
    print(
        f"\nfailover: primary killed after {in_before_kill} deliveries; first write "
        f"{first_write_s:.2f} s after the kill; redis commands retried: {policy.retried} "
        f"({policy.retried - retried_before} after the kill); reactions {tally_rx.delivered} "
        f"(resent {tally_rx.resent}, refused {tally_rx.refused}, answered in median "
        f"{rx_lat[len(rx_lat) // 2] * 1000:.1f} ms, p90 {rx_lat[len(rx_lat) * 9 // 10] * 1000:.1f}"
        f" ms, slowest {rx_lat[-1]:.2f} s); webhooks "
        f"{tally_am.delivered} (resent {tally_am.resent}); reactions without a replica's "
        f"confirmation: {unconfirmed_at_kill} before the kill, {hl_store.unconfirmed} in all; "
        f"new primary {new_primary}"
    )
    assert policy.retried > 0  # the storm did meet the failover

    # Reactions: each person once on each message. A reaction acknowledged to Slack may be
    # missing only if the old primary acknowledged it without a replica's confirmation; what
    # the promoted replica took after the kill is on the one server left and must all be there.
    lost = 0
    for stamp in _stamps(emulator):
        raw = await store.redis.hgetall(f"meowbot:{TEAM}:hl:msg:C0GENERAL:{stamp}")
        reactors = set(raw.get("reactors", "").split(",")) - {""}
        assert reactors <= set(PEOPLE)
        assert int(raw.get("count", 0)) == len(reactors)  # never a person twice
        lost += len(PEOPLE) - len(reactors)
    assert lost <= unconfirmed_at_kill, f"{lost} reactions lost"

    # Alerts: two causes, two messages, posted once each, naming every node.
    assert len(top_posts(emulator)) == len(top_level(emulator)) == 2
    text = json.dumps([m["blocks"] for m in top_level(emulator)])
    text += json.dumps([m.get("blocks", []) for m in emulator.messages(CHANNEL)])
    assert named(text) >= set(XID_NODES) | set(IB_NODES)


def _stamps(emulator: SlackEmulator) -> list[str]:
    return sorted(
        m["ts"] for m in emulator.messages("C0GENERAL") if m.get("text", "").startswith("result")
    )
