"""The ports the highlights take; bot/backends/ implements them (Redis, Slack's Web API), and
bot/render/highlights.py the digest's messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from bot.highlights.digest import Digest
from bot.highlights.models import ChannelInfo, Highlight, MessageInfo, Names, Person, Reaction
from bot.ports import Fence
from bot.slack_message import SlackMessage


@dataclass(frozen=True)
class Reacted:
    """What one reaction did to the stored message."""

    count: int  # distinct people reacting now
    created: bool  # this reaction created the record: its caller fetches excerpt and link
    duplicate: bool = False  # the delivery was seen before: nothing changed
    gone: bool = False  # the message was deleted (or is a bot's): nothing recorded


class HighlightStore(Protocol):
    async def react(
        self,
        r: Reaction,
        *,
        threshold: int,
        now: datetime,
        first_tagged_at: datetime | None = None,
    ) -> Reacted: ...

    async def enrich(
        self,
        team: str,
        channel: str,
        ts: str,
        *,
        thread_ts: str | None,
        author: str | None,
        excerpt: str,
        permalink: str,
    ) -> bool:
        """Stores what was read of the message; False when the record is gone."""
        ...

    async def edit(self, team: str, channel: str, ts: str, excerpt: str, edited_ts: str) -> bool:
        """A newer edit replaces the excerpt; False when the message is not tracked."""
        ...

    async def delete(self, team: str, channel: str, ts: str) -> bool: ...

    async def get(self, team: str, channel: str, ts: str) -> Highlight | None: ...

    async def between(self, team: str, start: datetime, end: datetime) -> list[Highlight]: ...

    async def everything(self, team: str) -> list[Highlight]: ...

    async def index(self, team: str) -> list[Highlight]:
        """Every highlight in brief: channel, ts, author and first tagged at only."""
        ...

    async def set_opt_out(self, team: str, user: str, out: bool) -> None: ...

    async def opted_out(self, team: str) -> set[str]: ...

    async def digest_state(self, team: str, channel: str, week: str) -> str | None: ...

    async def set_digest_state(
        self, team: str, channel: str, week: str, state: str, fence: Fence
    ) -> None:
        """Fenced: raises bot.errors.FenceLost when the lock is no longer the caller's."""
        ...

    async def acquire(self, team: str, name: str, ttl_ms: int) -> Fence | None: ...

    async def release(self, team: str, fence: Fence) -> None: ...


class Directory(Protocol):
    """Slack, read: cached where the answer changes slowly. None means Slack said no such thing
    (or the bot may not see it); a failure a retry can mend raises."""

    async def channel(self, channel_id: str) -> ChannelInfo | None: ...

    async def person(self, user_id: str) -> Person | None: ...

    async def message(self, channel: str, ts: str) -> MessageInfo | None: ...

    async def permalink(self, channel: str, ts: str) -> str | None: ...


class DigestPoster(Protocol):
    async def post(
        self,
        channel: str,
        message: SlackMessage,
        *,
        thread_ts: str | None = None,
        week: str | None = None,
    ) -> str:
        """Posts; a digest's first message carries its week in the message metadata."""
        ...

    async def find_digest(self, channel: str, week: str, since: datetime) -> str | None:
        """The ts of a digest of `week` already in `channel` since `since`, if any."""
        ...


class HistoryPage(Protocol):
    """One page of a channel's history, newest first."""

    messages: list[dict[str, Any]]
    next_cursor: str | None


class HistoryWalker(Protocol):
    """Slack's history, as `meowbot backfill-highlights` reads it."""

    def member_public_channels(self) -> AsyncIterator[ChannelInfo]: ...

    async def history(self, channel: str, *, oldest: float, cursor: str | None) -> HistoryPage: ...

    async def replies(self, channel: str, ts: str) -> list[dict[str, Any]]: ...

    async def reactions(self, channel: str, ts: str) -> list[dict[str, Any]]: ...


class ProgressStore(Protocol):
    """Where a backfill keeps its cursor and counts, so an interrupted run resumes."""

    async def backfill_progress(self, team: str, run: str, channel: str) -> dict[str, str]: ...

    async def save_backfill_progress(
        self, team: str, run: str, channel: str, progress: dict[str, str]
    ) -> None: ...


class DigestRenderer(Protocol):
    """The weekly digest as messages, built at the edge (Block Kit in bot/render/highlights.py):
    the digest message and the thread replies holding the rest (maybe none)."""

    def __call__(
        self, digest: Digest, names: Names, *, emoji: str, zone: ZoneInfo
    ) -> tuple[SlackMessage, list[SlackMessage]]: ...
