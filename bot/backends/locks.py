"""Redis locks with fencing tokens, shared by the scheduled jobs (alert notifier, sweep, digest).

`acquire` takes a token from a counter that only grows, then sets the lock to it with NX and a
TTL. A write made on behalf of the holder WATCHes the lock and checks the token in the same
transaction (`fenced_set`), so a holder that was paused past its TTL cannot overwrite what the
next holder wrote.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.errors import FenceLost
from bot.ports import Fence

# Deletes the lock only when it is still ours, and extends it likewise.
_RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
_RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
)


@dataclass(frozen=True)
class RedisFence:
    """A held lock (`bot.ports.Fence`): its name and the token it was taken with."""

    name: str
    token: str


def token_number(token: str) -> int:
    """The counter's part of a token: later holders have larger numbers."""
    return int(token.partition(".")[0])


class RedisLocks:
    """Locks named within one key space: `lock_key(name)` holds the token, `fence_key(name)`
    the counter tokens are drawn from."""

    def __init__(
        self, redis: Any, lock_key: Callable[[str], str], fence_key: Callable[[str], str]
    ) -> None:
        self.redis = redis
        self.lock_key = lock_key
        self.fence_key = fence_key

    async def acquire(self, name: str, ttl_ms: int) -> RedisFence | None:
        # The counter's number orders the holders; the random part keeps two tokens apart when
        # a failover lost the last INCR (replication is asynchronous) and the counter hands
        # the same number out again: the earlier holder's fenced writes then fail as they must.
        token = f"{await self.redis.incr(self.fence_key(name))}.{secrets.token_hex(4)}"
        # GET: an acquire retried after a failover whose first try did land finds its own token.
        held = await self.redis.set(self.lock_key(name), token, nx=True, px=ttl_ms, get=True)
        if held is None or held == token:
            return RedisFence(name, token)
        return None

    async def renew(self, fence: Fence, ttl_ms: int) -> bool:
        kept = await self.redis.eval(_RENEW, 1, self.lock_key(fence.name), fence.token, ttl_ms)
        return bool(kept)

    async def release(self, fence: Fence) -> None:
        await self.redis.eval(_RELEASE, 1, self.lock_key(fence.name), fence.token)

    async def fenced_set(
        self, fence: Fence, key: str, value: str, *, ex: int | None = None
    ) -> None:
        """SET key value, only while `fence` still holds its lock (else FenceLost)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(self.lock_key(fence.name))
            if await pipe.get(self.lock_key(fence.name)) != fence.token:
                raise FenceLost(fence.name)
            pipe.multi()
            pipe.set(key, value, ex=ex)
            await pipe.execute()
