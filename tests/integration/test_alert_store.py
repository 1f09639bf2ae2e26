"""The alert store against the real redis-server: atomic group changes, the queue, fenced locks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Scope
from bot.alerts.ports import Update
from bot.backends.alert_store import RedisAlertStore
from bot.backends.locks import token_number
from bot.errors import FenceLost
from bot.models import Severity
from bot.offload import Offload

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
KEY = GroupKey(cause="ib_link_down", scope=Scope.LEAF_SWITCH, scope_value="leaf-07")


def alert(node: str) -> Alert:
    return Alert(
        fingerprint=f"fp-{node}",
        source=AlertSource.ALERTMANAGER,
        status=AlertStatus.FIRING,
        cause="ib_link_down",
        node=node,
        severity=Severity.WARNING,
        starts_at=NOW,
    )


def join(a: Alert) -> Callable[[AlertGroup | None], Update[bool]]:
    def change(group: AlertGroup | None) -> Update[bool]:
        if group is not None and any(m.fingerprint == a.fingerprint for m in group.alerts):
            return Update(None, False, dirty=False)
        members = (group.alerts if group else ()) + (a,)
        merged = AlertGroup(key=KEY, alerts=members, opened_at=NOW)
        return Update(merged, True, dirty=True, fingerprints=(a.fingerprint,))

    return change


# The running bot decodes and changes groups on its worker pool; tests and the shell on the loop.
# Both ways must give the same atomic changes.
@pytest.fixture(params=["loop", "workers"])
async def store(redis_url: str, request: pytest.FixtureRequest) -> AsyncIterator[RedisAlertStore]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    team = f"T{id(client)}"
    cpu = Offload() if request.param == "workers" else None
    yield RedisAlertStore(client, team, cpu=cpu)
    if cpu is not None:
        cpu.close()
    keys = [k async for k in client.scan_iter(f"meowbot:{team}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def test_concurrent_writers_join_each_alert_once(store: RedisAlertStore) -> None:
    alerts = [alert(f"gpu-{i:04d}") for i in range(1, 33)]
    # Three replicas receiving the same 32 alerts at the same moment.
    results = await asyncio.gather(
        *(store.update(KEY.id, join(a)) for _ in range(3) for a in alerts)
    )
    assert sum(results) == 32
    group = await store.group(KEY.id)
    assert group is not None and len(group.alerts) == 32
    assert len({m.fingerprint for m in group.alerts}) == 32
    assert await store.groups_of(["fp-gpu-0005", "fp-unseen"]) == [KEY.id, None]
    assert await store.open_ids() == [KEY.id]


async def test_a_change_made_while_the_notifier_works_stays_queued(
    store: RedisAlertStore,
) -> None:
    await store.update(KEY.id, join(alert("gpu-0001")))
    [(gid, seen)] = await store.dirty()
    await store.update(KEY.id, join(alert("gpu-0002")))  # arrives while gid is being posted
    assert await store.clean(gid, seen) is False
    [(_, later)] = await store.dirty()
    assert later > seen
    assert await store.clean(gid, later) is True
    assert await store.dirty() == []


async def test_only_one_holder_and_a_stale_holder_cannot_write(store: RedisAlertStore) -> None:
    first = await store.acquire("notify", ttl_ms=200)
    assert first is not None
    assert await store.acquire("notify", ttl_ms=200) is None
    assert await store.renew(first, 200) is True
    await asyncio.sleep(0.3)  # first pauses past its lock's lifetime
    second = await store.acquire("notify", ttl_ms=5000)
    assert second is not None and token_number(second.token) > token_number(first.token)
    assert await store.renew(first, 200) is False
    with pytest.raises(FenceLost):
        await store.update(KEY.id, join(alert("gpu-0001")), fence=first)
    assert await store.group(KEY.id) is None
    await store.update(KEY.id, join(alert("gpu-0001")), fence=second)
    assert await store.group(KEY.id) is not None
    await store.release(first)  # not its lock any more: a no-op
    assert await store.acquire("notify", ttl_ms=200) is None
    await store.release(second)
    assert await store.acquire("notify", ttl_ms=200) is not None


async def test_drains_are_counted_by_time_and_confirmations_taken_once(
    store: RedisAlertStore,
) -> None:
    t = NOW.timestamp()
    await store.record_drain("gpu-0001", t - 4000)
    await store.record_drain("gpu-0002", t - 100)
    await store.record_drain("gpu-0003", t)
    assert await store.drains_since(t - 3600) == 2
    await store.put_pending("p1", {"node": "gpu-0009", "by": "U1"}, ttl_s=60)
    assert await store.take_pending("p1") == {"node": "gpu-0009", "by": "U1"}
    assert await store.take_pending("p1") is None
    await store.audit({"verb": "drain", "node": "gpu-0003", "user": "U0ADMIN"})
    assert (await store.audit_entries())[0]["node"] == "gpu-0003"


async def test_a_groups_alerts_join_in_batches_as_they_would_one_by_one(
    store: RedisAlertStore,
) -> None:
    """200 alerts of one cause: the group gets each once, in 4 transactions (64 a batch), not
    200; the same alerts again are repeats and write nothing."""
    from bot.alerts.config import AlertsConfig
    from bot.alerts.dispatch import Change
    from bot.alerts.ingest import BATCH, ingest

    alerts = [alert(f"gpu-{i:04d}") for i in range(1, 201)]
    writes: list[int] = []
    real = store.update

    async def counted(gid: str, change: Any, **kw: Any) -> Any:
        writes.append(1)
        return await real(gid, change, **kw)

    store.update = counted  # type: ignore[method-assign]
    first = await ingest(store, alerts, lambda n: None, AlertsConfig(), NOW)
    assert len(writes) == -(-200 // BATCH) == 4
    assert first.changes[Change.NEW_GROUP] == 1 and first.changes[Change.JOINED] == 199
    (gid,) = first.groups
    group = await store.group(gid)
    assert group is not None and [m.node for m in group.alerts] == [a.node for a in alerts]
    assert await store.groups_of([a.fingerprint for a in alerts]) == [gid] * 200
    again = await ingest(store, alerts, lambda n: None, AlertsConfig(), NOW)
    assert again.changes == {Change.REPEAT: 200} and again.groups == {gid}


async def test_many_groups_read_at_once_are_the_groups_written(store: RedisAlertStore) -> None:
    # More groups than one decoding step (a sweep reads every open group of a 50,000-node fleet).
    keys = [
        GroupKey(cause="ib_link_down", scope=Scope.LEAF_SWITCH, scope_value=f"leaf-{i:03d}")
        for i in range(150)
    ]

    def opened(k: GroupKey, a: Alert) -> Callable[[AlertGroup | None], Update[bool]]:
        group = AlertGroup(key=k, alerts=(a,), opened_at=NOW)
        return lambda _: Update(group, True, dirty=True, fingerprints=(a.fingerprint,))

    for i, k in enumerate(keys):
        await store.update(k.id, opened(k, alert(f"gpu-{i:04d}")))
    read = await store.groups([*(k.id for k in keys), "ib_link_down|leaf_switch|nowhere"])
    assert list(read) == [k.id for k in keys]  # the unknown id is left out, the order kept
    assert read[keys[77].id] == await store.group(keys[77].id)
    assert [g.alerts[0].node for g in read.values()] == [f"gpu-{i:04d}" for i in range(150)]
    assert sorted(await store.open_ids()) == sorted(k.id for k in keys)


async def test_the_sweeps_watch_begins_after_a_gap_and_is_shared(
    store: RedisAlertStore,
) -> None:
    """Sweeps within the gap of each other are one watch, whichever replica sweeps; a sweep
    after a longer pause (a restart, the bot stopped) begins a new one."""
    from datetime import timedelta

    first = await store.watching(NOW, 60)
    assert first == NOW
    # Two replicas sweeping 5 s apart, then 10 s later: still the watch begun at NOW.
    assert await store.watching(NOW + timedelta(seconds=5), 60) == NOW
    assert await store.watching(NOW + timedelta(seconds=15), 60) == NOW
    # Two minutes with no sweep: what happened meanwhile nobody saw.
    later = NOW + timedelta(seconds=135)
    assert await store.watching(later, 60) == later
    assert await store.watching(later + timedelta(seconds=5), 60) == later
