"""Tracks work that continues after Slack's ack, so that SIGTERM can let it finish, and the
acks still on their way, so that the work after an ack waits for them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress

from aiohttp import web

ACKS_FIRST_MAX_S = 0.5
"""How long work after an ack waits for the other acks at most: a steady stream of requests
never leaves none on their way, and the work must still get done."""


class InFlight:
    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()
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
    async def track(self) -> AsyncIterator[None]:
        self._count += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._count -= 1
            if self._count == 0:
                self._idle.set()

    @contextmanager
    def ack_pending(self) -> Iterator[None]:
        self._acking += 1
        self._acked.clear()
        try:
            yield
        finally:
            self._acking -= 1
            if self._acking == 0:
                self._acked.set()

    async def acks_out(self, max_s: float = ACKS_FIRST_MAX_S) -> None:
        """Returns once no ack is on its way (this listener's own included), or after max_s.

        Bolt sends a listener's ack only when it next looks (every 10 ms) and the listener
        runs on after `ack()` meanwhile: in a burst of 200 commands, the start of each one's
        work (parsing, the first reads) ran before the others' acks, and held them back."""
        if self._acking == 0:
            return
        with suppress(TimeoutError):
            await asyncio.wait_for(self._acked.wait(), max_s)

    async def wait_idle(self, timeout_s: float) -> bool:
        """True when all tracked work ended within timeout_s."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


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
