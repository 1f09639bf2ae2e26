"""The retry policy every Redis client gets (bot/backends/redis_client.py): bounded in time,
shared by a client's connections, one budget for a command however redis-py nests its tries."""

from __future__ import annotations

import copy
import time

import pytest
from redis.exceptions import ConnectionError, ReadOnlyError, ResponseError

from bot.backends.redis_client import FailoverRetry


async def test_a_command_that_fails_for_a_while_is_tried_until_it_works() -> None:
    policy = FailoverRetry(budget_s=5)
    errors = [ConnectionError("refused"), ReadOnlyError("demoted"), ConnectionError("refused")]
    closed: list[int] = []

    async def do() -> str:
        if errors:
            raise errors.pop(0)
        return "OK"

    async def fail(error: Exception, failures: int) -> None:
        closed.append(failures)

    assert await policy.call_with_retry(do, fail, with_failure_count=True) == "OK"
    assert closed == [1, 2, 3] and policy.retried == 3


async def test_the_budget_is_seconds_and_other_errors_are_not_retried() -> None:
    policy = FailoverRetry(budget_s=0.5)

    async def down() -> None:
        raise ConnectionError("refused")

    async def close(error: Exception) -> None:
        return None

    started = time.monotonic()
    with pytest.raises(ConnectionError):
        await policy.call_with_retry(down, close)
    assert 0.45 < time.monotonic() - started < 1.0
    assert policy.retried > 0

    async def wrong() -> None:
        raise ResponseError("WRONGTYPE")

    before = policy.retried
    with pytest.raises(ResponseError):
        await policy.call_with_retry(wrong, close)
    assert policy.retried == before


async def test_a_nested_try_keeps_the_commands_deadline() -> None:
    policy = FailoverRetry(budget_s=0.6)

    async def close(error: Exception) -> None:
        return None

    async def reconnect() -> None:
        raise ConnectionError("refused")

    async def command() -> None:
        await policy.call_with_retry(reconnect, close)  # as redis-py's reconnect inside a try

    started = time.monotonic()
    with pytest.raises(ConnectionError):
        await policy.call_with_retry(command, close)
    assert time.monotonic() - started < 1.0  # not a fresh budget per nested try


def test_every_connection_shares_the_policy() -> None:
    policy = FailoverRetry()
    assert copy.deepcopy(policy) is policy
