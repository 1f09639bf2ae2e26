"""The Redis state store against a real redis-server."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from bot.backends.state import MemoryStore, RedisStore


async def test_claim_is_once_per_team_and_key(redis_url: str, redis_client: aioredis.Redis) -> None:
    store = RedisStore(redis_url)
    try:
        results = await asyncio.gather(*(store.claim("T1", "event", "Ev1", 60) for _ in range(20)))
        assert results.count(True) == 1
        assert await store.claim("T2", "event", "Ev1", 60) is True
        assert await redis_client.ttl("meowbot:T1:event:Ev1") > 0
        await store.ping()
    finally:
        await store.close()


async def test_memory_store_behaves_the_same() -> None:
    store = MemoryStore()
    assert await store.claim("T1", "event", "Ev1", 60) is True
    assert await store.claim("T1", "event", "Ev1", 60) is False
    assert await store.claim("T1", "event", "Ev1", 0) is False  # still claimed
    assert await store.claim("T1", "event", "Ev2", 60) is True
