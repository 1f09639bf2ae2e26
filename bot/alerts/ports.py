"""The ports the alert services take; bot/backends/ implements them (Redis, Slack, Alertmanager)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from bot.alerts.models import AlertGroup

T = TypeVar("T")


class Fence(Protocol):
    name: str
    token: str


class AlertStore(Protocol):
    async def group_of(self, fingerprint: str) -> str | None: ...

    async def group(self, gid: str) -> AlertGroup | None: ...

    async def groups(self, gids: Sequence[str]) -> Mapping[str, AlertGroup]: ...

    async def open_ids(self) -> list[str]: ...

    async def update(
        self, gid: str, change: Callable[[AlertGroup | None], Any], *, fence: Any = None
    ) -> Any:
        """Applies `change` (group -> Update) atomically; returns the Update's result."""
        ...

    async def dirty(self, limit: int = 1000) -> list[tuple[str, float]]: ...

    async def clean(self, gid: str, seen: float) -> bool: ...

    async def mark_dirty(self, gid: str) -> None: ...

    async def storm_ts(self, channel: str) -> str | None: ...

    async def set_storm_ts(self, channel: str, ts: str | None, fence: Any) -> None: ...

    async def acquire(self, name: str, ttl_ms: int) -> Any: ...

    async def renew(self, fence: Any, ttl_ms: int) -> bool: ...

    async def release(self, fence: Any) -> None: ...

    async def audit(self, entry: dict[str, str]) -> None: ...

    async def record_drain(self, node: str, at_s: float) -> None: ...

    async def drains_since(self, since_s: float) -> int: ...

    async def claim_auto_drain(self, gid: str, node: str) -> bool: ...

    async def put_pending(self, pid: str, data: dict[str, Any], ttl_s: int) -> None: ...

    async def take_pending(self, pid: str) -> dict[str, Any] | None: ...


class Poster(Protocol):
    """Slack, as the notifier needs it. Raises PostError when Slack will not take the call."""

    async def post(self, channel: str, message: Any, *, thread_ts: str | None = None) -> str:
        """Returns the new message's ts."""
        ...

    async def update(self, channel: str, ts: str, message: Any) -> None: ...


class PostError(Exception):
    """Slack refused a call for good (not a rate limit: those are retried by slack_sdk)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error
