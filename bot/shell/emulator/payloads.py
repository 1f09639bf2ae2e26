"""What Slack sends the bot when a person acts, built from the emulated workspace: a slash
command, a press of a button or a choice in a select (in a stored message, in another
version of one, in an ephemeral answer, in a view), a form submitted, each with a fresh
trigger_id (and response_url where Slack gives one)."""

from __future__ import annotations

import copy
import secrets
import time
from typing import Any

from bot.shell.emulator.response_urls import ResponseUrls
from bot.shell.emulator.views import Triggers
from bot.shell.emulator.workspace import TEAM_DOMAIN, Workspace


class Payloads:
    def __init__(self, ws: Workspace, urls: ResponseUrls, triggers: Triggers) -> None:
        self.ws = ws
        self.urls = urls
        self.triggers = triggers

    def slash_command(self, command: str, text: str, *, user: str, channel: str) -> dict[str, Any]:
        ws = self.ws
        ch = ws.channels[channel]
        return {
            "token": "verification-token",
            "team_id": ws.team_id,
            "team_domain": TEAM_DOMAIN,
            "channel_id": channel,
            "channel_name": "directmessage" if ch.is_im else ch.name,
            "user_id": user,
            "user_name": ws.users[user]["name"],
            "command": command,
            "text": text,
            "api_app_id": ws.app_id,
            "is_enterprise_install": "false",
            "response_url": self.urls.new(channel=channel),
            "trigger_id": self.triggers.new(),
        }

    def block_actions(
        self,
        channel: str,
        ts: str,
        action_id: str,
        *,
        user: str,
        selected_value: str | None,
        block_id: str | None,
        blocks: list[dict[str, Any]] | None,
    ) -> dict[str, Any]:
        if blocks is None:
            msg = self.ws.message(channel, ts)
        else:  # a version of the message other than the stored one
            msg = {"type": "message", "ts": ts, "text": "", "blocks": blocks}
        where = f"{channel}/{ts}"
        action = _action(msg.get("blocks", []), action_id, block_id, selected_value, where)
        return self._on_message(channel, ts, msg, action, user, ephemeral=False)

    def ephemeral_actions(
        self,
        response_index: int,
        action_id: str,
        *,
        user: str,
        selected_value: str | None,
        block_id: str | None,
    ) -> dict[str, Any]:
        url, body = self.urls.responses[response_index]
        entry = self.urls.find(url)
        if entry is None or not entry.channel:
            raise LookupError(f"response {response_index} has no channel to click in")
        ts = f"{time.time():.6f}"  # ephemeral messages have a ts of their own, never stored
        msg = {"type": "message", "text": body.get("text", ""), "blocks": body.get("blocks", [])}
        where = f"response {response_index}"
        action = _action(msg["blocks"], action_id, block_id, selected_value, where)
        return self._on_message(entry.channel, ts, msg, action, user, ephemeral=True)

    def view_actions(
        self,
        view: dict[str, Any],
        action_id: str,
        *,
        user: str,
        selected_value: str | None,
        block_id: str | None,
    ) -> dict[str, Any]:
        where = f"view {view['id']}"
        action = _action(view.get("blocks") or [], action_id, block_id, selected_value, where)
        return {
            **self._common(user, action),
            "container": {"type": "view", "view_id": view["id"]},
            "view": copy.deepcopy(view),
        }

    def view_submission(
        self, view: dict[str, Any], values: dict[str, Any], *, user: str
    ) -> dict[str, Any]:
        ws = self.ws
        u = ws.users[user]
        return {
            "type": "view_submission",
            "team": {"id": ws.team_id, "domain": TEAM_DOMAIN},
            "user": {"id": user, "username": u["name"], "name": u["name"], "team_id": ws.team_id},
            "api_app_id": ws.app_id,
            "token": "verification-token",
            "trigger_id": self.triggers.new(),
            "view": {**copy.deepcopy(view), "state": {"values": copy.deepcopy(values)}},
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }

    def _common(self, user: str, action: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        u = ws.users[user]
        return {
            "type": "block_actions",
            "user": {"id": user, "username": u["name"], "name": u["name"], "team_id": ws.team_id},
            "api_app_id": ws.app_id,
            "token": "verification-token",
            "trigger_id": self.triggers.new(),
            "team": {"id": ws.team_id, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
            "actions": [action],
        }

    def _on_message(
        self,
        channel: str,
        ts: str,
        msg: dict[str, Any],
        action: dict[str, Any],
        user: str,
        *,
        ephemeral: bool,
    ) -> dict[str, Any]:
        return {
            **self._common(user, action),
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": ephemeral,
            },
            "channel": {"id": channel, "name": self.ws.channels[channel].name},
            "message": msg,
            "state": {"values": {}},
            "response_url": self.urls.new(channel=channel, message_ts=ts, ephemeral=ephemeral),
        }


def _action(
    blocks: list[dict[str, Any]],
    action_id: str,
    block_id: str | None,
    selected_value: str | None,
    where: str,
) -> dict[str, Any]:
    """The `actions` entry of a press of `action_id` (in block `block_id`, when given)."""
    found: tuple[dict[str, Any], dict[str, Any]] | None = None
    for block in blocks:
        if block_id is not None and block.get("block_id") != block_id:
            continue
        candidates = list(block.get("elements", [])) if block.get("type") == "actions" else []
        for key in ("accessory", "element"):
            if isinstance(block.get(key), dict):
                candidates.append(block[key])
        for el in candidates:
            if isinstance(el, dict) and el.get("action_id") == action_id:
                found = (block, el)
    if found is None:
        raise LookupError(f"no element with action_id {action_id!r} in {where}")
    block, el = found
    action: dict[str, Any] = {
        "type": el["type"],
        "action_id": action_id,
        # Slack gives a block without an id a random one; the bot must not rely on it.
        "block_id": block.get("block_id") or secrets.token_hex(3),
        "action_ts": f"{time.time():.6f}",
    }
    options = el.get("options") or [
        o for g in el.get("option_groups") or [] for o in g.get("options", [])
    ]
    if el["type"] == "button":
        action["text"] = el["text"]
        if "value" in el:
            action["value"] = el["value"]
        if "style" in el:
            action["style"] = el["style"]
    elif options:
        chosen = next((o for o in options if o["value"] == selected_value), None)
        if chosen is None:
            if selected_value is not None:
                raise LookupError(f"no option {selected_value!r} in {action_id!r}")
            chosen = options[0]
        if el["type"].startswith("multi_"):
            action["selected_options"] = [chosen]
        else:
            action["selected_option"] = chosen
    return action
