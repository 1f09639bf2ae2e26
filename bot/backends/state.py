"""State stores behind the `StateStore` port: Redis, and an in-process stand-in for the shell."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

KEY_PREFIX = "meowbot"
MAX_CONNECTIONS = 64


def key(team_id: str, *parts: str) -> str:
    """All keys live under one prefix, namespaced by team id."""
    return ":".join((KEY_PREFIX, team_id or "_", *parts))


class RedisStore:
    name = "redis"

    def __init__(self, url: str, *, timeout_s: float = 2.0) -> None:
        # The client is made lazily inside the running loop by redis-py itself; creating the
        # object opens no connection.
        # A blocking pool: a burst of events beyond the pool waits up to timeout_s for a
        # connection, where redis-py's default pool (100) refuses at once (MaxConnectionsError,
        # a 500 to Slack for every event past it).
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=timeout_s,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            decode_responses=True,
            health_check_interval=30,
        )
        self.redis: aioredis.Redis = aioredis.Redis.from_pool(pool)

    async def claim(self, team_id: str, kind: str, key_: str, ttl_s: int) -> bool:
        # SET NX is the idempotency primitive: Slack retries deliveries up to three times.
        return bool(await self.redis.set(key(team_id, kind, key_), "1", nx=True, ex=ttl_s))

    async def ping(self) -> None:
        await self.redis.ping()

    async def close(self) -> None:
        await self.redis.aclose()


class MemoryStore:
    """In-process stand-in for one replica (the terminal shell); said loudly at start-up."""

    name = "in-process"

    def __init__(self) -> None:
        self._claims: dict[str, float] = {}

    async def claim(self, team_id: str, kind: str, key_: str, ttl_s: int) -> bool:
        now = time.monotonic()
        k = key(team_id, kind, key_)
        if self._claims.get(k, 0.0) > now:
            return False
        self._claims[k] = now + ttl_s
        return True

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None
