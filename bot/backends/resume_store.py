"""Where meowbot remembers the nodes it resumed (bot/triage/resumes.py says why).

Redis: one hash under `meowbot:<team>:triage:resumed`, node -> epoch seconds of its last resume,
shared by every replica (a resume made through one is known to the sweep of another). The
hash holds one field a node, so it stays as small as the fleet. The in-process stand-in serves
the terminal shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from bot.backends.state import key


class RedisResumes:
    def __init__(self, redis: aioredis.Redis, team: str = "") -> None:
        # Decoded string replies (decode_responses); redis-py's annotations are a union.
        self.redis: Any = redis
        self.key = key(team, "triage", "resumed")

    async def record_resume(self, node: str, at: datetime) -> None:
        await self.redis.hset(self.key, node, f"{at.timestamp():.3f}")

    async def resumes(self, nodes: Sequence[str]) -> dict[str, datetime]:
        if not nodes:
            return {}
        values = await self.redis.hmget(self.key, list(nodes))
        return {
            node: datetime.fromtimestamp(float(value), UTC)
            for node, value in zip(nodes, values, strict=True)
            if value
        }


class MemoryResumes:
    """One process's memory of its resumes (the terminal shell)."""

    def __init__(self) -> None:
        self._at: dict[str, datetime] = {}

    async def record_resume(self, node: str, at: datetime) -> None:
        self._at[node] = at

    async def resumes(self, nodes: Sequence[str]) -> dict[str, datetime]:
        return {n: self._at[n] for n in nodes if n in self._at}
