"""Shared fixtures: the real services started by scripts/testenv.py, found through the env.

Outside `make test` a test needing a service is skipped with the reason; with CI=true it fails
instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

IN_CI = os.environ.get("CI", "").lower() == "true"


def need_service(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        msg = f"{var} is not set: run the tests with `make test`, which starts the service"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return value


@pytest.fixture
def redis_url() -> str:
    return need_service("REDIS_URL")


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()
