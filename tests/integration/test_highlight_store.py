"""The highlights' Redis store against a real redis-server: counting people, not events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

from bot.backends.highlight_store import RedisHighlightStore
from bot.backends.locks import token_number
from bot.errors import FenceLost
from bot.highlights.models import Reaction

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
TS = "1764676800.000100"


def r(
    user: str,
    *,
    added: bool = True,
    event_ts: str = "1.0",
    emoji: str = "meow_party",
    event_id: str | None = None,
    ts: str = TS,
) -> Reaction:
    return Reaction(
        team="T1",
        channel="C1",
        ts=ts,
        user=user,
        author="UA",
        emoji=emoji,
        event_ts=event_ts,
        added=added,
        event_id=event_id,
    )


@pytest.fixture
def store(redis_client: aioredis.Redis) -> RedisHighlightStore:
    return RedisHighlightStore(redis_client)


async def test_distinct_people_not_events(store: RedisHighlightStore) -> None:
    first = await store.react(r("U1", event_id="Ev1"), threshold=1, now=NOW)
    assert first.count == 1 and first.created
    again = await store.react(r("U1", event_id="Ev1"), threshold=1, now=NOW)  # Slack's retry
    assert again.duplicate
    twice = await store.react(r("U1", event_id="Ev2", event_ts="2.0"), threshold=1, now=NOW)
    assert twice.count == 1 and not twice.created  # added twice
    skin = await store.react(r("U1", emoji="tada", event_ts="3.0"), threshold=1, now=NOW)
    assert skin.count == 1  # one person on two tracked emoji is one person
    assert (await store.react(r("U2", event_ts="4.0"), threshold=1, now=NOW)).count == 2
    gone = await store.react(r("U2", added=False, event_ts="5.0"), threshold=1, now=NOW)
    assert gone.count == 1
    back = await store.react(r("U2", event_ts="6.0"), threshold=1, now=NOW)
    assert back.count == 2  # removed and added again: still two
    # A late, older add after a newer remove changes nothing.
    await store.react(r("U2", added=False, event_ts="8.0"), threshold=1, now=NOW)
    assert (await store.react(r("U2", event_ts="7.0"), threshold=1, now=NOW)).count == 1
    h = await store.get("T1", "C1", TS)
    assert h is not None and h.reactors == {"U1"} and h.first_tagged_at == NOW


async def test_concurrent_deliveries_count_once(store: RedisHighlightStore) -> None:
    done = await asyncio.gather(
        *(store.react(r("U1", event_id="EvX"), threshold=1, now=NOW) for _ in range(20)),
        *(store.react(r(f"U{i}", event_ts=f"{i}.0"), threshold=1, now=NOW) for i in range(2, 12)),
    )
    assert sum(1 for d in done if d.created) == 1
    assert sum(1 for d in done if d.duplicate) == 19
    h = await store.get("T1", "C1", TS)
    assert h is not None and len(h.reactors) == 11


async def test_threshold_index_week_range_and_removal(store: RedisHighlightStore) -> None:
    week = (NOW - timedelta(days=1), NOW + timedelta(days=1))
    await store.react(r("U1"), threshold=2, now=NOW)
    assert await store.between("T1", *week) == []  # below the threshold: not a highlight yet
    await store.react(r("U2"), threshold=2, now=NOW)
    [h] = await store.between("T1", *week)
    assert len(h.reactors) == 2
    assert await store.between("T1", NOW + timedelta(seconds=1), NOW + timedelta(days=1)) == []
    await store.react(r("U1", added=False, event_ts="2.0"), threshold=2, now=NOW)
    assert await store.between("T1", *week) == []
    await store.react(r("U2", added=False, event_ts="2.0"), threshold=2, now=NOW)
    assert await store.get("T1", "C1", TS) is None  # the last reaction went: the highlight went


async def test_enrich_edit_delete_and_tombstone(store: RedisHighlightStore) -> None:
    assert not await store.enrich(
        "T1", "C1", TS, thread_ts=None, author="UA", excerpt="x", permalink="p"
    )
    await store.react(r("U1"), threshold=1, now=NOW)
    assert await store.enrich(
        "T1",
        "C1",
        TS,
        thread_ts="1764676000.000100",
        author="UA",
        excerpt="first",
        permalink="https://p",
    )
    assert await store.edit("T1", "C1", TS, "second", "20.0")
    assert await store.edit("T1", "C1", TS, "older", "10.0")  # out of order: ignored
    h = await store.get("T1", "C1", TS)
    assert h is not None and h.excerpt == "second" and h.permalink == "https://p"
    assert h.thread_ts == "1764676000.000100"
    assert await store.delete("T1", "C1", TS)
    late = await store.react(r("U3", event_ts="30.0"), threshold=1, now=NOW)
    assert late.gone and await store.get("T1", "C1", TS) is None
    assert not await store.edit("T1", "C1", TS, "x", "40.0")


async def test_opt_out_and_fenced_digest_state(store: RedisHighlightStore) -> None:
    await store.set_opt_out("T1", "U1", True)
    assert await store.opted_out("T1") == {"U1"}
    await store.set_opt_out("T1", "U1", False)
    assert await store.opted_out("T1") == set()
    fence = await store.acquire("T1", "digest:C1", 60_000)
    assert fence is not None and await store.acquire("T1", "digest:C1", 60_000) is None
    await store.set_digest_state("T1", "C1", "2026-12-04", "posting", fence)
    await store.release("T1", fence)
    newer = await store.acquire("T1", "digest:C1", 60_000)
    assert newer is not None and token_number(newer.token) > token_number(fence.token)
    with pytest.raises(FenceLost):  # the old holder, back from a pause, writes nothing
        await store.set_digest_state("T1", "C1", "2026-12-04", "posted:1", fence)
    assert await store.digest_state("T1", "C1", "2026-12-04") == "posting"
