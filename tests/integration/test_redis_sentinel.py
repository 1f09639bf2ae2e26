"""The Redis client under Sentinel against real processes on loopback (a primary, a replica,
three Sentinels): the factory finds the primary, and the writes that must outlive a failover
wait for the replica, and carry on, counted, when it is gone."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.alerts.models import AlertGroup
from bot.alerts.ports import Update
from bot.backends.alert_store import RedisAlertStore
from bot.backends.highlight_store import ALONE_S, WAIT_MS, RedisHighlightStore
from bot.backends.state import RedisStore
from bot.highlights.models import Reaction
from scripts.testsvc import sentinel
from tests.conftest import need_service

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[sentinel.SentinelSet]:
    need_service("REDIS_URL")  # the session's server says redis-server is installed
    with sentinel.start(tmp_path) as s:
        yield s


@pytest.fixture
async def store(sentinels: sentinel.SentinelSet) -> AsyncIterator[RedisStore]:
    s = RedisStore(sentinels.url)
    yield s
    await s.close()


def reaction(n: int) -> Reaction:
    return Reaction(
        team="T1",
        channel="C1",
        ts="1764676800.000100",
        user=f"U{n}",
        author="UA",
        emoji="meow_party",
        event_ts=f"{1764676800 + n}.000200",
        added=True,
        event_id=f"EvR{n}",
    )


def count_applied(applied: list[int]) -> Callable[[AlertGroup | None], Update[str]]:
    def change(g: AlertGroup | None) -> Update[str]:
        applied.append(1)
        return Update(None, "done", dirty=False)

    return change


async def test_the_client_finds_the_primary_and_writes_wait_for_the_replica(
    sentinels: sentinel.SentinelSet, store: RedisStore
) -> None:
    assert store.wait_replicas == 1
    assert await store.claim("T1", "event", "Ev1", 60) is True
    assert await store.claim("T1", "event", "Ev1", 60) is False
    info = await store.redis.info("server")
    assert int(info["tcp_port"]) == sentinels.primary_port

    hl = RedisHighlightStore(store.redis, wait_replicas=store.wait_replicas)
    for n in range(5):
        assert (await hl.react(reaction(n), threshold=1, now=NOW)).count == n + 1
    assert hl.unconfirmed == 0  # the replica confirmed each one
    alerts = RedisAlertStore(store.redis, "T1", wait_replicas=store.wait_replicas)
    applied: list[int] = []
    assert await alerts.update("g1", count_applied(applied), durable=True) == "done"
    assert applied == [1]  # confirmed by the replica: applied once

    # The replica gone: a reaction waits WAIT_MS once, then the store stops waiting a while.
    sentinels.kill(sentinels.replica_port)
    started = time.monotonic()
    assert (await hl.react(reaction(5), threshold=1, now=NOW)).count == 6
    assert time.monotonic() - started >= WAIT_MS / 1000 * 0.9
    started = time.monotonic()
    assert (await hl.react(reaction(6), threshold=1, now=NOW)).count == 7
    assert time.monotonic() - started < ALONE_S / 10
    assert hl.unconfirmed == 2
    applied.clear()
    assert await alerts.update("g1", count_applied(applied), durable=True) == "done"
    assert applied == [1, 1]  # unconfirmed: written again on the primary of the moment
    assert await store.claim("T1", "event", "Ev2", 60) is True  # claims never wait
