"""Slack as the highlights read and write it: channels, people, messages, permalinks, history,
and the digest's posts. Through the bot's AsyncWebClient, whose retry handlers wait out 429s
(Retry-After) and connection errors.

Answers that change slowly are cached in process with a bounded lifetime: a channel's
visibility (`conversations.info`, `channel_cache_s`, 10 minutes by default, so a channel made
private stops being shown within that) and people (`users.info`, an hour). Slack saying "no
such thing" or "not for you" is an answer (None, cached too); anything else raises, so an event
is answered 500 and Slack retries it later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ticks
from bot.highlights.models import ChannelInfo, MessageInfo, Person, Visibility
from bot.slack_message import SlackMessage

T = TypeVar("T")
PERSON_CACHE_S = 3600.0
CACHE_MAX = 20_000
DIGEST_EVENT_TYPE = "meowbot_digest"
# Slack's answers that mean "not there, or not visible to this bot": final, not retried.
_NOT_VISIBLE = {
    "channel_not_found",
    "not_in_channel",
    "missing_scope",
    "user_not_found",
    "user_not_visible",
    "message_not_found",
    "thread_not_found",
    "no_item_specified",
    "is_archived",
    "method_not_supported_for_channel_type",
}


class TtlCache(Generic[T]):
    def __init__(self, ttl_s: float, max_items: int = CACHE_MAX) -> None:
        self.ttl_s = ttl_s
        self.max_items = max_items
        self._items: dict[str, tuple[float, T]] = {}

    def get(self, k: str) -> tuple[bool, T | None]:
        hit = self._items.get(k)
        if hit is None or hit[0] < ticks.now():
            return False, None
        return True, hit[1]

    def put(self, k: str, value: T) -> None:
        if len(self._items) >= self.max_items:
            now = ticks.now()
            self._items = {k_: v for k_, v in self._items.items() if v[0] >= now}
            if len(self._items) >= self.max_items:
                self._items.clear()
        self._items[k] = (ticks.now() + self.ttl_s, value)

    def clear(self) -> None:
        self._items.clear()


def _error(exc: SlackApiError) -> str:
    return str(exc.response.get("error", "unknown_error"))


def _visibility(ch: dict[str, Any]) -> Visibility:
    if ch.get("is_im"):
        return Visibility.IM
    if ch.get("is_mpim"):
        return Visibility.MPIM
    if ch.get("is_private") or ch.get("is_group"):
        return Visibility.PRIVATE
    return Visibility.PUBLIC


def message_info(channel: str, m: dict[str, Any]) -> MessageInfo:
    return MessageInfo(
        channel=channel,
        ts=str(m["ts"]),
        thread_ts=str(m["thread_ts"]) if m.get("thread_ts") else None,
        author=str(m["user"]) if m.get("user") else None,
        text=str(m.get("text") or ""),
        is_bot=bool(m.get("bot_id")) or m.get("subtype") == "bot_message",
    )


@dataclass
class HistoryPage:
    messages: list[dict[str, Any]]
    next_cursor: str | None


class SlackDirectory:
    page_size = 200  # messages a history page (Slack allows up to 999; 200 is its advice)

    def __init__(self, client: AsyncWebClient, *, channel_cache_s: float = 600.0) -> None:
        self.client = client
        self._channels: TtlCache[ChannelInfo | None] = TtlCache(channel_cache_s)
        self._people: TtlCache[Person | None] = TtlCache(PERSON_CACHE_S)
        self._team: str | None = None

    def clear_cache(self) -> None:
        """Forget what was learnt of channels and people (they are read again on next use)."""
        self._channels.clear()
        self._people.clear()

    async def team(self) -> str:
        if self._team is None:
            self._team = str((await self.client.auth_test())["team_id"])
        return self._team

    async def channel(self, channel_id: str) -> ChannelInfo | None:
        if channel_id.startswith("D"):  # a DM: never recorded, no need to ask
            return ChannelInfo(id=channel_id, name="direct message", visibility=Visibility.IM)
        hit, cached = self._channels.get(channel_id)
        if hit:
            return cached
        try:
            ch = (await self.client.conversations_info(channel=channel_id))["channel"]
            info: ChannelInfo | None = ChannelInfo(
                id=channel_id,
                name=str(ch.get("name") or channel_id),
                visibility=_visibility(ch),
                archived=bool(ch.get("is_archived")),
                member=bool(ch.get("is_member", True)),
            )
        except SlackApiError as exc:
            if _error(exc) not in _NOT_VISIBLE:
                raise
            info = None
        self._channels.put(channel_id, info)
        return info

    async def person(self, user_id: str) -> Person | None:
        hit, cached = self._people.get(user_id)
        if hit:
            return cached
        try:
            u = (await self.client.users_info(user=user_id))["user"]
            profile = u.get("profile") or {}
            name = profile.get("display_name") or profile.get("real_name") or u.get("name")
            person: Person | None = Person(
                id=user_id,
                name=str(name or user_id),
                is_bot=bool(u.get("is_bot")) or user_id == "USLACKBOT",
            )
        except SlackApiError as exc:
            if _error(exc) not in _NOT_VISIBLE:
                raise
            person = None
        self._people.put(user_id, person)
        return person

    async def message(self, channel: str, ts: str) -> MessageInfo | None:
        try:
            resp = await self.client.reactions_get(channel=channel, timestamp=ts, full=True)
        except SlackApiError as exc:
            if _error(exc) not in _NOT_VISIBLE:
                raise
            return None
        return message_info(channel, resp["message"])

    async def permalink(self, channel: str, ts: str) -> str | None:
        try:
            resp = await self.client.chat_getPermalink(channel=channel, message_ts=ts)
        except SlackApiError as exc:
            if _error(exc) not in _NOT_VISIBLE:
                raise
            return None
        return str(resp["permalink"])

    # the backfill's walk -------------------------------------------------------------------------

    async def member_public_channels(self) -> AsyncIterator[ChannelInfo]:
        cursor: str | None = None
        while True:
            resp = await self.client.conversations_list(
                types="public_channel", exclude_archived=True, limit=200, cursor=cursor
            )
            for ch in resp["channels"]:
                if ch.get("is_member"):
                    yield ChannelInfo(
                        id=str(ch["id"]),
                        name=str(ch.get("name") or ch["id"]),
                        visibility=_visibility(ch),
                    )
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return

    async def history(self, channel: str, *, oldest: float, cursor: str | None) -> HistoryPage:
        resp = await self.client.conversations_history(
            channel=channel, oldest=f"{oldest:.6f}", cursor=cursor, limit=self.page_size
        )
        nxt = (resp.get("response_metadata") or {}).get("next_cursor") or None
        return HistoryPage(list(resp["messages"]), nxt if resp.get("has_more") else None)

    async def replies(self, channel: str, ts: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            resp = await self.client.conversations_replies(
                channel=channel, ts=ts, cursor=cursor, limit=200
            )
            out.extend(m for m in resp["messages"] if m.get("ts") != ts)
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor or not resp.get("has_more"):
                return out

    async def reactions(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """Every reaction of a message with all its people (history may list only some)."""
        info = await self.client.reactions_get(channel=channel, timestamp=ts, full=True)
        return list(info["message"].get("reactions") or [])


class SlackDigestPoster:
    """Posts digests; the first message of each carries its week in Slack message metadata,
    which is how a replica that took over from a crashed one finds a digest already posted."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(
        self,
        channel: str,
        message: SlackMessage,
        *,
        thread_ts: str | None = None,
        week: str | None = None,
    ) -> str:
        metadata = (
            {"event_type": DIGEST_EVENT_TYPE, "event_payload": {"week": week}} if week else None
        )
        resp = await self.client.chat_postMessage(
            channel=channel,
            text=message.text,
            blocks=message.blocks,
            thread_ts=thread_ts,
            metadata=metadata,
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(resp["ts"])

    async def find_digest(self, channel: str, week: str, since: datetime) -> str | None:
        cursor: str | None = None
        while True:
            resp = await self.client.conversations_history(
                channel=channel,
                oldest=f"{since.timestamp():.6f}",
                include_all_metadata=True,
                limit=200,
                cursor=cursor,
            )
            for m in resp["messages"]:
                meta = m.get("metadata") or {}
                payload = meta.get("event_payload") or {}
                if meta.get("event_type") == DIGEST_EVENT_TYPE and payload.get("week") == week:
                    return str(m["ts"])
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor or not resp.get("has_more"):
                return None
