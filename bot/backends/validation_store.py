"""The validation ledger: Redis where state is shared (one run per node across replicas, and
a Cancel pressed on any replica reaches the one running it), or memory for one process."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import asdict

import redis.asyncio as aioredis

from bot.validation.ports import RunRecord

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

    async def record(self, run: RunRecord, ttl_s: int) -> None:
        await self.redis.set(f"{PREFIX}:run:{run.run_id}", json.dumps(asdict(run)), ex=ttl_s)

    async def records(self) -> list[RunRecord]:
        out = []
        async for key in self.redis.scan_iter(match=f"{PREFIX}:run:*", count=500):
            raw = await self.redis.get(key)
            if raw is not None:
                out.append(RunRecord(**json.loads(_text(raw))))
        return out

    async def forget(self, run_id: str) -> None:
        await self.redis.delete(f"{PREFIX}:run:{run_id}", f"{PREFIX}:lease:{run_id}")

    async def lease(self, run_id: str, ttl_s: int, *, take: bool = False) -> bool:
        key = f"{PREFIX}:lease:{run_id}"
        return bool(await self.redis.set(key, "1", ex=ttl_s, nx=take))

    async def first_boot(self, node: str, reason: str, booted: str) -> str:
        """The boot time first seen of `node` drained for `reason` (kept until the reason
        changes or the node is back: `forget_boots`)."""
        key, value = f"{PREFIX}:boot", json.dumps([reason, booted])
        if not await self.redis.hsetnx(key, node, value):
            held = await self.redis.hget(key, node)
            if held is not None and json.loads(_text(held))[0] == reason:
                return str(json.loads(_text(held))[1])
            await self.redis.hset(key, node, value)
        return booted

    async def forget_boots(self, keep: Collection[str]) -> None:
        key = f"{PREFIX}:boot"
        gone = [_text(n) for n in await self.redis.hkeys(key) if _text(n) not in keep]
        if gone:
            await self.redis.hdel(key, *gone)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class MemoryValidationLedger:
    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}
        self.cancels: dict[str, str] = {}
        self.runs: dict[str, RunRecord] = {}
        self.leases: set[str] = set()  # one process: a lease never expires while it lives
        self._boots: dict[str, tuple[str, str]] = {}

    async def first_boot(self, node: str, reason: str, booted: str) -> str:
        held = self._boots.get(node)
        if held is None or held[0] != reason:
            self._boots[node] = held = (reason, booted)
        return held[1]

    async def forget_boots(self, keep: Collection[str]) -> None:
        self._boots = {n: b for n, b in self._boots.items() if n in keep}

    async def record(self, run: RunRecord, ttl_s: int) -> None:
        self.runs[run.run_id] = run

    async def records(self) -> list[RunRecord]:
        return list(self.runs.values())

    async def forget(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        self.leases.discard(run_id)

    async def lease(self, run_id: str, ttl_s: int, *, take: bool = False) -> bool:
        if take and run_id in self.leases:
            return False
        self.leases.add(run_id)
        return True

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
