"""A week's digest as data: ranked by distinct reactors then by time, grouped by channel."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from bot.highlights.models import Highlight
from bot.highlights.schedule import Week


def posted_at(h: Highlight) -> datetime:
    return datetime.fromtimestamp(float(h.ts), UTC)


def ranked(highlights: Sequence[Highlight]) -> list[Highlight]:
    """Most distinct reactors first; among equals the earlier post first."""
    return sorted(highlights, key=lambda h: (-len(h.reactors), float(h.ts), h.channel))


class ChannelGroup(BaseModel):
    model_config = ConfigDict(frozen=True)

    channel: str
    entries: tuple[Highlight, ...]


class Digest(BaseModel):
    model_config = ConfigDict(frozen=True)

    week: Week
    audience: str
    total: int
    channels: int
    people: int  # distinct people who reacted
    reactions: int  # sum over highlights of their distinct reactors
    top: tuple[ChannelGroup, ...]  # the first `top_n`, grouped
    rest: tuple[ChannelGroup, ...]  # the others, for the thread

    @property
    def empty(self) -> bool:
        return self.total == 0

    @property
    def rest_count(self) -> int:
        return sum(len(g.entries) for g in self.rest)


def _grouped(entries: Sequence[Highlight]) -> tuple[ChannelGroup, ...]:
    """Channels in the order of their best entry; entries keep their rank inside."""
    order: dict[str, list[Highlight]] = {}
    for h in entries:
        order.setdefault(h.channel, []).append(h)
    return tuple(ChannelGroup(channel=c, entries=tuple(hs)) for c, hs in order.items())


def build_digest(highlights: Sequence[Highlight], week: Week, audience: str, top_n: int) -> Digest:
    """`highlights` are those already allowed in `audience` (see privacy.shown)."""
    order = ranked(highlights)
    people = {u for h in order for u in h.reactors}
    return Digest(
        week=week,
        audience=audience,
        total=len(order),
        channels=len({h.channel for h in order}),
        people=len(people),
        reactions=sum(len(h.reactors) for h in order),
        top=_grouped(order[:top_n]),
        rest=_grouped(order[top_n:]),
    )
