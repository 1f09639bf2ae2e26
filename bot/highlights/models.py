"""The highlights' models: the shared `Highlight`, what a reaction event says, channels, people,
and the display names a rendering uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from bot.models import Highlight

__all__ = [
    "ChannelInfo",
    "Highlight",
    "MessageInfo",
    "Names",
    "Person",
    "Reaction",
    "Visibility",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Reaction(_Frozen):
    """One reaction_added / reaction_removed (or one reactor found by the backfill)."""

    team: str
    channel: str
    ts: str  # the message's ts
    user: str  # who reacted
    author: str | None  # the message's author (item_user), when Slack says
    emoji: str  # base name, skin tone folded
    event_ts: str  # orders add and remove of the same person; "0" for the backfill
    added: bool
    event_id: str | None = None  # the delivery's id: a retry of it is dropped


class Visibility(StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"
    IM = "im"
    MPIM = "mpim"


class ChannelInfo(_Frozen):
    id: str
    name: str
    visibility: Visibility
    archived: bool = False
    member: bool = True


class Person(_Frozen):
    id: str
    name: str
    is_bot: bool = False


class MessageInfo(_Frozen):
    """A message as the bot reads it back (reactions.get or history)."""

    channel: str
    ts: str
    thread_ts: str | None = None
    author: str | None = None
    text: str = ""
    is_bot: bool = False


@dataclass(frozen=True)
class Names:
    """Display names for a rendering: people and channels."""

    people: dict[str, str] = field(default_factory=dict)
    channels: dict[str, str] = field(default_factory=dict)

    def person(self, uid: str) -> str:
        return self.people.get(uid) or "someone"

    def channel(self, cid: str) -> str:
        return self.channels.get(cid) or cid
