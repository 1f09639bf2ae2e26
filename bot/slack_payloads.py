"""What Slack always sends, checked before Bolt sees a request.

Bolt and the listeners index into a payload (`body["actions"][0]["action_id"]`,
`body["view"]["callback_id"]`, `event["user"]`): a signed request without those fields, or one
whose body does not parse, used to end in a KeyError, a 500 with a traceback, and Slack's
retries of the same bad body. Here a body is parsed the way Bolt parses it and held to the
fields Slack always sends for its kind; the edge (bot/server.py) answers what fails here itself.
No I/O: plain functions on bytes and dicts.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

BAD_REQUEST = 400
# The Events API counts every non-2xx as a failed delivery: it retries the same bad body and,
# past enough failures, turns the app's events off. A malformed event is acked and logged.
ACKED = 200


@dataclass(frozen=True)
class Refusal:
    """A request the edge answers itself: `status` to send, `reason` for the one log line."""

    status: int
    reason: str
    kind: str  # "event", "interactive", "command", "body"


# Per event type, the fields of `event` a listener reads without a default.
EVENT_NEEDS: dict[str, tuple[str, ...]] = {
    "app_home_opened": ("user",),
}


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _user_id(payload: dict[str, Any]) -> bool:
    user = payload.get("user")
    return isinstance(user, dict) and _text(user.get("id"))


def parse(raw: bytes, content_type: str) -> dict[str, Any] | Refusal:
    """The payload as Bolt would read it (`slack_bolt.request.internals.parse_body`), or why
    it cannot be read."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Refusal(BAD_REQUEST, "body is not UTF-8", "body")
    if not text:
        return Refusal(BAD_REQUEST, "empty body", "body")
    if content_type == "application/json" or text.startswith("{"):
        return _json_object(text, "body is not a JSON object", "event")
    try:
        # Slack's forms are always well formed; strict parsing also refuses bytes that are not
        # UTF-8 behind a percent sign.
        fields = dict(
            urllib.parse.parse_qsl(
                text, keep_blank_values=True, strict_parsing=True, errors="strict"
            )
        )
    except (ValueError, UnicodeDecodeError):
        return Refusal(BAD_REQUEST, "form body does not parse", "body")
    if "payload" in fields:
        return _json_object(fields["payload"], "payload is not a JSON object", "interactive")
    return fields


def _json_object(text: str, reason: str, kind: str) -> dict[str, Any] | Refusal:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than json can read
        return Refusal(BAD_REQUEST, reason, kind)
    return value if isinstance(value, dict) else Refusal(BAD_REQUEST, reason, kind)


def check(payload: dict[str, Any]) -> Refusal | None:
    """None when `payload` has what Slack always sends for its kind; else the refusal."""
    kind = payload.get("type")
    if kind == "event_callback":
        return _check_event(payload)
    if kind == "url_verification":
        return None if _text(payload.get("challenge")) else _bad("event", "no challenge")
    if kind == "block_actions":
        return _check_block_actions(payload)
    if kind in ("view_submission", "view_closed"):
        return _check_view(payload, str(kind))
    if kind is not None:
        # Other payloads (app_rate_limited, shortcuts, ...) go to Bolt, which answers 404 for
        # what nobody listens to.
        return None if isinstance(kind, str) else _bad("body", "type is not a string")
    if "ssl_check" in payload:
        return None  # Slack's check of the endpoint's certificate: Bolt answers it
    if "command" in payload or "user_id" in payload:
        return _check_command(payload)
    return _bad("body", "neither an event, an interaction nor a command")


def _bad(kind: str, reason: str) -> Refusal:
    return Refusal(BAD_REQUEST, reason, kind)


def _check_event(payload: dict[str, Any]) -> Refusal | None:
    event = payload.get("event")
    if not isinstance(event, dict):
        return Refusal(ACKED, "event_callback without event", "event")
    event_type = event.get("type")
    if not _text(event_type):
        return Refusal(ACKED, "event without type", "event")
    for name in EVENT_NEEDS.get(str(event_type), ()):
        if not _text(event.get(name)):
            return Refusal(ACKED, f"{event_type} without {name}", "event")
    return None


def _check_block_actions(payload: dict[str, Any]) -> Refusal | None:
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions:
        return _bad("interactive", "block_actions without actions")
    if not all(isinstance(a, dict) and _text(a.get("action_id")) for a in actions):
        return _bad("interactive", "block_actions with an action without action_id")
    if not _user_id(payload):
        return _bad("interactive", "block_actions without user")
    return None


def _check_view(payload: dict[str, Any], kind: str) -> Refusal | None:
    view = payload.get("view")
    if not isinstance(view, dict) or not _text(view.get("type")):
        return _bad("interactive", f"{kind} without a view type")
    if not isinstance(view.get("callback_id"), str):
        return _bad("interactive", f"{kind} without callback_id")
    if not _user_id(payload):
        return _bad("interactive", f"{kind} without user")
    return None


def _check_command(payload: dict[str, Any]) -> Refusal | None:
    command = payload.get("command")
    if not (_text(command) and str(command).startswith("/")):
        return _bad("command", "slash command without command")
    if not _text(payload.get("user_id")):
        return _bad("command", "slash command without user_id")
    return None
