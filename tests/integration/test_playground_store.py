"""The playground's shared state against the real redis-server: limits, cancels, watches."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis

from bot.backends.playground_store import RedisPlaygroundStore
from bot.playground.models import Prompt, Watch
from bot.playground.ports import Limits


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisPlaygroundStore]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    team = "T" + secrets.token_hex(4).upper()  # a team of its own: nothing shared with others
    yield RedisPlaygroundStore(client, team)
    keys = [k async for k in client.scan_iter(f"meowbot:{team}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def test_two_in_flight_per_person_then_a_sentence_and_release_frees_one(
    store: RedisPlaygroundStore,
) -> None:
    limits = Limits(per_user=2, per_user_per_minute=100, global_cap=100)
    # Ten replicas asking at once for the same person: exactly two get a slot.
    got = await asyncio.gather(*(store.acquire("U1", limits) for _ in range(10)))
    assert sum(r is None for r in got) == 2
    refused = next(r for r in got if r is not None)
    assert "2 playground requests running" in refused.sentence and "Cancel" in refused.sentence
    assert await store.acquire("U2", limits) is None  # another person is not held back
    await store.release("U1")
    assert await store.acquire("U1", limits) is None


async def test_global_cap_and_rate_limit_say_when_to_retry(store: RedisPlaygroundStore) -> None:
    cap = Limits(per_user=5, per_user_per_minute=100, global_cap=3)
    assert [await store.acquire(u, cap) is None for u in ("A", "B", "C", "D")] == [
        True,
        True,
        True,
        False,
    ]
    refused = await store.acquire("E", cap)
    assert refused is not None and "limit of 3 requests at once" in refused.sentence
    rate = Limits(per_user=100, per_user_per_minute=3, global_cap=100)
    for _ in range(3):
        assert await store.acquire("R", rate) is None
        await store.release("R")
    refused = await store.acquire("R", rate)
    assert refused is not None and "this minute" in refused.sentence
    assert "try again in" in refused.sentence and " s." in refused.sentence


async def test_cancel_sessions_and_watches_survive_and_run_once(
    store: RedisPlaygroundStore,
) -> None:
    assert not await store.cancelled("s1")
    await store.cancel("s1")
    assert await store.cancelled("s1")
    await store.save_session("s1", '{"x": 1}')
    assert await store.session("s1") == '{"x": 1}' and await store.session("nope") is None
    watch = Watch(
        id="w1",
        user_id="U1",
        prompt=Prompt(run="tiny", prompt="hi"),
        channel="C1",
        thread_ts="1.2",
        last_step=300,
        created=datetime.now(UTC),
    )
    await store.add_watch(watch)
    # Three replicas see step 400 at once: one of them runs it.
    claims = await asyncio.gather(*(store.claim_watch_run("w1", 400) for _ in range(3)))
    assert sorted(claims) == [False, False, True]
    await store.set_watch_step("w1", 400)
    await store.set_watch_step("w1", 200)  # never backwards
    [saved] = await store.watches()
    assert saved.last_step == 400 and saved.prompt.prompt == "hi"
    assert await store.remove_watch("w1") and not await store.remove_watch("w1")
    assert await store.watches() == []
