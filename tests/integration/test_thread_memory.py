"""What each thread asked, kept in the real Redis for its follow-ups."""

from __future__ import annotations

from typing import Any

from bot.ask.models import Entities, Intent
from bot.ask.understand import Context
from bot.backends.redis_client import close_client
from bot.backends.redis_client import redis_client as make_client
from bot.backends.state import key
from bot.backends.thread_memory import KEEP_S, RedisThreadMemory


async def test_a_thread_remembers_and_forgets(redis_url: str, redis_client: Any) -> None:
    client = make_client(redis_url)
    memory = RedisThreadMemory(client)
    try:
        asked = Context(Intent.FAULTS, Entities(kind="xid", since="2d", nodes=("gpu-0042",)))
        assert await memory.recall("T1", "C1", "1.000001") is None
        await memory.remember("T1", "C1", "1.000001", asked)
        assert await memory.recall("T1", "C1", "1.000001") == asked
        assert await memory.recall("T2", "C1", "1.000001") is None  # another team's thread
        ttl = await redis_client.ttl(key("T1", "ask", "C1", "1.000001"))
        assert 0 < ttl <= KEEP_S
        # What another version wrote is no context: the thread starts afresh.
        await redis_client.set(key("T1", "ask", "C1", "2.000001"), '{"intent": "nope"}')
        assert await memory.recall("T1", "C1", "2.000001") is None
    finally:
        await close_client(client)
