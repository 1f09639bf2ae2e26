"""What the playground needs from shared state: limits, sessions, cancels and watches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.playground.models import Watch


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
