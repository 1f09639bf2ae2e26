"""The Web API methods on messages: chat.* and reactions.*."""

from __future__ import annotations

import copy
import re
from typing import Any

from bot.shell.emulator.blockkit import check_message
from bot.shell.emulator.errors import SlackError
from bot.shell.emulator.params import required, truthy
from bot.shell.emulator.web_api import MethodTable
from bot.shell.emulator.workspace import (
    TEAM_DOMAIN,
    Channel,
    Workspace,
    set_or_drop,
    with_block_ids,
)

_REACTION_NAME = re.compile(r"[a-z0-9_+'\-]+(::skin-tone-\d)?")


class MessageMethods:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def table(self) -> MethodTable:
        return {
            "chat.postMessage": (self.post_message, "bot"),
            "chat.postEphemeral": (self.post_ephemeral, "bot"),
            "chat.update": (self.update, "bot"),
            "chat.delete": (self.delete, "bot"),
            "chat.getPermalink": (self.get_permalink, "bot"),
            "reactions.get": (self.reactions_get, "bot"),
            "reactions.add": (self.reactions_add, "bot"),
            "reactions.remove": (self.reactions_remove, "bot"),
        }

    # chat ----------------------------------------------------------------------------------

    def post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        ch = ws.writable(args.get("channel"))
        text, blocks, attachments = check_message(args, require=True)
        thread_ts = args.get("thread_ts")
        msg = ws.new_bot_message(text, blocks, attachments)
        if thread_ts not in (None, ""):
            msg["thread_ts"] = ws.thread_parent(ch.id, str(thread_ts))
            if truthy(args.get("reply_broadcast")):
                msg["subtype"] = "thread_broadcast"
        if isinstance(args.get("metadata"), dict):
            msg["metadata"] = copy.deepcopy(args["metadata"])
        ws.store_message(ch.id, msg)
        return {"channel": ch.id, "ts": msg["ts"], "message": ws.render_message(ch.id, msg)}

    def post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        ch = ws.writable(args.get("channel"))
        required(args, "user")
        user = str(args["user"])
        if user not in ws.users:
            raise SlackError("user_not_found")
        if ch.members is not None and user not in ch.members:
            raise SlackError("user_not_in_channel")
        text, blocks, attachments = check_message(args, require=True)
        thread_ts = args.get("thread_ts")
        if thread_ts not in (None, ""):
            thread_ts = ws.thread_parent(ch.id, str(thread_ts))
        ts = ws.next_ts()
        ws.ephemerals.append(
            {
                "channel": ch.id,
                "user": user,
                "ts": ts,
                "text": text or "",
                "blocks": blocks,
                "attachments": attachments,
                "thread_ts": thread_ts,
                "via": "chat.postEphemeral",
            }
        )
        return {"message_ts": ts}

    def update(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        ch = ws.resolve_channel(args.get("channel"))
        if ch.is_archived:
            raise SlackError("is_archived")
        required(args, "ts")
        msg = ws.find_message(ch.id, str(args["ts"]))
        if msg.get("user") != ws.bot_user_id:
            raise SlackError("cant_update_message")
        text, blocks, attachments = check_message(args, require=True)
        if "text" in args:
            msg["text"] = text or ""
        if "blocks" in args:
            set_or_drop(msg, "blocks", with_block_ids(blocks) if blocks else None)
        if "attachments" in args:
            set_or_drop(msg, "attachments", copy.deepcopy(attachments))
        msg["edited"] = {"user": ws.bot_user_id, "ts": ws.next_ts()}
        rendered = ws.render_message(ch.id, msg)
        return {"channel": ch.id, "ts": msg["ts"], "text": msg["text"], "message": rendered}

    def delete(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self.ws.resolve_channel(args.get("channel"))
        required(args, "ts")
        self.ws.delete(ch.id, str(args["ts"]), bot_only=True)
        return {"channel": ch.id, "ts": str(args["ts"])}

    def get_permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self.ws.resolve_channel(args.get("channel"))
        required(args, "message_ts")
        msg = self.ws.find_message(ch.id, str(args["message_ts"]))
        link = f"https://{TEAM_DOMAIN}.slack.com/archives/{ch.id}/p{msg['ts'].replace('.', '')}"
        parent = msg.get("thread_ts")
        if parent and parent != msg["ts"]:
            link += f"?thread_ts={parent}&cid={ch.id}"
        return {"channel": ch.id, "permalink": link}

    # reactions -----------------------------------------------------------------------------

    def _reaction_target(self, args: dict[str, Any]) -> tuple[Channel, dict[str, Any]]:
        if not args.get("channel") or not args.get("timestamp"):
            raise SlackError("no_item_specified")
        ch = self.ws.readable(args["channel"])
        return ch, self.ws.find_message(ch.id, str(args["timestamp"]))

    def reactions_get(self, args: dict[str, Any]) -> dict[str, Any]:
        ch, msg = self._reaction_target(args)
        return {"type": "message", "channel": ch.id, "message": self.ws.render_message(ch.id, msg)}

    def reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        _, msg = self._reaction_target(args)
        name = str(args.get("name") or "").strip(":")
        if not name or not _REACTION_NAME.fullmatch(name):
            raise SlackError("invalid_name")
        reactions = msg.setdefault("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if entry is None:
            entry = {"name": name, "users": [], "count": 0}
            reactions.append(entry)
        if self.ws.bot_user_id in entry["users"]:
            raise SlackError("already_reacted")
        entry["users"].append(self.ws.bot_user_id)
        entry["count"] += 1
        return {}

    def reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        _, msg = self._reaction_target(args)
        name = str(args.get("name") or "").strip(":")
        reactions = msg.get("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if entry is None or self.ws.bot_user_id not in entry["users"]:
            raise SlackError("no_reaction")
        entry["users"].remove(self.ws.bot_user_id)
        entry["count"] -= 1
        if entry["count"] <= 0:
            reactions.remove(entry)
        if not reactions:
            msg.pop("reactions", None)
        return {}
