"""Attempts tried again in the background: a job owner's DM Slack failed to take for now.

Tenacity, bounded in tries and in time, with exponential backoff and jitter (so replicas
retrying the same DM do not call Slack in step); the person who drained got their answer
already, so nothing waits on these. An attempt says True when done (sent, or nothing left to
send); a `BackendError` it raises (Redis out of reach for the claim) is tried again too. When
the tries run out the attempt is dropped with one log line: it left its claim free, so the next
drain of the same event tells.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

from bot.errors import BackendError

log = logging.getLogger(__name__)

TRIES = 5  # after the first, inline one
FIRST_WAIT_S = 2.0
MAX_WAIT_S = 60.0
GIVE_UP_AFTER_S = 300.0


class BackgroundRetries:
    def __init__(
        self,
        *,
        tries: int = TRIES,
        first_wait_s: float = FIRST_WAIT_S,
        max_wait_s: float = MAX_WAIT_S,
        give_up_after_s: float = GIVE_UP_AFTER_S,
    ) -> None:
        self.tries = tries
        self.first_wait_s = first_wait_s
        self.max_wait_s = max_wait_s
        self.give_up_after_s = give_up_after_s
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, attempt: Callable[[], Awaitable[bool]], what: Mapping[str, str]) -> None:
        task = asyncio.get_running_loop().create_task(self._run(attempt, dict(what)))
        self._tasks.add(task)  # held, or the loop may collect it mid-wait
        task.add_done_callback(self._tasks.discard)

    @property
    def waiting(self) -> int:
        return len(self._tasks)

    async def _run(self, attempt: Callable[[], Awaitable[bool]], what: dict[str, str]) -> None:
        retrying = AsyncRetrying(
            retry=retry_if_result(lambda done: not done) | retry_if_exception_type(BackendError),
            stop=stop_after_attempt(self.tries) | stop_after_delay(self.give_up_after_s),
            wait=wait_exponential(multiplier=self.first_wait_s, max=self.max_wait_s)
            + wait_random(0, self.first_wait_s),
        )
        try:
            # The inline try just failed: wait before this first one too.
            await asyncio.sleep(self.first_wait_s)
            await retrying(attempt)
        except RetryError as exc:
            last = exc.last_attempt
            error = str(last.exception()) if last.failed else "Slack still failing"
            log.warning(
                "DM not delivered after its tries; the next drain of the event tells",
                extra={**what, "tries": self.tries + 1, "error": error},
            )
        except Exception:  # a bug must not take the loop's other tasks with it
            log.exception("DM retry crashed", extra=what)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
