"""The fault history against the real redis-server: what it keeps (90 days, 200 a node), what it
drops, and the sweep recording one occurrence however often it sees a fault."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import redis.asyncio as aioredis

from bot.backends.fault_history import KEEP_DAYS, MAX_PER_NODE, RedisFaultHistory
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import FaultKind
from bot.triage.checks import HealthConfig
from bot.triage.repeats import Occurrence
from bot.triage.service import Triage, fleet_faults

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
INDEX = "meowbot:_:triage:faults:nodes"


def occ(node: str, days_ago: float, gpu: int | None = 3, cause: str = "xid79") -> Occurrence:
    t = NOW - timedelta(days=days_ago)
    return Occurrence(cause, FaultKind.XID, node, gpu, t, t + timedelta(hours=1))


async def test_round_trip_shared_by_replicas(redis_client: aioredis.Redis) -> None:
    one, two = RedisFaultHistory(redis_client), RedisFaultHistory(redis_client)
    saved = [occ("gpu-0042", 20), occ("gpu-0042", 3, gpu=None, cause="unexpected_reboot")]
    await one.save({"gpu-0042": saved, "gpu-0007": [occ("gpu-0007", 1, gpu=0)]}, NOW)
    assert await two.occurrences(["gpu-0042"]) == sorted(saved, key=lambda o: o.last_seen)
    assert {o.node for o in await two.occurrences(None)} == {"gpu-0042", "gpu-0007"}
    assert await two.occurrences(["gpu-0999"]) == []
    # Saving a node with nothing left forgets it, index and all.
    await two.save({"gpu-0007": []}, NOW)
    assert await redis_client.exists("meowbot:_:triage:faults:gpu-0007") == 0
    assert await redis_client.zrange(INDEX, 0, -1) == ["gpu-0042"]


async def test_kept_90_days_and_200_a_node(redis_client: aioredis.Redis) -> None:
    history = RedisFaultHistory(redis_client)
    # 300 occurrences, one every 8 hours for 100 days: older than 90 days go, then the newest
    # 200 stay.
    many = [occ("gpu-0042", i / 3) for i in range(300)]
    await history.save({"gpu-0042": many}, NOW)
    kept = await history.occurrences(["gpu-0042"])
    assert len(kept) == MAX_PER_NODE == 200
    assert min(o.last_seen for o in kept) >= NOW - timedelta(days=KEEP_DAYS)
    assert [o.first_seen for o in kept] == sorted(o.first_seen for o in many)[-200:]
    # The key lives 90 days after its last write; the index drops a node not written for as long.
    ttl = await redis_client.ttl("meowbot:_:triage:faults:gpu-0042")
    assert 89 * 86400 < ttl <= 90 * 86400
    await history.save({"gpu-0001": [occ("gpu-0001", 95)]}, NOW - timedelta(days=91))
    await history.save({"gpu-0002": [occ("gpu-0002", 1)]}, NOW)
    assert set(await redis_client.zrange(INDEX, 0, -1)) == {"gpu-0042", "gpu-0002"}
    # Trimmed by time: saved now, a 95-day-old occurrence is not kept at all.
    await history.save({"gpu-0003": [occ("gpu-0003", 95), occ("gpu-0003", 2)]}, NOW)
    assert [o.first_seen for o in await history.occurrences(["gpu-0003"])] == [
        NOW - timedelta(days=2)
    ]


async def test_sweeps_record_a_persisting_fault_once(redis_client: aioredis.Redis) -> None:
    fleet = SimFleet(32, seed=5, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.XID, "gpu-0009", 2, NOW - timedelta(minutes=5), xid=79)
    history = RedisFaultHistory(redis_client)
    triage = Triage(SimMetrics(fleet), SimInventory(fleet), None, HealthConfig(), history=history)
    for minute in range(30):
        # A sweep a minute, the fault there in every one.
        fleet.now = NOW + timedelta(minutes=minute)
        fleet.now_s = int(fleet.now.timestamp())
        found = await fleet_faults(triage)
        assert [(f.node, f.gpu) for f in found.faults] == [("gpu-0009", 2)]
    (only,) = await history.occurrences(None)
    assert (only.cause, only.node, only.gpu) == ("xid79", "gpu-0009", 2)
    assert only.first_seen == NOW and only.last_seen == NOW + timedelta(minutes=29)


async def test_it_says_when_it_began_and_keeps_the_first_mark(redis_client: aioredis.Redis) -> None:
    one, two = RedisFaultHistory(redis_client), RedisFaultHistory(redis_client)
    assert await one.began() is None  # nothing recorded: no reach to claim
    await one.save({}, NOW)  # a sweep that saw nothing still begins the record
    await two.save({"gpu-0042": [occ("gpu-0042", 0)]}, NOW + timedelta(hours=2))
    assert await two.began() == NOW and await one.began() == NOW
