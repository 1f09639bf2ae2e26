"""Waiting on a condition, not on a sleep: a loaded machine overruns any fixed sleep, and a
bounded wait returns as soon as the condition holds."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

LOADED_S = 30.0
"""The bound: far past what an idle machine needs, so only a real failure reaches it."""


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], what: str, timeout_s: float = LOADED_S
) -> None:
    """Returns once `check()` is true; fails with `what` if it is not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        await asyncio.sleep(0.05)
