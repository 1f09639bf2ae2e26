"""The ports the alert services take; bot/backends/ implements them (Redis, Slack, Alertmanager),
and bot/render/alerts.py the messages the notifier posts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from bot.alerts.config import AlertsConfig
from bot.alerts.models import AlertGroup
from bot.alerts.pages import NodeRow
from bot.alerts.standing import Standings
from bot.ports import Fence
from bot.slack_message import SlackMessage

T = TypeVar("T")


@dataclass(frozen=True)
class Update(Generic[T]):
    """What a change of a group returns to `AlertStore.update`: the group to store and what
    the caller gets back."""

    group: AlertGroup | None  # None: leave the stored group as it was
    result: T
    dirty: bool  # the group's message must be posted or updated
    fingerprints: tuple[str, ...] = ()  # indexed to this group


class AlertStore(Protocol):
    async def groups_of(self, fingerprints: Sequence[str]) -> list[str | None]:
        """The group each fingerprint was indexed to (None: not seen), in one round trip."""
        ...

    async def group(self, gid: str) -> AlertGroup | None: ...

    async def groups(self, gids: Sequence[str]) -> Mapping[str, AlertGroup]: ...

    async def open_ids(self) -> list[str]: ...

    async def update(
        self,
        gid: str,
        change: Callable[[AlertGroup | None], Update[T]],
        *,
        fence: Fence | None = None,
        durable: bool = False,
    ) -> T:
        """Applies `change` atomically; returns the Update's result. Fenced writes raise
        `bot.errors.FenceLost` when the lock is no longer the caller's. `durable`: the write
        records something done outside (a post Slack took) and must outlive the store's
        failover; `change` must then be safe to apply twice."""
        ...

    async def dirty(self, limit: int = 1000) -> list[tuple[str, float]]: ...

    async def clean(self, gid: str, seen: float) -> bool: ...

    async def mark_dirty(self, gid: str) -> None: ...

    async def storm_ts(self, channel: str) -> str | None: ...

    async def set_storm_ts(self, channel: str, ts: str | None, fence: Fence) -> None: ...

    async def acquire(self, name: str, ttl_ms: int) -> Fence | None: ...

    async def renew(self, fence: Fence, ttl_ms: int) -> bool: ...

    async def release(self, fence: Fence) -> None: ...

    async def audit(self, entry: dict[str, str]) -> None: ...

    async def record_drain(self, node: str, at_s: float) -> None: ...

    async def drains_since(self, since_s: float) -> int: ...

    async def claim_auto_drain(self, gid: str, node: str) -> bool: ...

    async def put_pending(self, pid: str, data: dict[str, Any], ttl_s: int) -> None: ...

    async def take_pending(self, pid: str) -> dict[str, Any] | None: ...

    async def watching(self, now: datetime, gap_s: float) -> datetime:
        """Records a sweep at `now` and returns when the sweeps' unbroken run began (no two
        sweeps further apart than `gap_s`): what came before it meowbot did not see."""
        ...


class Poster(Protocol):
    """Slack, as the notifier needs it. Raises `bot.errors.PostError` when Slack will not take
    the call."""

    async def post(
        self, channel: str, message: SlackMessage, *, thread_ts: str | None = None
    ) -> str:
        """Returns the new message's ts."""
        ...

    async def update(self, channel: str, ts: str, message: SlackMessage) -> None: ...

    async def link(self, channel: str, ts: str) -> str | None:
        """A link to the message `ts` of `channel` (None: not known), for the storm summary
        to point at an event posted on its own; no call per link."""
        ...


class AlertMessages(Protocol):
    """The notifier's messages, built at the edge (Block Kit in bot/render/alerts.py) and handed
    to the `Poster` as they are."""

    def group(
        self,
        group: AlertGroup,
        cfg: AlertsConfig,
        now: datetime,
        standings: Standings,
    ) -> SlackMessage:
        """The group's message; `standings`: where its nodes stand in the scheduler now, which
        decides their buttons (bot/alerts/standing.py)."""
        ...

    def page(
        self,
        group: AlertGroup,
        rows: Sequence[NodeRow],
        index: int,
        cfg: AlertsConfig,
        standings: Standings,
    ) -> SlackMessage:
        """Reply `index` of the group's per-node detail in its thread: a line and buttons a
        node (bot/alerts/pages.py)."""
        ...

    def storm(
        self, groups: Sequence[AlertGroup], now: datetime, links: Mapping[str, str]
    ) -> SlackMessage:
        """The storm summary of a channel's open groups (none: the storm is over); `links`:
        by group id, a link to the message of each group posted on its own."""
        ...

    def reply(self, text: str) -> SlackMessage:
        """A thread reply carrying `text` as it is."""
        ...


class Silencer(Protocol):
    """Alertmanager's silences."""

    async def create_silence(
        self, matchers: dict[str, str], duration_s: float, created_by: str, comment: str
    ) -> str: ...

    async def silence_until(self, silence_id: str) -> datetime | None:
        """When the silence ends, read back from Alertmanager; None when it is not active."""
        ...

    async def close(self) -> None: ...
