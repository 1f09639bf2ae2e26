"""The validation ledger: Redis where state is shared (one run per node across replicas, and
a Cancel pressed on any replica reaches the one running it), or memory for one process."""

from __future__ import annotations

import redis.asyncio as aioredis

PREFIX = "meowbot:validation"


class RedisValidationLedger:
    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def hold(self, node: str, run_id: str, ttl_s: int) -> str | None:
        key = f"{PREFIX}:node:{node}"
        if await self.redis.set(key, run_id, nx=True, ex=ttl_s):
            return None
        held = await self.redis.get(key)
        return None if held is None else _text(held)

    async def running(self) -> int:
        return sum([1 async for _ in self.redis.scan_iter(match=f"{PREFIX}:node:*", count=500)])

    async def release(self, node: str, run_id: str) -> None:
        key = f"{PREFIX}:node:{node}"
        held = await self.redis.get(key)
        if held is not None and _text(held) == run_id:
            await self.redis.delete(key)

    async def cancel(self, run_id: str, user_name: str) -> None:
        await self.redis.set(f"{PREFIX}:cancel:{run_id}", user_name, ex=86400)

    async def cancelled_by(self, run_id: str) -> str | None:
        who = await self.redis.get(f"{PREFIX}:cancel:{run_id}")
        return None if who is None else _text(who)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class MemoryValidationLedger:
    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}
        self.cancels: dict[str, str] = {}

    async def hold(self, node: str, run_id: str, ttl_s: int) -> str | None:
        held = self.nodes.get(node)
        if held is not None:
            return held
        self.nodes[node] = run_id
        return None

    async def running(self) -> int:
        return len(self.nodes)

    async def release(self, node: str, run_id: str) -> None:
        if self.nodes.get(node) == run_id:
            del self.nodes[node]

    async def cancel(self, run_id: str, user_name: str) -> None:
        self.cancels[run_id] = user_name

    async def cancelled_by(self, run_id: str) -> str | None:
        return self.cancels.get(run_id)
