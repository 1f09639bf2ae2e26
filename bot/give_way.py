"""CPU work on a worker thread stands aside while acks are on their way.

A worker thread and the event loop share one interpreter lock: while a worker evaluates a
50,000-node table, the loop gets the lock one switch interval in two (or three, with two
workers), so a burst of 200 acks takes two or three times as long as in a bare Bolt app. The
loop says when acks are on their way (`hold`, from bot/inflight.py as a request from Slack comes
in, `release` once its answer is handed to aiohttp); long pure loops call `give_way()` between
their steps (each check of a table, each metric of a simulated read), which, on a worker thread
and only there, waits until no ack is on its way. The loop then runs alone until the acks are
out. A step is at most tens of milliseconds at 50,000 nodes, so that is how long an ack can wait
for a worker; the wait itself is bounded, so a stream of requests never stops the work.

Process-wide, like the switch interval: several bots in one process (tests run replicas) share
the interpreter lock, so each one's acks rightly hold back every worker.
"""

from __future__ import annotations

import selectors
import threading
from collections.abc import Iterator

MAX_WAIT_S = 0.25
"""The longest a worker stands aside at one step: under a steady stream of requests some ack is
always on its way, and the work after them must still finish well inside Slack's patience."""

_clear = threading.Event()
_clear.set()
_count = 0
_lock = threading.Lock()
_local = threading.local()


def hold() -> None:
    """An ack is on its way (called on the loop)."""
    global _count
    with _lock:
        _count += 1
        _clear.clear()


def release() -> None:
    """That ack went out (called on the loop)."""
    global _count
    with _lock:
        _count = max(0, _count - 1)
        if _count == 0:
            _clear.set()


def on_worker() -> None:
    """Marks the calling thread as a worker that gives way (a thread pool's initializer)."""
    _local.gives_way = True


def give_way() -> None:
    """On a worker thread: returns once no ack is on its way, or after MAX_WAIT_S. Elsewhere
    (the loop itself, a test, the shell) it returns at once: the loop must never wait here."""
    if getattr(_local, "gives_way", False) and not _clear.is_set():
        _clear.wait(MAX_WAIT_S)


def in_slices(length: int, size: int) -> Iterator[slice]:
    """Slices of `size` over `length` rows, standing aside (`give_way`) between two: a column of
    400,000 rows at 50,000 nodes is 15-30 ms of Python in one piece, which the acks wait for."""
    for first in range(0, length, size):
        if first:
            give_way()
        yield slice(first, first + size)


class LoopFirstSelector(selectors.DefaultSelector):
    """The event loop's selector, which sets the workers aside while the loop has I/O to handle.

    Between the moment a burst reaches the loop and the moment its first request is read and
    counted (`hold` from bot/inflight.py), the loop accepts 200 connections one `accept()` at a
    time, and each call gives up the interpreter lock: with a worker computing (a sweep of
    50,000 nodes), taking it back cost up to a switch interval each, summed over the burst
    (docs/benchmarks.md). So: from the moment `select` finds
    anything ready until the loop waits again, workers stand aside at their next step."""

    _held = False

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self._held:
            self._held = False
            release()
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
        if ready:
            self._held = True
            hold()
        return ready
