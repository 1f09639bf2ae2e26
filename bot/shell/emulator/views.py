"""The Web API methods on views: views.open/push/update/publish, and the trigger_ids that
open and push need."""

from __future__ import annotations

import copy
import secrets
import time
from typing import Any

from bot.shell.emulator.blockkit import validate_view
from bot.shell.emulator.errors import SlackError, invalid_arguments
from bot.shell.emulator.params import required
from bot.shell.emulator.web_api import MethodTable
from bot.shell.emulator.workspace import Workspace, with_block_ids


class Triggers:
    """trigger_ids as Slack hands them out with an interaction: each opens or pushes one view,
    within 3 seconds."""

    TTL = 3.0

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._issued: dict[str, float] = {}
        self._used: set[str] = set()

    def new(self) -> str:
        trigger = f"{self.ws.next_seq()}.{int(time.time())}.{secrets.token_hex(16)}"
        self._issued[trigger] = time.monotonic()
        return trigger

    def take(self, args: dict[str, Any]) -> None:
        trigger = args.get("trigger_id")
        if not trigger or not isinstance(trigger, str):
            raise SlackError("invalid_trigger_id")
        if trigger in self._used:
            raise SlackError("exchanged_trigger_id")
        issued = self._issued.get(trigger)
        # One the emulator never issued but shaped like Slack's passes: tests may make their own.
        if issued is None and not trigger[0].isdigit():
            raise SlackError("invalid_trigger_id")
        if issued is not None and time.monotonic() - issued > self.TTL:
            raise SlackError("expired_trigger_id")
        self._used.add(trigger)


class ViewMethods:
    def __init__(self, ws: Workspace, triggers: Triggers) -> None:
        self.ws = ws
        self.triggers = triggers

    def table(self) -> MethodTable:
        return {
            "views.open": (self.open, "bot"),
            "views.push": (self.push, "bot"),
            "views.update": (self.update, "bot"),
            "views.publish": (self.publish, "bot"),
        }

    def _check(self, args: dict[str, Any], *, kind: str | None = None) -> dict[str, Any]:
        view = args.get("view")
        if view is None:
            raise invalid_arguments("missing required field: view")
        errors = validate_view(view)
        if not errors and kind is not None and view.get("type") != kind:
            errors = [f"must be a valid enum value: {kind} [json-pointer:/view/type]"]
        if errors:
            raise invalid_arguments(*errors)
        external_id = view.get("external_id")
        if external_id:
            for existing in self.ws.views.values():
                if existing["external_id"] == external_id and existing["id"] != args.get("view_id"):
                    raise SlackError("duplicate_external_id")
        return dict(view)

    def _store(
        self, view: dict[str, Any], *, view_id: str | None = None, previous: str | None = None
    ) -> dict[str, Any]:
        ws = self.ws
        vid = view_id or ws.next_id("V")
        old = ws.views.get(vid)
        stored = {
            "id": vid,
            "team_id": ws.team_id,
            "type": view["type"],
            "blocks": with_block_ids(view.get("blocks") or []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "title": view.get("title"),
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": view.get("close"),
            "submit": view.get("submit"),
            "previous_view_id": old["previous_view_id"] if old else previous,
            "root_view_id": old["root_view_id"] if old else vid,
            "app_id": ws.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": ws.team_id,
            "bot_id": ws.bot_id,
        }
        ws.views[vid] = stored
        return copy.deepcopy(stored)

    def open(self, args: dict[str, Any]) -> dict[str, Any]:
        view = self._check(args, kind="modal")
        self.triggers.take(args)
        return {"view": self._store(view)}

    def push(self, args: dict[str, Any]) -> dict[str, Any]:
        view = self._check(args, kind="modal")
        self.triggers.take(args)
        return {"view": self._store(view)}

    def update(self, args: dict[str, Any]) -> dict[str, Any]:
        view_id = args.get("view_id")
        external_id = args.get("external_id")
        if not view_id and not external_id:
            raise invalid_arguments("either view_id or external_id is required")
        current: dict[str, Any] | None
        if view_id:
            current = self.ws.views.get(str(view_id))
        else:
            current = next(
                (v for v in self.ws.views.values() if v["external_id"] == external_id), None
            )
        if current is None:
            raise SlackError("not_found")
        if args.get("hash") and args["hash"] != current["hash"]:
            raise SlackError("hash_conflict")
        view = self._check({**args, "view_id": current["id"]})
        return {"view": self._store(view, view_id=current["id"])}

    def publish(self, args: dict[str, Any]) -> dict[str, Any]:
        required(args, "user_id")
        user_id = str(args["user_id"])
        if user_id not in self.ws.users:
            raise SlackError("user_not_found")
        current = self.ws.home_views.get(user_id)
        view = self._check({**args, "view_id": current["id"] if current else None}, kind="home")
        if current and args.get("hash") and args["hash"] != current["hash"]:
            raise SlackError("hash_conflict")
        stored = self._store(view, view_id=current["id"] if current else None)
        self.ws.home_views[user_id] = stored
        return {"view": stored}
