"""State stores behind the `StateStore` port: Redis, and an in-process stand-in for the shell."""

from __future__ import annotations

import secrets

import redis.asyncio as aioredis

from bot import ticks
from bot.backends.redis_client import close_client, redis_client
from bot.redis_url import sentinel_address

KEY_PREFIX = "meowbot"


def key(team_id: str, *parts: str) -> str:
    """All keys live under one prefix, namespaced by team id."""
    return ":".join((KEY_PREFIX, team_id or "_", *parts))


async def claim_once(redis: aioredis.Redis, key_: str, ttl_s: int) -> bool:
    """SET NX, the claim every replica races for, made safe to retry: it writes a token of its
    own and reads what was there (GET), so a claim retried after a failover whose first try did
    land (the reply was lost with the connection) finds its own token and is still this one's,
    where a bare "1" would read as someone else's."""
    token = secrets.token_hex(8)
    held = await redis.set(key_, token, nx=True, ex=ttl_s, get=True)
    return held is None or held == token


class RedisStore:
    name = "redis"

    def __init__(self, url: str, *, timeout_s: float = 2.0) -> None:
        self.redis: aioredis.Redis = redis_client(url, timeout_s=timeout_s)
        # Writes that must outlive a failover wait for this many replicas (WAIT): one under
        # Sentinel, none on a single server, which has no replica to wait for.
        self.wait_replicas = 0 if sentinel_address(url) is None else 1

    async def claim(self, team_id: str, kind: str, key_: str, ttl_s: int) -> bool:
        # SET NX is the idempotency primitive: Slack retries deliveries up to three times.
        return await claim_once(self.redis, key(team_id, kind, key_), ttl_s)

    async def ping(self) -> None:
        await self.redis.ping()

    async def close(self) -> None:
        await close_client(self.redis)


class MemoryStore:
    """In-process stand-in for one replica (the terminal shell); said loudly at start-up."""

    name = "in-process"

    def __init__(self) -> None:
        self._claims: dict[str, float] = {}

    async def claim(self, team_id: str, kind: str, key_: str, ttl_s: int) -> bool:
        now = ticks.now()
        k = key(team_id, kind, key_)
        until = self._claims.get(k)
        if until is not None and until > now:
            return False
        self._claims[k] = now + ttl_s
        return True

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None
