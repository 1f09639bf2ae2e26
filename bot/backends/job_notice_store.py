"""The job owners' notices as every replica shares them (bot/triage/owners.py says why).

Redis, under `meowbot:<team>:jobnotice:`: `told:<node>:<event>:<job>` (SET NX with a TTL: the
one replica that sets it sends the DM; deleted again by that replica when Slack failed for a
while, so a later attempt claims it anew) and `optout` (the set of Slack user ids who pressed
"Stop these messages"; kept until they turn them back on). The in-process stand-in serves the
terminal shell.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot import ticks
from bot.backends.state import claim_once, key
from bot.errors import BackendError


def _unreachable(exc: RedisError) -> BackendError:
    return BackendError("Redis", f"cannot be reached ({type(exc).__name__}).", retryable=True)


class RedisJobNotices:
    def __init__(self, redis: aioredis.Redis, team: str = "") -> None:
        # Decoded string replies (decode_responses); redis-py's annotations are a union.
        self.redis: Any = redis
        self.team = team

    async def claim(self, key_: str, ttl_s: int) -> bool:
        told = key(self.team, "jobnotice", "told", key_)
        try:
            return await claim_once(self.redis, told, ttl_s)
        except RedisError as exc:
            raise _unreachable(exc) from exc

    async def release(self, key_: str) -> None:
        told = key(self.team, "jobnotice", "told", key_)
        try:
            await self.redis.delete(told)
        except RedisError as exc:
            raise _unreachable(exc) from exc

    async def opted_out(self, slack_user: str) -> bool:
        k = key(self.team, "jobnotice", "optout")
        try:
            return bool(await self.redis.sismember(k, slack_user))
        except RedisError as exc:
            raise _unreachable(exc) from exc

    async def set_opted_out(self, slack_user: str, out: bool) -> None:
        k = key(self.team, "jobnotice", "optout")
        await (self.redis.sadd(k, slack_user) if out else self.redis.srem(k, slack_user))


class MemoryJobNotices:
    """One process's notices (the terminal shell)."""

    def __init__(self) -> None:
        self._claims: dict[str, float] = {}
        self._out: set[str] = set()

    async def claim(self, key_: str, ttl_s: int) -> bool:
        now = ticks.now()
        until = self._claims.get(key_)
        if until is not None and until > now:
            return False
        self._claims[key_] = now + ttl_s
        return True

    async def release(self, key_: str) -> None:
        self._claims.pop(key_, None)

    async def opted_out(self, slack_user: str) -> bool:
        return slack_user in self._out

    async def set_opted_out(self, slack_user: str, out: bool) -> None:
        (self._out.add if out else self._out.discard)(slack_user)
