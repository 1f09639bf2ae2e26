"""The Web API methods on conversations: conversations.* (history, threads, info, listing,
members, opening a direct message)."""

from __future__ import annotations

from typing import Any

from bot.shell.emulator.errors import SlackError
from bot.shell.emulator.params import (
    decode_cursor,
    encode_cursor,
    page_limit,
    required,
    time_window,
    truthy,
    ts_us,
)
from bot.shell.emulator.web_api import MethodTable
from bot.shell.emulator.workspace import Channel, Workspace


class ConversationMethods:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def table(self) -> MethodTable:
        return {
            "conversations.history": (self.history, "bot"),
            "conversations.replies": (self.replies, "bot"),
            "conversations.info": (self.info, "bot"),
            "conversations.list": (self.list, "bot"),
            "conversations.members": (self.members, "bot"),
            "conversations.open": (self.open, "bot"),
        }

    def history(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        ch = ws.readable(args.get("channel"))
        limit = page_limit(args, 100, 999)
        in_window = time_window(args)
        cursor = args.get("cursor")
        before = ts_us(decode_cursor(str(cursor), "next_ts")) if cursor else None

        def in_range(us: int) -> bool:
            return in_window(us) and (before is None or us <= before)

        top_level = [
            m
            for m in ws.history[ch.id]
            if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"
        ]
        selected = [m for m in reversed(top_level) if in_range(ts_us(m["ts"]))]
        page, rest = selected[:limit], selected[limit:]
        messages = [ws.render_message(ch.id, m) for m in page]
        if not truthy(args.get("include_all_metadata")):
            for m in messages:  # Slack shows message metadata only when asked for it
                m.pop("metadata", None)
        result: dict[str, Any] = {"messages": messages, "has_more": bool(rest), "pin_count": 0}
        if rest:
            result["response_metadata"] = {"next_cursor": encode_cursor("next_ts", rest[0]["ts"])}
        return result

    def replies(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        ch = ws.readable(args.get("channel"))
        required(args, "ts")
        try:
            msg = ws.find_message(ch.id, str(args["ts"]))
        except SlackError:
            raise SlackError("thread_not_found") from None
        parent_ts = str(msg.get("thread_ts") or msg["ts"])
        try:
            parent = ws.find_message(ch.id, parent_ts)
        except SlackError:
            raise SlackError("thread_not_found") from None
        limit = page_limit(args, 1000, 1000)
        in_window = time_window(args)
        cursor = args.get("cursor")
        after = ts_us(decode_cursor(str(cursor), "next_ts")) if cursor else None

        def in_range(us: int) -> bool:
            return in_window(us) and (after is None or us >= after)

        replies = [
            m
            for m in ws.history[ch.id]
            if m.get("thread_ts") == parent_ts and m["ts"] != parent_ts and in_range(ts_us(m["ts"]))
        ]
        thread = replies if cursor else [parent, *replies]
        page, rest = thread[:limit], thread[limit:]
        result: dict[str, Any] = {
            "messages": [ws.render_message(ch.id, m) for m in page],
            "has_more": bool(rest),
        }
        if rest:
            result["response_metadata"] = {"next_cursor": encode_cursor("next_ts", rest[0]["ts"])}
        return result

    def render(self, ch: Channel, *, num_members: bool = False) -> dict[str, Any]:
        """A conversation object as conversations.info/list return it."""
        if ch.is_im:
            return {
                "id": ch.id,
                "created": ch.created,
                "is_im": True,
                "is_org_shared": False,
                "user": ch.user,
                "is_user_deleted": False,
                "priority": 0,
                "is_archived": ch.is_archived,
            }
        out: dict[str, Any] = {
            "id": ch.id,
            "name": ch.name,
            "name_normalized": ch.name,
            "is_channel": not ch.is_mpim,
            "is_group": False,
            "is_im": False,
            "is_mpim": ch.is_mpim,
            "is_private": ch.is_private,
            "is_archived": ch.is_archived,
            "is_general": ch.name == "general",
            "is_member": ch.is_member,
            "is_shared": False,
            "is_ext_shared": False,
            "is_org_shared": False,
            "created": ch.created,
            "creator": "U0ADMIN",
            "unlinked": 0,
            "context_team_id": self.ws.team_id,
            "topic": {"value": ch.topic, "creator": "", "last_set": 0},
            "purpose": {"value": ch.purpose, "creator": "", "last_set": 0},
            "previous_names": [],
        }
        if num_members:
            out["num_members"] = len(self.ws.members(ch))
        return out

    def info(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self.ws.resolve_channel(args.get("channel"))
        return {"channel": self.render(ch, num_members=truthy(args.get("include_num_members")))}

    def list(self, args: dict[str, Any]) -> dict[str, Any]:
        types = {t.strip() for t in str(args.get("types") or "public_channel").split(",")}
        unknown = types - {"public_channel", "private_channel", "mpim", "im"}
        if unknown:
            raise SlackError("invalid_types")
        exclude_archived = truthy(args.get("exclude_archived"))
        limit = page_limit(args, 100, 1000)

        def kind(ch: Channel) -> str:
            if ch.is_im:
                return "im"
            if ch.is_mpim:
                return "mpim"
            return "private_channel" if ch.is_private else "public_channel"

        visible = [
            ch
            for ch in self.ws.channels.values()
            if kind(ch) in types
            and (kind(ch) == "public_channel" or ch.is_member)
            and not (exclude_archived and ch.is_archived)
        ]
        start = int(decode_cursor(str(args["cursor"]), "offset")) if args.get("cursor") else 0
        page = visible[start : start + limit]
        more = start + limit < len(visible)
        next_cursor = encode_cursor("offset", str(start + limit)) if more else ""
        return {
            "channels": [self.render(ch) for ch in page],
            "response_metadata": {"next_cursor": next_cursor},
        }

    def members(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self.ws.resolve_channel(args.get("channel"))
        return {"members": self.ws.members(ch), "response_metadata": {"next_cursor": ""}}

    def open(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("channel"):
            ch = self.ws.resolve_channel(args["channel"])
            return {"channel": {"id": ch.id}}
        required(args, "users")
        users = [u.strip() for u in str(args["users"]).split(",") if u.strip()]
        for u in users:
            if u not in self.ws.users:
                raise SlackError("user_not_found")
        if len(users) != 1:
            raise SlackError("not_supported_by_emulator")  # mpim creation is not emulated
        ch = self.ws.im_with(users[0])
        if truthy(args.get("return_im")):
            return {"channel": self.render(ch)}
        return {"channel": {"id": ch.id}}
