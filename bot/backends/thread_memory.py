"""What each thread asked last (bot/ask/ports.py `ThreadMemory`): in Redis, shared by every
replica, for a day; in memory without Redis."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from bot import ticks
from bot.ask.models import Entities, Intent
from bot.ask.understand import Context
from bot.backends.state import key

KEEP_S = 24 * 3600
MEMORY_CAP = 10_000


def _dump(context: Context) -> str:
    return json.dumps(
        {"intent": context.intent.value, "entities": context.entities.model_dump(mode="json")}
    )


def _load(raw: str | bytes | None) -> Context | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return Context(Intent(data["intent"]), Entities.model_validate(data["entities"]))
    except (ValueError, KeyError, TypeError):
        return None  # written by another version: the thread starts afresh


class RedisThreadMemory:
    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def recall(self, team: str, channel: str, thread: str) -> Context | None:
        raw = await self.redis.get(key(team, "ask", channel, thread))
        return _load(raw)

    async def remember(self, team: str, channel: str, thread: str, context: Context) -> None:
        await self.redis.set(key(team, "ask", channel, thread), _dump(context), ex=KEEP_S)


class MemoryThreadMemory:
    def __init__(self) -> None:
        self._kept: dict[tuple[str, str, str], tuple[float, str]] = {}

    async def recall(self, team: str, channel: str, thread: str) -> Context | None:
        hit = self._kept.get((team, channel, thread))
        if hit is None or ticks.since(hit[0]) > KEEP_S:
            return None
        return _load(hit[1])

    async def remember(self, team: str, channel: str, thread: str, context: Context) -> None:
        if len(self._kept) >= MEMORY_CAP:
            self._kept.pop(next(iter(self._kept)))
        self._kept[(team, channel, thread)] = (ticks.now(), _dump(context))
