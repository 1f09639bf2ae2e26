"""JSON over HTTP for our own backends: a timeout, tenacity retries, bounded by a deadline.

Retries are for what a retry can mend (connection refused, timeouts, 502/503/504), with
exponential backoff and jitter, and never past the request's deadline: an answer that cannot
arrive in time is an error sentence naming the backend, not a hang.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from bot.errors import BackendError

RETRY_STATUSES = {502, 503, 504}
DEFAULT_ATTEMPTS = 4


class Deadline:
    """An absolute point in time (monotonic) by which a whole request must be answered."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.retryable


def _stop_at_deadline(deadline: Deadline) -> Any:
    def stop(state: RetryCallState) -> bool:
        # Leave at least 50 ms for the next attempt, or give up now.
        return deadline.left() < 0.05

    return stop


async def request_json(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    backend: str,
    deadline: Deadline,
    attempts: int = DEFAULT_ATTEMPTS,
    ok_statuses: frozenset[int] = frozenset({200}),
    **kwargs: Any,
) -> tuple[int, Any]:
    """(status, decoded JSON) for a status in ok_statuses; BackendError otherwise."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_attempt(attempts) | _stop_at_deadline(deadline),
        wait=wait_random_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await _once(session, method, url, backend, deadline, ok_statuses, **kwargs)
    raise AssertionError("unreachable")  # AsyncRetrying either returns or reraises


async def _once(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    backend: str,
    deadline: Deadline,
    ok_statuses: frozenset[int],
    **kwargs: Any,
) -> tuple[int, Any]:
    left = deadline.left()
    if left <= 0:
        raise BackendError(backend, "did not answer in time.")
    try:
        timeout = aiohttp.ClientTimeout(total=left)
        async with session.request(method, url, timeout=timeout, **kwargs) as resp:
            text = await resp.text()
            if resp.status not in ok_statuses:
                raise BackendError(
                    backend,
                    f"answered HTTP {resp.status}{_detail(text)}.",
                    retryable=resp.status in RETRY_STATUSES,
                )
            try:
                return resp.status, (await resp.json(content_type=None)) if text else None
            except ValueError as exc:
                raise BackendError(backend, "answered something that is not JSON.") from exc
    except TimeoutError as exc:
        raise BackendError(backend, "did not answer in time.", retryable=True) from exc
    except aiohttp.ClientConnectionError as exc:
        raise BackendError(backend, "cannot be reached.", retryable=True) from exc
    except aiohttp.ClientError as exc:
        raise BackendError(backend, f"failed: {type(exc).__name__}.") from exc


def _detail(text: str) -> str:
    """An error body in a few words: a JSON body's `error` or `message` field (Prometheus',
    VictoriaMetrics', Kubernetes'), or its first `errors` entry (slurmrestd's), rather than
    its braces."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        said = body.get("error") or body.get("message")
        errors = body.get("errors")
        if not said and isinstance(errors, list) and errors and isinstance(errors[0], dict):
            said = errors[0].get("description") or errors[0].get("error")  # slurmrestd's
        if isinstance(said, str) and said.strip():
            text = said
    first = " ".join(text.split())[:120]
    return f" ({first})" if first else ""
