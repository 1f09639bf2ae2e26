"""Tracks work that continues after Slack's ack, so that SIGTERM can let it finish, and hands
over what cannot finish in time: stopped, and its asker told to ask again. Also counts the acks
still on their way, so that the work after an ack waits for them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any

from aiohttp import web

from bot import give_way

log = logging.getLogger(__name__)

ACKS_FIRST_MAX_S = 0.5
"""How long work after an ack waits for the other acks at most: a steady stream of requests
never leaves none on their way, and the work must still get done."""

ACKS_SETTLE_S = 0.002
"""How long work after an ack waits, once no ack is on its way, for requests that arrived
meanwhile: one look of the loop at its sockets. Without it, the work of a burst's first
commands started in each gap between two requests and held back the acks of the rest."""

Handover = Callable[[], Awaitable[Any]]
"""Tells whoever waits on a piece of work that it was stopped before it finished."""


class InFlight:
    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # The task of each piece of work and how to hand it over (None: nobody waits on it).
        self._running: dict[asyncio.Task[Any], Handover | None] = {}
        self._acking = 0
        self._acked = asyncio.Event()
        self._acked.set()

    @property
    def count(self) -> int:
        return self._count

    @property
    def acking(self) -> int:
        """Requests from Slack whose answer (the ack) has not gone out yet."""
        return self._acking

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

    @contextmanager
    def ack_pending(self) -> Iterator[None]:
        self._acking += 1
        self._acked.clear()
        give_way.hold()  # workers stand aside until the acks are out (bot/give_way.py)
        try:
            yield
        finally:
            give_way.release()
            self._acking -= 1
            if self._acking == 0:
                self._acked.set()

    async def acks_out(self, max_s: float = ACKS_FIRST_MAX_S) -> None:
        """Returns once no ack is on its way (this listener's own included), or after max_s.

        Bolt sends a listener's ack only when it next looks (every 10 ms) and the listener
        runs on after `ack()` meanwhile: in a burst of 200 commands, the start of each one's
        work (parsing, the first reads) ran before the others' acks, and held them back."""
        if self._acking == 0:
            return  # work that answers no request (a sweep) between two bursts goes on at once
        deadline = asyncio.get_running_loop().time() + max_s
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            if self._acking:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._acked.wait(), left)
                continue
            # None on its way now, but a burst arrives over tens of milliseconds: the loop looks
            # at its sockets once more first, so requests already at the door count too.
            await asyncio.sleep(ACKS_SETTLE_S)
            if self._acking == 0:
                return

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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def acks_counted(inflight: InFlight, path: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """aiohttp middleware: each request to Slack's endpoint counts as an ack on its way until
    its response is handed back to aiohttp to write."""

    @web.middleware
    async def counted(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != path:
            return await handler(request)
        with inflight.ack_pending():
            return await handler(request)

    return counted
