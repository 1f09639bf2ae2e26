"""What people do that Slack reports to the bot as events: reacting, editing and deleting a
message. Each changes the workspace and returns the event payload Slack would deliver, for the
test to send (the emulator delivers no events itself)."""

from __future__ import annotations

import copy
import secrets
import time
from typing import Any

from bot.shell.emulator.workspace import Workspace


class Events:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def payload(self, event: dict[str, Any]) -> dict[str, Any]:
        """An ``events_api`` envelope payload (event_callback) wrapping ``event``."""
        ws = self.ws
        return {
            "token": "verification-token",
            "team_id": ws.team_id,
            "api_app_id": ws.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev0{ws.next_seq():08d}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": ws.team_id,
                    "user_id": ws.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{secrets.token_hex(8)}",
        }

    def react(self, channel: str, ts: str, user: str, name: str, *, remove: bool) -> dict[str, Any]:
        msg = self.ws.find_message(channel, ts)
        reactions = msg.setdefault("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if remove:
            if entry is not None and user in entry["users"]:
                entry["users"].remove(user)
                entry["count"] -= 1
                if entry["count"] <= 0:
                    reactions.remove(entry)
        else:
            if entry is None:
                entry = {"name": name, "users": [], "count": 0}
                reactions.append(entry)
            if user not in entry["users"]:
                entry["users"].append(user)
                entry["count"] += 1
        if not reactions:
            msg.pop("reactions", None)
        event: dict[str, Any] = {
            "type": "reaction_removed" if remove else "reaction_added",
            "user": user,
            "reaction": name,
            "item": {"type": "message", "channel": channel, "ts": ts},
            "event_ts": self.ws.next_ts(),
        }
        if msg.get("user"):
            event["item_user"] = msg["user"]
        return self.payload(event)

    def mention(
        self, channel: str, user: str, text: str, thread: str | None = None
    ) -> dict[str, Any]:
        msg_ts = self.ws.next_ts()
        said = f"<@{self.ws.bot_user_id}> {text}"
        self.ws.add_message(channel, ts=msg_ts, text=said, user=user, thread_ts=thread)
        event: dict[str, Any] = {
            "type": "app_mention",
            "user": user,
            "text": said,
            "ts": msg_ts,
            "channel": channel,
            "event_ts": msg_ts,
        }
        if thread is not None:
            event["thread_ts"] = thread
        return self.payload(event)

    def edit_message(self, channel: str, ts: str, text: str) -> dict[str, Any]:
        msg = self.ws.find_message(channel, ts)
        previous = copy.deepcopy(msg)
        msg["text"] = text
        msg["edited"] = {"user": msg.get("user", ""), "ts": self.ws.next_ts()}
        event = {
            "type": "message",
            "subtype": "message_changed",
            "channel": channel,
            "hidden": True,
            "message": self.ws.render_message(channel, msg),
            "previous_message": previous,
            "event_ts": msg["edited"]["ts"],
            "ts": msg["edited"]["ts"],
        }
        return self.payload(event)

    def delete_message(self, channel: str, ts: str) -> dict[str, Any]:
        msg = self.ws.find_message(channel, ts)
        self.ws.history[channel].remove(msg)
        now = self.ws.next_ts()
        event = {
            "type": "message",
            "subtype": "message_deleted",
            "channel": channel,
            "hidden": True,
            "deleted_ts": ts,
            "previous_message": msg,
            "event_ts": now,
            "ts": now,
        }
        return self.payload(event)
