"""The one place meowbot builds a Redis client, from REDIS_URL (bot/redis_url.py).

A one-server URL gets a blocking pool on that server. The Sentinel form gets the same blocking
pool on whichever server the Sentinels name as primary: every new connection asks them, and a
connection that finds its server demoted (READONLY) is dropped, so the next one goes to the
promoted replica.

Both retry a command that fails on the connection (ConnectionError, TimeoutError, ReadOnlyError)
with jittered exponential backoff until a budget has passed since its first try. Under Sentinel
it is FAILOVER_BUDGET_S: long enough for Sentinel to notice a dead primary and promote a replica
when `down-after-milliseconds` plus the election stay under it. One server has no replica to wait
for, only a restart or a blip: ONE_SERVER_BUDGET_S, so that with Redis down a request is still
answered (503) within Slack's 3 s. A
retried command may already have run on the old primary before the connection broke; what makes
that safe (claims that recognise their own token, scripts that carry their delivery's claim,
transactions that start again from WATCH) is said where each write is, and in docs/redis.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
)
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError, ReadOnlyError, TimeoutError

from bot.redis_url import SentinelAddress, sentinel_address

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_CONNECTIONS = 64
TIMEOUT_S = 2.0
FAILOVER_BUDGET_S = 10.0
ONE_SERVER_BUDGET_S = 0.5
RETRY_BASE_S = 0.05
RETRY_CAP_S = 0.5
RETRIED_ERRORS = (ConnectionError, TimeoutError, ReadOnlyError)
# The deadline of the command being tried in this task, if any.
_DEADLINE: ContextVar[float | None] = ContextVar("redis_retry_deadline", default=None)


class FailoverRetry(Retry):
    """redis-py's retry policy bounded by time rather than by a number of tries: a failover
    takes as long as it takes, and a count of tries says nothing about seconds. `retried`
    counts the tries after a failure, for the logs and the failover test."""

    def __init__(self, budget_s: float = FAILOVER_BUDGET_S) -> None:
        super().__init__(
            ExponentialWithJitterBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S),
            retries=-1,  # unbounded in count; call_with_retry bounds it in time
            supported_errors=RETRIED_ERRORS,
        )
        self.budget_s = budget_s
        self.retried = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> FailoverRetry:
        # redis-py deep-copies the policy into every connection; one shared policy keeps one
        # count for the client. It is safe to share: each call keeps its state in locals.
        return self

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        # redis-py retries a reconnect inside a command's try with the same policy: the inner
        # loop keeps the outer's deadline, so a command gets one budget in all.
        outer = _DEADLINE.get()
        deadline = outer if outer is not None else time.monotonic() + self.budget_s
        token = _DEADLINE.set(deadline)
        try:
            return await self._until(deadline, do, fail, is_retryable, with_failure_count)
        finally:
            _DEADLINE.reset(token)

    async def _until(
        self,
        deadline: float,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None,
        with_failure_count: bool,
    ) -> T:
        failures = 0
        while True:
            try:
                return await do()
            except RETRIED_ERRORS as error:
                if is_retryable is not None and not is_retryable(error):
                    raise
                failures += 1
                # The failure handler closes the connection, so the next try reconnects (and,
                # under Sentinel, asks again which server is the primary).
                await (fail(error, failures) if with_failure_count else fail(error))
                # The last pause is cut to the deadline, so a command is tried for its whole
                # budget, never given up a long backoff early.
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                pause = min(self._backoff.compute(failures), left)
                self.retried += 1
                if failures == 1:
                    log.warning("redis command failed, retrying", extra={"error": str(error)})
                await asyncio.sleep(pause)


class PrimaryConnection(SentinelManagedConnection):
    """A connection to whichever server the Sentinels name as primary each time it connects.

    redis-py asks the Sentinels only when the pool hands out a new connection; a connection
    that broke mid-command reconnects, within the command's retry, to the address it had: the
    dead primary, until the retry gives up. Asking on every connect sends the retry to the
    promoted replica."""

    async def _connect(self) -> None:
        if self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super()._connect()  # type: ignore[no-untyped-call]  # untyped in redis-py


class BlockingSentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """redis-py's Sentinel pool with the blocking pool's waiting: a burst beyond the pool waits
    for a connection instead of failing at once (MaxConnectionsError)."""


def redis_client(
    url: str,
    *,
    timeout_s: float = TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
    retry_budget_s: float | None = None,
) -> aioredis.Redis:
    """A client for REDIS_URL. Creating it opens no connection: redis-py connects lazily inside
    the running loop. Its retry policy is `retry_policy(client)`; its budget by default is the
    URL form's (see the module's docstring)."""
    address = sentinel_address(url)
    if retry_budget_s is None:
        retry_budget_s = ONE_SERVER_BUDGET_S if address is None else FAILOVER_BUDGET_S
    # A blocking pool: a burst of events beyond the pool waits up to timeout_s for a
    # connection, where redis-py's default pool (100) refuses at once (MaxConnectionsError, a
    # 500 to Slack for every event past it).
    common: dict[str, Any] = {
        "max_connections": max_connections,
        "timeout": timeout_s,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "decode_responses": True,
        "health_check_interval": 30,
        "retry": FailoverRetry(retry_budget_s),
    }
    if address is None:
        pool = aioredis.BlockingConnectionPool.from_url(url, **common)
        return aioredis.Redis.from_pool(pool)
    return _sentinel_client(address, common, timeout_s)


def _sentinel_client(
    address: SentinelAddress, common: dict[str, Any], timeout_s: float
) -> aioredis.Redis:
    # What differs from one server: the Sentinels are asked one after the other without retries
    # of their own (a dead Sentinel costs at most timeout_s, then the next is asked); the
    # command's retry above covers the whole (ask, connect, send). The pool's wait for a free
    # connection and the socket timeouts are the same.
    sentinel = Sentinel(
        address.sentinels,
        sentinel_kwargs={"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s},
        username=address.username,
        password=address.password,
        db=address.db,
    )
    client: aioredis.Redis = sentinel.master_for(
        address.service,
        redis_class=aioredis.Redis,
        connection_pool_class=BlockingSentinelPool,
        connection_class=PrimaryConnection,
        **common,
    )
    return client


async def close_client(client: aioredis.Redis) -> None:
    """Closes the client and, under Sentinel, its connections to the Sentinels."""
    await client.aclose()
    pool = client.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        await pool.sentinel_manager.aclose()


def retry_policy(redis: aioredis.Redis) -> FailoverRetry:
    policy = redis.get_retry()
    assert isinstance(policy, FailoverRetry), "a client not built by redis_client()"
    return policy
