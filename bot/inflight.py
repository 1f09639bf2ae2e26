"""Tracks work that continues after Slack's ack, so that SIGTERM can let it finish, and hands
over what cannot finish in time: stopped, and its asker told to ask again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)

Handover = Callable[[], Awaitable[Any]]
"""Tells whoever waits on a piece of work that it was stopped before it finished."""


class InFlight:
    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # The task of each piece of work and how to hand it over (None: nobody waits on it).
        self._running: dict[asyncio.Task[Any], Handover | None] = {}

    @property
    def count(self) -> int:
        return self._count

    @asynccontextmanager
    async def track(self, handover: Handover | None = None) -> AsyncIterator[None]:
        task = asyncio.current_task()
        self._count += 1
        self._idle.clear()
        if task is not None:
            self._running[task] = handover
        try:
            yield
        finally:
            if task is not None:
                self._running.pop(task, None)
            self._count -= 1
            if self._count == 0:
                self._idle.set()

    async def wait_idle(self, timeout_s: float) -> bool:
        """True when all tracked work ended within timeout_s."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def hand_over(self, timeout_s: float) -> tuple[int, int]:
        """Stops the work still running and tells each asker it did not finish (once, and only
        after its work stopped, so no late answer follows the notice). Returns (stopped, told)."""
        running = dict(self._running)
        if not running:
            return 0, 0
        for task in running:
            task.cancel()
        await asyncio.wait(running, timeout=timeout_s)
        handovers = [h for h in running.values() if h is not None]
        results = await asyncio.gather(
            *(asyncio.wait_for(h(), timeout_s) for h in handovers), return_exceptions=True
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            log.warning(
                "some askers could not be told of the restart",
                extra={"count": len(failed), "error": type(failed[0]).__name__},
            )
        return len(running), len(handovers) - len(failed)
