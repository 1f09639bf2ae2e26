"""The emulated workspace: channels, users, user groups, message history (threads, reactions),
ephemeral messages, views and files, with the clock that gives messages their ts.

The Web API methods read and change it through the methods here, which raise Slack's errors
(`channel_not_found`, `not_in_channel`, ...) as the API would.
"""

from __future__ import annotations

import copy
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.shell.emulator.errors import SlackError
from bot.shell.emulator.params import TS_RE, fmt_ts, ts_us

TEAM_DOMAIN = "meowbot-test"
APP_ID = "A0TEST"


@dataclass
class Channel:
    id: str
    name: str
    is_private: bool
    is_im: bool
    is_mpim: bool
    is_archived: bool
    is_member: bool
    user: str | None
    members: set[str] | None  # None: every user
    topic: str
    purpose: str
    created: int = field(default_factory=lambda: int(time.time()) - 86_400)


class Workspace:
    """One team's state, as the emulated API and the test see it."""

    def __init__(
        self,
        *,
        team_id: str,
        bot_user_id: str,
        bot_id: str,
        app_id: str,
        ts_start: float | None,
    ) -> None:
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id

        self.channels: dict[str, Channel] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.usergroups: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[dict[str, Any]]] = {}  # channel -> messages, oldest first
        self.ephemerals: list[dict[str, Any]] = []
        self.views: dict[str, dict[str, Any]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}  # user id -> published home tab
        self.uploads: dict[str, bytes] = {}
        self.files: dict[str, dict[str, Any]] = {}

        self._seq = 0
        self._deterministic_ts = ts_start is not None
        self._last_ts_us = int((ts_start or 0) * 1_000_000) - 100 if ts_start else 0

    # ids and time --------------------------------------------------------------------------

    def next_seq(self) -> int:
        """One counter for every id the workspace hands out, so none repeats."""
        self._seq += 1
        return self._seq

    def next_id(self, prefix: str) -> str:
        return f"{prefix}0{self.next_seq():08d}"

    def next_ts(self) -> str:
        """A fresh message ts, later than every one before (wall clock, or fixed steps from
        `ts_start` so tests can name them)."""
        if self._deterministic_ts:
            self._last_ts_us += 100
        else:
            now_us = int(time.time() * 1_000_000) // 100 * 100
            self._last_ts_us = max(now_us, self._last_ts_us + 100)
        return fmt_ts(self._last_ts_us)

    # seeding -------------------------------------------------------------------------------

    def add_channel(
        self,
        id: str,
        name: str,
        *,
        is_private: bool = False,
        is_im: bool = False,
        is_mpim: bool = False,
        is_archived: bool = False,
        is_member: bool = True,
        user: str | None = None,
        members: list[str] | None = None,
        topic: str = "",
        purpose: str = "",
    ) -> None:
        """Add a conversation. ``members=None`` means every user is a member."""
        self.channels[id] = Channel(
            id=id,
            name=name,
            is_private=is_private or is_im or is_mpim,
            is_im=is_im,
            is_mpim=is_mpim,
            is_archived=is_archived,
            is_member=is_member,
            user=user,
            members=set(members) if members is not None else None,
            topic=topic,
            purpose=purpose,
        )
        self.history.setdefault(id, [])

    def archive_channel(self, id: str) -> None:
        self.channels[id].is_archived = True

    def add_user(
        self,
        id: str,
        name: str,
        *,
        email: str | None = None,
        is_bot: bool = False,
        real_name: str | None = None,
        tz: str = "UTC",
        is_admin: bool = False,
        deleted: bool = False,
    ) -> None:
        real = real_name or name
        try:
            offset = ZoneInfo(tz).utcoffset(datetime.now(UTC))
            tz_offset = int(offset.total_seconds()) if offset is not None else 0
        except (ZoneInfoNotFoundError, ValueError):
            tz_offset = 0
        profile: dict[str, Any] = {
            "real_name": real,
            "real_name_normalized": real,
            "display_name": name,
            "display_name_normalized": name,
            "team": self.team_id,
            "image_72": f"https://avatars.example.invalid/{id}_72.png",
        }
        if email is not None:
            profile["email"] = email
        if is_bot and id == self.bot_user_id:
            profile["bot_id"] = self.bot_id
        self.users[id] = {
            "id": id,
            "team_id": self.team_id,
            "name": name,
            "deleted": deleted,
            "real_name": real,
            "tz": tz,
            "tz_label": tz,
            "tz_offset": tz_offset,
            "is_admin": is_admin,
            "is_owner": False,
            "is_bot": is_bot,
            "is_app_user": False,
            "updated": int(time.time()),
            "profile": profile,
        }

    def add_usergroup(self, id: str, handle: str, users: list[str]) -> None:
        self.usergroups[id] = {"id": id, "handle": handle, "users": list(users)}

    def add_message(
        self,
        channel: str,
        *,
        ts: str,
        text: str,
        user: str,
        thread_ts: str | None = None,
        reactions: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> None:
        """Seed one message into a channel's history (``thread_ts`` != ``ts`` makes a reply)."""
        if channel not in self.channels:
            raise KeyError(f"unknown channel {channel!r}: add_channel() it first")
        if not TS_RE.match(ts):
            raise ValueError(f"ts must look like '1733150000.000100', got {ts!r}")
        if any(m["ts"] == ts for m in self.history[channel]):
            raise ValueError(f"a message with ts {ts} already exists in {channel}")
        msg: dict[str, Any] = {"type": "message", "user": user, "text": text, "ts": ts}
        msg["team"] = self.team_id
        if thread_ts is not None:
            msg["thread_ts"] = thread_ts
        if reactions:
            msg["reactions"] = [
                {
                    "name": r["name"],
                    "users": list(r.get("users", [])),
                    "count": r.get("count", len(r.get("users", []))),
                }
                for r in reactions
            ]
        msg.update(extra)
        self.store_message(channel, msg)
        self._last_ts_us = max(self._last_ts_us, ts_us(ts))

    # messages ------------------------------------------------------------------------------

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """All stored messages of a channel (top level and replies), oldest first, as copies."""
        if channel not in self.channels:
            raise KeyError(f"unknown channel {channel!r}")
        return [self.render_message(channel, m) for m in self.history[channel]]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        return self.render_message(channel, self.find_message(channel, ts))

    def store_message(self, channel: str, msg: dict[str, Any]) -> None:
        messages = self.history.setdefault(channel, [])
        messages.append(msg)
        messages.sort(key=lambda m: ts_us(m["ts"]))

    def find_message(self, channel: str, ts: str) -> dict[str, Any]:
        for msg in self.history.get(channel, []):
            if msg["ts"] == ts:
                return msg
        raise SlackError("message_not_found")

    def render_message(self, channel: str, msg: dict[str, Any]) -> dict[str, Any]:
        """A stored message as the API returns it: a copy, with its thread's summary."""
        out = copy.deepcopy(msg)
        replies = [
            m
            for m in self.history.get(channel, [])
            if m.get("thread_ts") == msg["ts"] and m["ts"] != msg["ts"]
        ]
        if replies:
            users = list(dict.fromkeys(m.get("user") for m in replies if m.get("user")))
            out.update(
                thread_ts=msg["ts"],
                reply_count=len(replies),
                reply_users=users,
                reply_users_count=len(users),
                latest_reply=replies[-1]["ts"],
            )
        return out

    def new_bot_message(
        self, text: str | None, blocks: list[Any] | None, attachments: list[Any] | None
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "text": text or "",
            "ts": self.next_ts(),
            "team": self.team_id,
            "bot_profile": {
                "id": self.bot_id,
                "app_id": self.app_id,
                "name": "meowbot",
                "team_id": self.team_id,
                "deleted": False,
            },
        }
        if blocks:
            msg["blocks"] = with_block_ids(blocks)
        if attachments:
            msg["attachments"] = copy.deepcopy(attachments)
        return msg

    def thread_parent(self, channel: str, thread_ts: str) -> str:
        """The ts of the thread `thread_ts` belongs to (a reply's ts names its parent's)."""
        if not TS_RE.match(thread_ts):
            raise SlackError(
                "invalid_thread_ts",
                response_metadata={"messages": [f"[ERROR] {thread_ts} is not a valid thread_ts"]},
            )
        try:
            parent = self.find_message(channel, thread_ts)
        except SlackError:
            raise SlackError("thread_not_found") from None
        return str(parent.get("thread_ts") or parent["ts"])

    def delete(self, channel: str, ts: str, *, bot_only: bool) -> None:
        msg = self.find_message(channel, ts)
        if bot_only and msg.get("user") != self.bot_user_id:
            raise SlackError("cant_delete_message")
        self.history[channel].remove(msg)

    # channels ------------------------------------------------------------------------------

    def resolve_channel(self, value: Any, *, allow_names: bool = False) -> Channel:
        if not value or not isinstance(value, str):
            raise SlackError("channel_not_found")
        ch = self.channels.get(value)
        if ch is None and allow_names:
            name = value.removeprefix("#")
            ch = next((c for c in self.channels.values() if c.name == name), None)
            if ch is None and value in self.users:
                ch = self.im_with(value)
        if ch is None or (ch.is_private and not ch.is_member):
            raise SlackError("channel_not_found")
        return ch

    def readable(self, value: Any) -> Channel:
        ch = self.resolve_channel(value)
        if not ch.is_member:
            raise SlackError("not_in_channel")
        return ch

    def writable(self, value: Any) -> Channel:
        ch = self.resolve_channel(value, allow_names=True)
        if ch.is_archived:
            raise SlackError("is_archived")
        if not ch.is_member:
            raise SlackError("not_in_channel")
        return ch

    def im_with(self, user: str) -> Channel:
        """The bot's direct-message conversation with `user`, opened on first use."""
        for ch in self.channels.values():
            if ch.is_im and ch.user == user:
                return ch
        cid = "D" + user[1:]
        self.add_channel(cid, cid, is_im=True, user=user, members=[user, self.bot_user_id])
        return self.channels[cid]

    def members(self, ch: Channel) -> list[str]:
        if ch.members is not None:
            return sorted(ch.members)
        return [u for u, info in self.users.items() if not info["deleted"]]


def set_or_drop(msg: dict[str, Any], key: str, value: Any) -> None:
    if value:
        msg[key] = value
    else:
        msg.pop(key, None)


def with_block_ids(blocks: list[Any]) -> list[Any]:
    """A copy of ``blocks`` where each block has a block_id (Slack generates missing ones)."""
    out = copy.deepcopy(blocks)
    taken = {b.get("block_id") for b in out if isinstance(b, dict)}
    for block in out:
        if isinstance(block, dict) and not block.get("block_id"):
            new_id = secrets.token_urlsafe(4)[:5]
            while new_id in taken:
                new_id = secrets.token_urlsafe(4)[:5]
            taken.add(new_id)
            block["block_id"] = new_id
    return out
