"""The ports the playground takes: the checkpoint servers, the folders checkpoints are saved in,
training metrics, and shared state (limits, sessions, cancels and watches)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.playground.catalog import FolderCheckpoint, ServedModel
from bot.playground.config import Endpoint
from bot.playground.models import Prompt, Watch
from bot.playground.sse import Delta


@dataclass(frozen=True)
class Refusal:
    sentence: str  # why, and when to retry


@dataclass(frozen=True)
class Limits:
    per_user: int
    per_user_per_minute: int
    global_cap: int


class PlaygroundStore(Protocol):
    async def acquire(self, user_id: str, limits: Limits) -> Refusal | None:
        """Takes a request slot for the user, or says why not; release it when done."""
        ...

    async def release(self, user_id: str) -> None: ...

    async def save_session(self, sid: str, data: str) -> None: ...

    async def session(self, sid: str) -> str | None: ...

    async def cancel(self, sid: str) -> None: ...

    async def cancelled(self, sid: str) -> bool: ...

    async def add_watch(self, watch: Watch) -> None: ...

    async def watches(self) -> list[Watch]: ...

    async def remove_watch(self, watch_id: str) -> bool: ...

    async def set_watch_step(self, watch_id: str, step: int) -> None: ...

    async def claim_watch_run(self, watch_id: str, step: int) -> bool:
        """True once per (watch, step), across replicas."""
        ...


class Servers(Protocol):
    """The checkpoint servers (OpenAI-compatible HTTP): what they serve, and a prompt streamed."""

    async def models(self, endpoint: Endpoint, timeout_s: float = 5.0) -> list[ServedModel]: ...

    def stream(
        self,
        endpoint: Endpoint,
        model_id: str,
        prompt: Prompt,
        *,
        first_token_s: float,
        stall_s: float,
        total_s: float,
    ) -> AsyncIterator[Delta]: ...

    async def close(self) -> None: ...


class Training(Protocol):
    """Training metrics of the runs (loss, tokens seen) by (run, step)."""

    async def read(
        self, timeout_s: float = 5.0
    ) -> dict[tuple[str, int], tuple[float | None, int | None]]: ...

    async def close(self) -> None: ...


# Finds the checkpoints saved in folders (and says which folders it could not read).
Scanner = Callable[[Sequence[Path]], Awaitable[tuple[list[FolderCheckpoint], list[str]]]]
