"""CPU-heavy work off the event loop, a bounded number at once: the loop only does I/O.

While the loop evaluates a 50,000-node table (0.6 s) or draws a chart (0.3 s), no ack goes out,
and Slack gives 3 s. `Offload.run(fn, ...)` runs `fn` on a worker thread instead, at most
`workers` at a time: a burst beyond that waits its turn in the loop (nothing queued in the
pool, nothing dropped) and every answer still comes.

Threads, not processes: matplotlib's Agg rendering and the C parts of the list arithmetic
release the GIL or hold it briefly, and where pure Python holds it the interpreter hands it back
to the loop after SWITCH_INTERVAL_S, so an ack waits milliseconds, not the whole evaluation. A
process pool would need the table pickled both ways (its columns hold closures, and at 50,000
nodes a column is 400,000 rows) and the simulated fleet's state in every worker. What the
threads would still cost the loop is cut at its two sources: a job stands aside between its
steps while acks are on their way (bot/give_way.py; the pool's threads are the ones that do),
and the collector's full passes no longer walk the start-up heap (`keep_the_start`).
bench/ack.py measures what is left (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from bot import give_way

P = ParamSpec("P")
T = TypeVar("T")

SWITCH_INTERVAL_S = 0.001
"""How long a thread holding the GIL keeps it once another asks (Python's default: 5 ms).
The loop asks after each wait for sockets; at 5 ms a worker's evaluation adds up to 5 ms to
every turn of the loop, so a burst's acks wait on a sweep; at 1 ms they wait far less, and the
sweep itself is no slower (docs/benchmarks.md)."""

WORKERS = 2
"""Threads at once: the 2 cores of the smallest host the bot runs on; more only queue for
the GIL and lengthen each answer."""


class Offload:
    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = workers
        self.running = 0  # jobs on a worker thread now
        self.waiting = 0  # jobs waiting for one
        self._pool: ThreadPoolExecutor | None = None
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # What a job waits for before it starts: the running bot sets the acks on their way
        # (bot/inflight.py `acks_out`), so no new work takes the GIL from a burst's acks.
        self.before: Callable[[], Awaitable[None]] | None = None

    def _slots_here(self) -> asyncio.Semaphore:
        # A semaphore belongs to one loop; tests (and the shell) run several in turn.
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self.workers), loop
        return self._slots

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.workers, thread_name_prefix="meowbot-cpu", initializer=give_way.on_worker
            )
        return self._pool

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on a worker thread, once one of `workers` is free."""
        slots = self._slots_here()
        loop = asyncio.get_running_loop()
        self.waiting += 1
        try:
            if self.before is not None:
                await self.before()
            await slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        try:
            done = self._executor().submit(call)
        except BaseException:
            self.running -= 1
            slots.release()
            raise

        def free(_: object) -> None:
            # The slot frees when the thread ends, not when an awaiting task is cancelled:
            # a cancelled answer's work still holds its worker until it is done.
            self.running -= 1
            slots.release()

        def freed(f: object) -> None:
            # The loop may have closed first (a test's, at its end): no one waits on the slot.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(free, f)

        done.add_done_callback(freed)
        return await asyncio.wrap_future(done)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def keep_the_start() -> None:
    """Takes what is alive once the bot has started (its modules, app, tables, a simulated
    fleet: 200,000 objects at 50,000 nodes) out of the collector's full passes, which walked all
    of it every time and stopped every thread, the event loop's included (docs/benchmarks.md).
    They live as long as the process; `meowbot run` calls this before serving."""
    gc.collect()
    gc.freeze()


def loop_first() -> asyncio.AbstractEventLoop:
    """A new event loop whose I/O goes before the workers' steps (`give_way.LoopFirstSelector`):
    `meowbot run` serves on one."""
    return asyncio.SelectorEventLoop(give_way.LoopFirstSelector())


def favour_the_loop() -> None:
    """Hands the GIL back to the event loop sooner while workers compute (process-wide)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
