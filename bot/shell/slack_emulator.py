"""A local, strict emulator of the Slack Web API and Socket Mode, for tests.

What it emulates (on 127.0.0.1, a free port, aiohttp):

* The Web API methods meowbot uses (``auth.test``, ``chat.*``, ``conversations.*``, ``views.*``,
  ``files.getUploadURLExternal`` + upload URL + ``files.completeUploadExternal``, ``reactions.*``,
  ``users.*``, ``usergroups.*``, ``apps.connections.open``), reached by slack_sdk's
  ``AsyncWebClient(token=..., base_url=emu.api_url)``. Arguments are accepted the ways Slack
  accepts them (JSON body with a Bearer token, form-urlencoded, multipart, query string) and the
  answers use Slack's real error codes and shapes (HTTP 200 with ``ok: false``; HTTP 429 with
  ``Retry-After`` for rate limits).
* Block Kit validation of messages and views (types, required fields, Slack's length and count
  limits, unknown properties on the common blocks, unique ids), answering ``invalid_blocks`` /
  ``invalid_arguments`` with json-pointer messages like Slack does.
* An in-memory workspace: channels, users, user groups, message history with threads and
  reactions, views, uploaded files, ephemeral messages.
* What people do that Slack reports as events: ``react`` (a reaction added or removed),
  ``edit_message`` and ``delete_message`` change the stored workspace and return the event
  payload (``reaction_added`` / ``reaction_removed`` with ``item_user``, ``message_changed``,
  ``message_deleted``) for the test to deliver, signed, to the bot.
* ``response_url`` webhooks (bound optionally to a message, so ``replace_original`` and
  ``delete_original`` act on it) and the Socket Mode WebSocket protocol (hello, envelopes, acks,
  disconnect, ping/pong) as spoken by slack_sdk's ``SocketModeClient``.

What it does not emulate: OAuth and scopes (the bot token may do everything a bot may do), the
Events API over HTTP and request signing, real rate limits (use ``fail_next``), Slack rendering
of mrkdwn, event delivery caused by Web API calls (posting a message does not emit a
``message`` event), most of Block Kit's cross-field rules (for example ``initial_option`` must
be one of ``options``) and unknown-property checks on the less common blocks and elements.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import mimetypes
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import WSMsgType, web

__all__ = [
    "Call",
    "SlackEmulator",
    "SocketAck",
    "validate_blocks",
    "validate_view",
]

TEAM_DOMAIN = "meowbot-test"
APP_ID = "A0TEST"

# --------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True)
class Call:
    """One Web API call as the emulator saw it (args decoded, token removed)."""

    method: str
    args: dict[str, Any]
    at: float  # time.monotonic() when the request arrived
    ok: bool
    error: str | None = None
    status: int = 200
    result: dict[str, Any] = field(default_factory=dict)  # the answer's body, as the bot got it


@dataclass(frozen=True)
class SocketAck:
    """One Socket Mode envelope sent by the emulator and the client's ack."""

    envelope: dict[str, Any]
    ack: dict[str, Any]
    sent_at: float  # time.monotonic()
    acked_at: float

    @property
    def latency(self) -> float:
        return self.acked_at - self.sent_at


class SlackError(Exception):
    """A Slack error answer: ``{"ok": false, "error": error, **extra}``."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


def _invalid_arguments(*messages: str) -> SlackError:
    return SlackError(
        "invalid_arguments",
        response_metadata={"messages": [f"[ERROR] {m}" for m in messages]},
    )


# --------------------------------------------------------------------------------------------
# Block Kit validation

_BLOCK_TYPES = frozenset(
    {
        "section",
        "header",
        "context",
        "divider",
        "actions",
        "image",
        "input",
        "rich_text",
        "markdown",
        "file",
        "video",
    }
)
_SELECTS = frozenset(
    {
        "static_select",
        "external_select",
        "users_select",
        "conversations_select",
        "channels_select",
    }
)
_MULTI_SELECTS = frozenset(f"multi_{s}" for s in _SELECTS)
_ACTIONS_ELEMENTS = (
    frozenset(
        {
            "button",
            "checkboxes",
            "datepicker",
            "datetimepicker",
            "overflow",
            "radio_buttons",
            "timepicker",
            "workflow_button",
        }
    )
    | _SELECTS
    | _MULTI_SELECTS
)
_ACCESSORY_ELEMENTS = (
    frozenset(
        {
            "button",
            "checkboxes",
            "datepicker",
            "image",
            "overflow",
            "radio_buttons",
            "timepicker",
            "workflow_button",
        }
    )
    | _SELECTS
    | _MULTI_SELECTS
)
_INPUT_ELEMENTS = (
    frozenset(
        {
            "checkboxes",
            "datepicker",
            "datetimepicker",
            "email_text_input",
            "file_input",
            "number_input",
            "plain_text_input",
            "radio_buttons",
            "rich_text_input",
            "timepicker",
            "url_text_input",
        }
    )
    | _SELECTS
    | _MULTI_SELECTS
)
_BLOCK_PROPS: dict[str, frozenset[str]] = {
    "section": frozenset({"type", "block_id", "text", "fields", "accessory", "expand"}),
    "header": frozenset({"type", "block_id", "text"}),
    "divider": frozenset({"type", "block_id"}),
    "context": frozenset({"type", "block_id", "elements"}),
    "actions": frozenset({"type", "block_id", "elements"}),
    "input": frozenset(
        {"type", "block_id", "label", "element", "dispatch_action", "hint", "optional"}
    ),
    "markdown": frozenset({"type", "block_id", "text"}),
}
_BUTTON_PROPS = frozenset(
    {"type", "text", "action_id", "url", "value", "style", "confirm", "accessibility_label"}
)
_OPTION_PROPS = frozenset({"text", "value", "description", "url"})
_VIEW_PROPS = frozenset(
    {
        "type",
        "title",
        "blocks",
        "close",
        "submit",
        "private_metadata",
        "callback_id",
        "clear_on_close",
        "notify_on_close",
        "external_id",
        "submit_disabled",
    }
)
MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_MESSAGE_TEXT = 40_000
MAX_BLOCKS_TEXT = 12_000


class _Validator:
    """Collects Slack-style error strings: ``"<message> [json-pointer:/blocks/0/text]"``."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.text_chars = 0
        self._block_ids: set[str] = set()

    # helpers -------------------------------------------------------------------------------

    def err(self, ptr: str, message: str) -> None:
        self.errors.append(f"{message} [json-pointer:{ptr}]")

    def props(self, obj: dict[str, Any], allowed: frozenset[str], ptr: str) -> None:
        for key in obj:
            if key not in allowed:
                self.err(ptr, f"invalid additional property: {key}")

    def string(
        self,
        obj: dict[str, Any],
        key: str,
        ptr: str,
        *,
        max_len: int | None = None,
        required: bool = False,
        allow_empty: bool = True,
    ) -> str | None:
        if key not in obj or obj[key] is None:
            if required:
                self.err(ptr, f"missing required field: {key}")
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.err(f"{ptr}/{key}", "must be a string")
            return None
        if not allow_empty and not value:
            self.err(f"{ptr}/{key}", "must be more than 0 characters")
        if max_len is not None and len(value) > max_len:
            self.err(f"{ptr}/{key}", f"must be less than {max_len + 1} characters")
        return str(value)

    def boolean(self, obj: dict[str, Any], key: str, ptr: str) -> None:
        if key in obj and not isinstance(obj[key], bool):
            self.err(f"{ptr}/{key}", "must be a boolean")

    def array(
        self,
        obj: dict[str, Any],
        key: str,
        ptr: str,
        *,
        max_items: int,
        min_items: int = 1,
        required: bool = True,
    ) -> list[Any]:
        if key not in obj or obj[key] is None:
            if required:
                self.err(ptr, f"missing required field: {key}")
            return []
        value = obj[key]
        if not isinstance(value, list):
            self.err(f"{ptr}/{key}", "must provide an array")
            return []
        if len(value) < min_items:
            self.err(f"{ptr}/{key}", f"must provide at least {min_items} items")
        if len(value) > max_items:
            self.err(f"{ptr}/{key}", f"no more than {max_items} items allowed")
        return value

    def text_obj(
        self,
        obj: Any,
        ptr: str,
        *,
        max_len: int | None,
        plain_only: bool = False,
    ) -> None:
        if not isinstance(obj, dict):
            self.err(ptr, "must provide an object")
            return
        kind = obj.get("type")
        if kind not in ("plain_text", "mrkdwn"):
            self.err(f"{ptr}/type", "must be a valid enum value")
            return
        if plain_only and kind != "plain_text":
            self.err(f"{ptr}/type", "must be a valid enum value: plain_text")
        flag = "emoji" if kind == "plain_text" else "verbatim"
        self.props(obj, frozenset({"type", "text", flag}), ptr)
        self.boolean(obj, flag, ptr)
        text = self.string(obj, "text", ptr, max_len=max_len, required=True, allow_empty=False)
        if text:
            self.text_chars += len(text)

    def block_id(self, block: dict[str, Any], ptr: str) -> None:
        if "block_id" not in block:
            return
        value = self.string(block, "block_id", ptr, max_len=255, allow_empty=False)
        if value is None:
            return
        if value in self._block_ids:
            self.err(f"{ptr}/block_id", f"duplicate block_id: {value}")
        self._block_ids.add(value)

    # blocks --------------------------------------------------------------------------------

    def blocks(self, blocks: Any, ptr: str, *, max_items: int) -> None:
        if not isinstance(blocks, list):
            self.err(ptr, "must provide an array")
            return
        if len(blocks) > max_items:
            self.err(ptr, f"no more than {max_items} items allowed")
        for i, block in enumerate(blocks):
            self.block(block, f"{ptr}/{i}")

    def block(self, block: Any, ptr: str) -> None:
        if not isinstance(block, dict):
            self.err(ptr, "must provide an object")
            return
        kind = block.get("type")
        if kind is None:
            self.err(ptr, "missing required field: type")
            return
        if not isinstance(kind, str) or kind not in _BLOCK_TYPES:
            self.err(f"{ptr}/type", f"unsupported block type: {kind}")
            return
        if kind in _BLOCK_PROPS:
            self.props(block, _BLOCK_PROPS[kind], ptr)
        self.block_id(block, ptr)
        getattr(self, f"_block_{kind}")(block, ptr)

    def _block_section(self, b: dict[str, Any], ptr: str) -> None:
        if b.get("text") is None and b.get("fields") is None:
            self.err(ptr, "must provide either text or fields")
        if b.get("text") is not None:
            self.text_obj(b["text"], f"{ptr}/text", max_len=3000)
        fields = self.array(b, "fields", ptr, max_items=10, required=False)
        for i, f in enumerate(fields):
            self.text_obj(f, f"{ptr}/fields/{i}", max_len=2000)
        self.boolean(b, "expand", ptr)
        if b.get("accessory") is not None:
            self.element(b["accessory"], f"{ptr}/accessory", _ACCESSORY_ELEMENTS, set())

    def _block_header(self, b: dict[str, Any], ptr: str) -> None:
        if "text" not in b:
            self.err(ptr, "missing required field: text")
            return
        self.text_obj(b["text"], f"{ptr}/text", max_len=150, plain_only=True)

    def _block_divider(self, b: dict[str, Any], ptr: str) -> None:
        return

    def _block_context(self, b: dict[str, Any], ptr: str) -> None:
        elements = self.array(b, "elements", ptr, max_items=10)
        for i, el in enumerate(elements):
            eptr = f"{ptr}/elements/{i}"
            if isinstance(el, dict) and el.get("type") == "image":
                self._image_like(el, eptr)
            else:
                self.text_obj(el, eptr, max_len=None)

    def _block_actions(self, b: dict[str, Any], ptr: str) -> None:
        elements = self.array(b, "elements", ptr, max_items=25)
        action_ids: set[str] = set()
        for i, el in enumerate(elements):
            self.element(el, f"{ptr}/elements/{i}", _ACTIONS_ELEMENTS, action_ids)

    def _block_image(self, b: dict[str, Any], ptr: str) -> None:
        self._image_like(b, ptr)
        if b.get("title") is not None:
            self.text_obj(b["title"], f"{ptr}/title", max_len=2000, plain_only=True)

    def _image_like(self, obj: dict[str, Any], ptr: str) -> None:
        if obj.get("image_url") is None and obj.get("slack_file") is None:
            self.err(ptr, "missing required field: image_url")
        self.string(obj, "image_url", ptr, max_len=3000, allow_empty=False)
        self.string(obj, "alt_text", ptr, max_len=2000, required=True, allow_empty=False)

    def _block_input(self, b: dict[str, Any], ptr: str) -> None:
        if "label" not in b:
            self.err(ptr, "missing required field: label")
        else:
            self.text_obj(b["label"], f"{ptr}/label", max_len=2000, plain_only=True)
        if "hint" in b:
            self.text_obj(b["hint"], f"{ptr}/hint", max_len=2000, plain_only=True)
        self.boolean(b, "optional", ptr)
        self.boolean(b, "dispatch_action", ptr)
        if "element" not in b:
            self.err(ptr, "missing required field: element")
        else:
            self.element(b["element"], f"{ptr}/element", _INPUT_ELEMENTS, set())

    def _block_rich_text(self, b: dict[str, Any], ptr: str) -> None:
        elements = self.array(b, "elements", ptr, max_items=10_000)
        self.text_chars += _rich_text_chars(elements)

    def _block_markdown(self, b: dict[str, Any], ptr: str) -> None:
        text = self.string(b, "text", ptr, max_len=12_000, required=True, allow_empty=False)
        if text:
            self.text_chars += len(text)

    def _block_file(self, b: dict[str, Any], ptr: str) -> None:
        self.string(b, "external_id", ptr, required=True, allow_empty=False)
        self.string(b, "source", ptr, required=True, allow_empty=False)

    def _block_video(self, b: dict[str, Any], ptr: str) -> None:
        for key in ("alt_text", "thumbnail_url", "video_url"):
            self.string(b, key, ptr, required=True, allow_empty=False)
        if "title" not in b:
            self.err(ptr, "missing required field: title")
        else:
            self.text_obj(b["title"], f"{ptr}/title", max_len=199, plain_only=True)

    # elements ------------------------------------------------------------------------------

    def element(
        self, el: Any, ptr: str, allowed_types: frozenset[str], action_ids: set[str]
    ) -> None:
        if not isinstance(el, dict):
            self.err(ptr, "must provide an object")
            return
        kind = el.get("type")
        if kind is None:
            self.err(ptr, "missing required field: type")
            return
        if not isinstance(kind, str) or kind not in allowed_types:
            self.err(f"{ptr}/type", f"unsupported element type here: {kind}")
            return
        if "action_id" in el:
            action_id = self.string(el, "action_id", ptr, max_len=255, allow_empty=False)
            if action_id is not None:
                if action_id in action_ids:
                    self.err(f"{ptr}/action_id", f"duplicate action_id: {action_id}")
                action_ids.add(action_id)
        if "placeholder" in el:
            self.text_obj(el["placeholder"], f"{ptr}/placeholder", max_len=150, plain_only=True)
        if "confirm" in el:
            self.confirm(el["confirm"], f"{ptr}/confirm")
        if kind == "button":
            self.props(el, _BUTTON_PROPS, ptr)
            if "text" not in el:
                self.err(ptr, "missing required field: text")
            else:
                self.text_obj(el["text"], f"{ptr}/text", max_len=75, plain_only=True)
            self.string(el, "value", ptr, max_len=2000)
            self.string(el, "url", ptr, max_len=3000)
            self.string(el, "accessibility_label", ptr, max_len=75)
            if "style" in el and el["style"] not in ("primary", "danger"):
                self.err(f"{ptr}/style", "must be a valid enum value")
        elif kind in ("static_select", "multi_static_select"):
            if el.get("options") is None and el.get("option_groups") is None:
                self.err(ptr, "must provide either options or option_groups")
            options = self.array(el, "options", ptr, max_items=100, required=False)
            for i, o in enumerate(options):
                self.option(o, f"{ptr}/options/{i}", plain_only=True)
            groups = self.array(el, "option_groups", ptr, max_items=100, required=False)
            for i, g in enumerate(groups):
                gptr = f"{ptr}/option_groups/{i}"
                if not isinstance(g, dict):
                    self.err(gptr, "must provide an object")
                    continue
                if "label" in g:
                    self.text_obj(g["label"], f"{gptr}/label", max_len=75, plain_only=True)
                for j, o in enumerate(self.array(g, "options", gptr, max_items=100)):
                    self.option(o, f"{gptr}/options/{j}", plain_only=True)
        elif kind == "overflow":
            for i, o in enumerate(self.array(el, "options", ptr, max_items=5)):
                self.option(o, f"{ptr}/options/{i}", plain_only=True)
        elif kind in ("checkboxes", "radio_buttons"):
            for i, o in enumerate(self.array(el, "options", ptr, max_items=10)):
                self.option(o, f"{ptr}/options/{i}", plain_only=False)
        elif kind == "image":
            self._image_like(el, ptr)
        elif kind == "plain_text_input":
            for key in ("min_length", "max_length"):
                if key in el and (not isinstance(el[key], int) or not 0 <= el[key] <= 3000):
                    self.err(f"{ptr}/{key}", "must be an integer between 0 and 3000")
            self.string(el, "initial_value", ptr, max_len=3000)

    def option(self, o: Any, ptr: str, *, plain_only: bool) -> None:
        if not isinstance(o, dict):
            self.err(ptr, "must provide an object")
            return
        self.props(o, _OPTION_PROPS, ptr)
        if "text" not in o:
            self.err(ptr, "missing required field: text")
        else:
            self.text_obj(o["text"], f"{ptr}/text", max_len=75, plain_only=plain_only)
        self.string(o, "value", ptr, max_len=150, required=True, allow_empty=False)
        if "description" in o:
            self.text_obj(o["description"], f"{ptr}/description", max_len=75)
        self.string(o, "url", ptr, max_len=3000)

    def confirm(self, c: Any, ptr: str) -> None:
        if not isinstance(c, dict):
            self.err(ptr, "must provide an object")
            return
        self.props(c, frozenset({"title", "text", "confirm", "deny", "style"}), ptr)
        for key, max_len in (("title", 100), ("confirm", 30), ("deny", 30)):
            if key not in c:
                self.err(ptr, f"missing required field: {key}")
            else:
                self.text_obj(c[key], f"{ptr}/{key}", max_len=max_len, plain_only=True)
        if "text" not in c:
            self.err(ptr, "missing required field: text")
        else:
            self.text_obj(c["text"], f"{ptr}/text", max_len=300)

    # views ---------------------------------------------------------------------------------

    def view(self, view: Any, ptr: str = "/view") -> None:
        if not isinstance(view, dict):
            self.err(ptr, "must provide an object")
            return
        self.props(view, _VIEW_PROPS, ptr)
        kind = view.get("type")
        if kind not in ("modal", "home"):
            self.err(f"{ptr}/type", "must be a valid enum value: modal, home")
            return
        if kind == "modal":
            if "title" not in view:
                self.err(ptr, "missing required field: title")
            else:
                self.text_obj(view["title"], f"{ptr}/title", max_len=24, plain_only=True)
        elif "title" in view:
            self.text_obj(view["title"], f"{ptr}/title", max_len=24, plain_only=True)
        for key in ("submit", "close"):
            if view.get(key) is not None:
                self.text_obj(view[key], f"{ptr}/{key}", max_len=24, plain_only=True)
        if "blocks" not in view:
            self.err(ptr, "missing required field: blocks")
        else:
            self.blocks(view["blocks"], f"{ptr}/blocks", max_items=MAX_VIEW_BLOCKS)
            has_input = isinstance(view["blocks"], list) and any(
                isinstance(b, dict) and b.get("type") == "input" for b in view["blocks"]
            )
            if kind == "modal" and has_input and view.get("submit") is None:
                self.err(ptr, "submit is required when an input block is within the blocks array")
        self.string(view, "private_metadata", ptr, max_len=3000)
        self.string(view, "callback_id", ptr, max_len=255)
        self.string(view, "external_id", ptr, max_len=255)
        for key in ("clear_on_close", "notify_on_close", "submit_disabled"):
            self.boolean(view, key, ptr)


def _rich_text_chars(node: Any) -> int:
    if isinstance(node, list):
        return sum(_rich_text_chars(n) for n in node)
    if isinstance(node, dict):
        own = len(node["text"]) if isinstance(node.get("text"), str) else 0
        return own + _rich_text_chars(node.get("elements"))
    return 0


def validate_blocks(blocks: Any, *, max_items: int = MAX_MESSAGE_BLOCKS) -> list[str]:
    """Slack-style error strings for a message's blocks ([] when valid)."""
    v = _Validator()
    v.blocks(blocks, "/blocks", max_items=max_items)
    return v.errors


def validate_view(view: Any) -> list[str]:
    """Slack-style error strings for a view payload ([] when valid)."""
    v = _Validator()
    v.view(view)
    return v.errors


# --------------------------------------------------------------------------------------------
# small helpers

_TS_RE = re.compile(r"^\d{9,11}\.\d{6}$")
_JSON_ARGS = ("blocks", "attachments", "files", "view", "metadata", "user_auth_blocks")
_JSON_ARG_ERRORS = {
    "blocks": "invalid_blocks_format",
    "user_auth_blocks": "invalid_blocks_format",
    "attachments": "invalid_attachments",
}


def _ts_us(ts: str) -> int:
    secs, _, frac = ts.partition(".")
    return int(secs) * 1_000_000 + int((frac + "000000")[:6])


def _bound_us(value: Any, what: str) -> int:
    try:
        return int(Decimal(str(value)) * 1_000_000)
    except (InvalidOperation, ValueError):
        raise _invalid_arguments(f"invalid {what}: {value!r}") from None


def _fmt_ts(us: int) -> str:
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _time_window(args: dict[str, Any]) -> Callable[[int], bool]:
    """`oldest`, `latest` and `inclusive` of conversations.history/replies, as a test on a ts."""
    inclusive = _truthy(args.get("inclusive"))
    oldest = _bound_us(args.get("oldest") or 0, "oldest")
    latest_raw = args.get("latest")
    latest = _bound_us(latest_raw, "latest") if latest_raw else None

    def inside(us: int) -> bool:
        if (us < oldest) if inclusive else (us <= oldest):
            return False
        return latest is None or ((us <= latest) if inclusive else (us < latest))

    return inside


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _encode_cursor(kind: str, value: str) -> str:
    return base64.b64encode(f"{kind}:{value}".encode()).decode()


def _decode_cursor(cursor: str, kind: str) -> str:
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        raise SlackError("invalid_cursor") from None
    prefix, sep, value = decoded.partition(":")
    if not sep or prefix != kind:
        raise SlackError("invalid_cursor")
    return value


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


# --------------------------------------------------------------------------------------------
# the emulator


@dataclass
class _Failure:
    status: int
    retry_after: int
    error: str
    count: int


@dataclass
class _ResponseUrl:
    url: str
    channel: str | None
    message_ts: str | None
    uses: int = 0
    # Bound to a message only its one person sees: replace_original replaces it there.
    ephemeral: bool = False


@dataclass
class _Channel:
    id: str
    name: str
    is_private: bool
    is_im: bool
    is_mpim: bool
    is_archived: bool
    is_member: bool
    user: str | None
    members: set[str] | None
    topic: str
    purpose: str
    created: int = field(default_factory=lambda: int(time.time()) - 86_400)


Handler = Callable[[dict[str, Any]], dict[str, Any]]


class SlackEmulator:
    """See the module docstring. Use ``await emu.start()`` / ``await emu.stop()``."""

    RESPONSE_URL_MAX_USES = 5
    TRIGGER_ID_TTL = 3.0

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-test-token",
        app_token: str = "xapp-test-token",
        team_id: str = "T0TEST",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        app_id: str = APP_ID,
        ts_start: float | None = None,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id

        self.calls: list[Call] = []
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self.responses_at: list[float] = []  # time.monotonic() of each, to order with calls
        # Where each accepted response_url post went: {"channel", "ts"} of the message it made
        # or replaced ("ephemeral": True when only its user sees it); {} when it went nowhere.
        self.responses_to: list[dict[str, Any]] = []
        self.rejected_responses: list[tuple[str, Any, str]] = []
        self.uploads: dict[str, bytes] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.views: dict[str, dict[str, Any]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        self.socket_envelopes: list[dict[str, Any]] = []
        self.socket_acks: list[SocketAck] = []
        self.socket_unmatched: list[Any] = []
        self.socket_connected = asyncio.Event()
        self.socket_connections = 0  # total WebSocket connections accepted so far

        self._channels: dict[str, _Channel] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._usergroups: dict[str, dict[str, Any]] = {}
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._pending_files: dict[str, dict[str, Any]] = {}
        self._triggers: dict[str, float] = {}
        self._used_triggers: set[str] = set()
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._pending_acks: dict[
            str, tuple[web.WebSocketResponse, asyncio.Future[dict[str, Any]]]
        ] = {}
        self._seq = 0
        self._deterministic_ts = ts_start is not None
        self._last_ts_us = int((ts_start or 0) * 1_000_000) - 100 if ts_start else 0
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

        self._methods: dict[str, tuple[Handler, str]] = {
            "api.test": (self._api_test, "none"),
            "auth.test": (self._auth_test, "bot"),
            "chat.postMessage": (self._chat_post_message, "bot"),
            "chat.postEphemeral": (self._chat_post_ephemeral, "bot"),
            "chat.update": (self._chat_update, "bot"),
            "chat.delete": (self._chat_delete, "bot"),
            "chat.getPermalink": (self._chat_get_permalink, "bot"),
            "conversations.history": (self._conversations_history, "bot"),
            "conversations.replies": (self._conversations_replies, "bot"),
            "conversations.info": (self._conversations_info, "bot"),
            "conversations.list": (self._conversations_list, "bot"),
            "conversations.members": (self._conversations_members, "bot"),
            "conversations.open": (self._conversations_open, "bot"),
            "views.open": (self._views_open, "bot"),
            "views.push": (self._views_push, "bot"),
            "views.update": (self._views_update, "bot"),
            "views.publish": (self._views_publish, "bot"),
            "files.getUploadURLExternal": (self._files_get_upload_url, "bot"),
            "files.completeUploadExternal": (self._files_complete_upload, "bot"),
            "files.info": (self._files_info, "bot"),
            "reactions.get": (self._reactions_get, "bot"),
            "reactions.add": (self._reactions_add, "bot"),
            "reactions.remove": (self._reactions_remove, "bot"),
            "users.info": (self._users_info, "bot"),
            "users.list": (self._users_list, "bot"),
            "users.lookupByEmail": (self._users_lookup_by_email, "bot"),
            "usergroups.list": (self._usergroups_list, "bot"),
            "usergroups.users.list": (self._usergroups_users_list, "bot"),
            "apps.connections.open": (self._apps_connections_open, "app"),
        }

        self.add_user(bot_user_id, "meowbot", is_bot=True, real_name="meowbot")
        self.add_user("U0ADMIN", "ana", email="ana@example.org", real_name="Ana", is_admin=True)
        self.add_user("U0USER", "bob", email="bob@example.org", real_name="Bob")
        self.add_channel("C0GENERAL", "general")

    # lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("emulator already started")
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/upload/v1/{file_id}", self._handle_upload)
        app.router.add_post("/commands/{team}/{n}/{key}", self._handle_response_url)
        app.router.add_get("/link/", self._handle_socket)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close(code=1001, message=b"emulator stopping")
        for _, fut in self._pending_acks.values():
            if not fut.done():
                fut.set_exception(ConnectionError("emulator stopped"))
        self._pending_acks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SlackEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("emulator not started: await emu.start() first")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

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
        self._channels[id] = _Channel(
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
        self._messages.setdefault(id, [])

    def archive_channel(self, id: str) -> None:
        self._channels[id].is_archived = True

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
        self._users[id] = {
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
        self._usergroups[id] = {"id": id, "handle": handle, "users": list(users)}

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
        if channel not in self._channels:
            raise KeyError(f"unknown channel {channel!r}: add_channel() it first")
        if not _TS_RE.match(ts):
            raise ValueError(f"ts must look like '1733150000.000100', got {ts!r}")
        if any(m["ts"] == ts for m in self._messages[channel]):
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
        self._store_message(channel, msg)
        self._last_ts_us = max(self._last_ts_us, _ts_us(ts))

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """All stored messages of a channel (top level and replies), oldest first, as copies."""
        if channel not in self._channels:
            raise KeyError(f"unknown channel {channel!r}")
        return [self._render_message(channel, m) for m in self._messages[channel]]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        return self._render_message(channel, self._find_message(channel, ts))

    # failure injection ---------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        error: str = "ratelimited",
        count: int = 1,
    ) -> None:
        """Make the next ``count`` calls to ``method`` fail (checked before auth)."""
        self._failures.setdefault(method, []).append(_Failure(status, retry_after, error, count))

    # calls ---------------------------------------------------------------------------------

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def clear_calls(self) -> None:
        self.calls.clear()

    async def wait_for_call(
        self, method: str, *, count: int = 1, timeout: float = 5.0, ok: bool | None = None
    ) -> Call:
        """Wait until ``count`` calls to ``method`` (optionally only ok/failed) were seen."""
        deadline = time.monotonic() + timeout
        while True:
            seen = [c for c in self.calls_to(method) if ok is None or c.ok is ok]
            if len(seen) >= count:
                return seen[count - 1]
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"saw {len(seen)} call(s) to {method}, wanted {count} within {timeout}s; "
                    f"calls so far: {[c.method for c in self.calls]}"
                )
            await asyncio.sleep(0.01)

    async def wait_for_responses(self, count: int = 1, *, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.responses) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"saw {len(self.responses)} response_url post(s), wanted {count}; "
                    f"rejected: {self.rejected_responses}"
                )
            await asyncio.sleep(0.01)

    # ids, triggers, response urls ----------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        self._seq += 1
        return f"{prefix}0{self._seq:08d}"

    def new_trigger_id(self) -> str:
        """A trigger_id like Slack's; valid for one views.open/push within 3 seconds."""
        self._seq += 1
        trigger = f"{self._seq}.{int(time.time())}.{secrets.token_hex(16)}"
        self._triggers[trigger] = time.monotonic()
        return trigger

    def new_response_url(
        self, *, channel: str | None = None, message_ts: str | None = None, ephemeral: bool = False
    ) -> str:
        """A response_url on the emulator. Bound to a channel (and message, an `ephemeral` one
        too), posts act on it."""
        self._seq += 1
        key = secrets.token_hex(12)
        url = f"{self.base_url}/commands/{self.team_id}/{self._seq}/{key}"
        self._response_urls[key] = _ResponseUrl(
            url=url, channel=channel, message_ts=message_ts, ephemeral=ephemeral
        )
        return url

    # payload builders for Socket Mode tests ------------------------------------------------

    def slash_command_payload(
        self, command: str, text: str = "", *, user: str = "U0ADMIN", channel: str = "C0GENERAL"
    ) -> dict[str, Any]:
        """The payload of a ``slash_commands`` envelope, with a fresh response_url/trigger_id."""
        ch = self._channels[channel]
        return {
            "token": "verification-token",
            "team_id": self.team_id,
            "team_domain": TEAM_DOMAIN,
            "channel_id": channel,
            "channel_name": "directmessage" if ch.is_im else ch.name,
            "user_id": user,
            "user_name": self._users[user]["name"],
            "command": command,
            "text": text,
            "api_app_id": self.app_id,
            "is_enterprise_install": "false",
            "response_url": self.new_response_url(channel=channel),
            "trigger_id": self.new_trigger_id(),
        }

    def block_actions_payload(
        self,
        channel: str,
        ts: str,
        action_id: str,
        *,
        user: str = "U0ADMIN",
        selected_value: str | None = None,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for clicking ``action_id`` in a stored message.

        Raises LookupError when the message has no element with that action_id.
        """
        msg = self._render_message(channel, self._find_message(channel, ts))
        action = self._action(msg.get("blocks", []), action_id, selected_value, f"{channel}/{ts}")
        return self._actions_payload(channel, ts, msg, action, user, ephemeral=False)

    def ephemeral_actions_payload(
        self, response_index: int, action_id: str, *, user: str = "U0ADMIN"
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for clicking ``action_id`` in an ephemeral message the
        bot sent through a response_url (``self.responses[response_index]``)."""
        url, body = self.responses[response_index]
        entry = next((e for e in self._response_urls.values() if e.url == url), None)
        if entry is None or not entry.channel:
            raise LookupError(f"response {response_index} has no channel to click in")
        channel = entry.channel
        ts = f"{time.time():.6f}"  # ephemeral messages have a ts of their own, never stored
        msg = {"type": "message", "text": body.get("text", ""), "blocks": body.get("blocks", [])}
        action = self._action(msg["blocks"], action_id, None, f"response {response_index}")
        return self._actions_payload(channel, ts, msg, action, user, ephemeral=True)

    def _action(
        self, blocks: list[dict[str, Any]], action_id: str, selected_value: str | None, where: str
    ) -> dict[str, Any]:
        found: tuple[dict[str, Any], dict[str, Any]] | None = None
        for block in blocks:
            candidates = list(block.get("elements", [])) if block["type"] == "actions" else []
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
        if el["type"] == "button":
            action["text"] = el["text"]
            if "value" in el:
                action["value"] = el["value"]
            if "style" in el:
                action["style"] = el["style"]
        elif "options" in el:
            options = el["options"]
            chosen = next((o for o in options if o["value"] == selected_value), None)
            if chosen is None:
                if selected_value is not None:
                    raise LookupError(f"no option {selected_value!r} in {action_id!r}")
                chosen = options[0]
            action["selected_option"] = chosen
        return action

    def _actions_payload(
        self,
        channel: str,
        ts: str,
        msg: dict[str, Any],
        action: dict[str, Any],
        user: str,
        *,
        ephemeral: bool,
    ) -> dict[str, Any]:
        u = self._users[user]
        ch = self._channels[channel]
        return {
            "type": "block_actions",
            "user": {"id": user, "username": u["name"], "name": u["name"], "team_id": self.team_id},
            "api_app_id": self.app_id,
            "token": "verification-token",
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": self.new_trigger_id(),
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": ch.name},
            "message": msg,
            "state": {"values": {}},
            "response_url": self.new_response_url(
                channel=channel, message_ts=ts, ephemeral=ephemeral
            ),
            "actions": [action],
        }

    def event_payload(self, event: dict[str, Any]) -> dict[str, Any]:
        """An ``events_api`` envelope payload (event_callback) wrapping ``event``."""
        self._seq += 1
        return {
            "token": "verification-token",
            "team_id": self.team_id,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev0{self._seq:08d}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{secrets.token_hex(8)}",
        }

    # user actions that Slack reports as events -------------------------------------------

    def react(
        self, channel: str, ts: str, user: str, name: str, *, remove: bool = False
    ) -> dict[str, Any]:
        """``user`` adds (or removes) reaction ``name`` on a stored message, as in Slack's
        client; returns the ``reaction_added`` / ``reaction_removed`` event payload Slack would
        deliver for it (the emulator does not deliver events itself)."""
        msg = self._find_message(channel, ts)
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
            "event_ts": self._next_ts(),
        }
        if msg.get("user"):
            event["item_user"] = msg["user"]
        return self.event_payload(event)

    def edit_message(self, channel: str, ts: str, text: str) -> dict[str, Any]:
        """A person edits a stored message; returns the ``message_changed`` event payload."""
        msg = self._find_message(channel, ts)
        previous = copy.deepcopy(msg)
        msg["text"] = text
        msg["edited"] = {"user": msg.get("user", ""), "ts": self._next_ts()}
        event = {
            "type": "message",
            "subtype": "message_changed",
            "channel": channel,
            "hidden": True,
            "message": self._render_message(channel, msg),
            "previous_message": previous,
            "event_ts": msg["edited"]["ts"],
            "ts": msg["edited"]["ts"],
        }
        return self.event_payload(event)

    def delete_message(self, channel: str, ts: str) -> dict[str, Any]:
        """A person deletes a stored message; returns the ``message_deleted`` event payload."""
        msg = self._find_message(channel, ts)
        self._messages[channel].remove(msg)
        now = self._next_ts()
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
        return self.event_payload(event)

    # Socket Mode ---------------------------------------------------------------------------

    async def socket_send(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool = True,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = 5.0,
    ) -> dict[str, Any]:
        """Send an envelope to the newest Socket Mode connection and return the client's ack."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await asyncio.wait_for(self.socket_connected.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no Socket Mode client connected within {timeout}s") from None
        ws = self._sockets[-1]
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": type,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending_acks[envelope_id] = (ws, fut)
        sent_at = time.monotonic()
        try:
            await ws.send_json(envelope)
            self.socket_envelopes.append(envelope)
            ack = await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise TimeoutError(
                f"no ack for {type} envelope {envelope_id} within {timeout}s"
            ) from None
        finally:
            self._pending_acks.pop(envelope_id, None)
        self.socket_acks.append(SocketAck(envelope, ack, sent_at, time.monotonic()))
        return ack

    async def socket_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask connected clients to reconnect, like Slack does before rotating a connection."""
        message = {
            "type": "disconnect",
            "reason": reason,
            "debug_info": {"host": "emulator"},
        }
        for ws in list(self._sockets):
            await ws.send_json(message)

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid_ticket")
        ws = web.WebSocketResponse(autoping=True, timeout=1.0)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.socket_connections += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {
                    "host": "applink-emulator",
                    "build_number": 1,
                    "approximate_connection_time": 3600,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        self.socket_connected.set()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_socket_text(msg.data)
                elif msg.type == WSMsgType.ERROR:
                    break
        finally:
            self._sockets.remove(ws)
            if not self._sockets:
                self.socket_connected.clear()
            for ack_ws, fut in list(self._pending_acks.values()):
                if ack_ws is ws and not fut.done():
                    fut.set_exception(ConnectionError("Socket Mode connection closed before ack"))
        return ws

    def _on_socket_text(self, data: str) -> None:
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            self.socket_unmatched.append(data)
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        pending = self._pending_acks.get(envelope_id) if isinstance(envelope_id, str) else None
        if pending is None or pending[1].done():
            self.socket_unmatched.append(message)
            return
        pending[1].set_result(message)

    # HTTP: Web API -------------------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.Response:
        at = time.monotonic()
        method = request.match_info["method"]
        args, form_token, parse_error = await self._parse_args(request)

        def answer(body: dict[str, Any], status: int = 200, **headers: str) -> web.Response:
            self.calls.append(
                Call(
                    method,
                    copy.deepcopy(args),
                    at,
                    bool(body.get("ok")),
                    body.get("error"),
                    status,
                    copy.deepcopy(body),
                )
            )
            return web.json_response(body, status=status, headers=headers or None)

        failures = self._failures.get(method)
        if failures:
            failure = failures[0]
            failure.count -= 1
            if failure.count <= 0:
                failures.pop(0)
            if failure.status == 429:
                return answer(
                    {"ok": False, "error": "ratelimited"},
                    429,
                    **{"Retry-After": str(failure.retry_after)},
                )
            error = failure.error
            if failure.status != 200 and error == "ratelimited":
                error = "fatal_error"
            return answer({"ok": False, "error": error}, failure.status)

        entry = self._methods.get(method)
        if entry is None:
            return answer({"ok": False, "error": "unknown_method"})
        handler, token_kind = entry

        if token_kind != "none":
            token = _bearer(request) or form_token
            if not token:
                return answer({"ok": False, "error": "not_authed"})
            if token not in (self.bot_token, self.app_token):
                return answer({"ok": False, "error": "invalid_auth"})
            wanted = self.app_token if token_kind == "app" else self.bot_token
            if token != wanted:
                return answer({"ok": False, "error": "not_allowed_token_type"})
        if parse_error is not None:
            return answer({"ok": False, **parse_error})
        try:
            result = handler(args)
        except SlackError as exc:
            return answer({"ok": False, "error": exc.error, **exc.extra})
        return answer({"ok": True, **result})

    async def _parse_args(
        self, request: web.Request
    ) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
        """(args, token from the form body, parse error) for a Web API request."""
        args: dict[str, Any] = dict(request.query)
        form_token: str | None = None
        error: dict[str, Any] | None = None
        if request.can_read_body:
            ctype = request.content_type
            if ctype == "application/json":
                try:
                    body = json.loads(await request.text() or "{}")
                except json.JSONDecodeError:
                    return args, None, {"error": "invalid_json"}
                if not isinstance(body, dict):
                    return args, None, {"error": "invalid_json"}
                # Slack ignores a token inside a JSON body: it must be a Bearer header.
                body.pop("token", None)
                args.update(body)
            elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
                for key, value in form.items():
                    if isinstance(value, web.FileField):
                        args[key] = {
                            "filename": value.filename,
                            "content_type": value.content_type,
                            "content": value.file.read(),
                        }
                    else:
                        args[key] = value
                token = args.pop("token", None)
                form_token = token if isinstance(token, str) else None
            else:
                await request.read()
        args.pop("token", None)  # a token in the query string is not accepted (and not recorded)
        for key in _JSON_ARGS:
            raw = args.get(key)
            if isinstance(raw, str):
                if raw == "":
                    args[key] = None
                    continue
                try:
                    args[key] = json.loads(raw)
                except json.JSONDecodeError:
                    error = error or {"error": _JSON_ARG_ERRORS.get(key, "invalid_arguments")}
        return args, form_token, error

    # HTTP: uploads and response urls -------------------------------------------------------

    async def _handle_upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        pending = self._pending_files.get(file_id)
        if pending is None or pending["completed"]:
            return web.Response(status=404, text="file_not_found", content_type="text/plain")
        data: bytes | None = None
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                if part is not None and getattr(part, "name", None) is not None:
                    chunk = await part.read(decode=True)  # type: ignore[union-attr]
                    if data is None or getattr(part, "filename", None):
                        data = bytes(chunk)
                    if getattr(part, "filename", None):
                        break
        else:
            data = await request.read()
        self.uploads[file_id] = data or b""
        pending["uploaded"] = True
        return web.Response(text=f"OK - {len(self.uploads[file_id])}", content_type="text/plain")

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        entry = self._response_urls.get(request.match_info["key"])
        if entry is None:
            return web.Response(status=404, text="no_service", content_type="text/plain")
        raw = await request.text()

        def reject(status: int, error: str, body: Any) -> web.Response:
            self.rejected_responses.append((entry.url, body, error))
            return web.Response(status=status, text=error, content_type="text/plain")

        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return reject(400, "invalid_payload", raw)
        if not isinstance(body, dict):
            return reject(400, "invalid_payload", body)
        entry.uses += 1
        if entry.uses > self.RESPONSE_URL_MAX_USES:
            return reject(404, "used_url", body)
        try:
            went = self._apply_response(entry, body)
        except SlackError as exc:
            return reject(400 if exc.error != "channel_not_found" else 404, exc.error, body)
        self.responses.append((entry.url, body))
        self.responses_at.append(time.monotonic())
        self.responses_to.append(went)
        return web.Response(text="ok", content_type="text/plain")

    def _apply_response(self, entry: _ResponseUrl, body: dict[str, Any]) -> dict[str, Any]:
        if _truthy(body.get("delete_original")):
            if entry.channel and entry.message_ts:
                self._delete(entry.channel, entry.message_ts, bot_only=False)
                return {"channel": entry.channel, "ts": entry.message_ts}
            return {}
        text, blocks, attachments = self._check_content(body, require=True)
        if entry.channel is None:
            return {}
        replace = _truthy(body.get("replace_original"))
        if replace and entry.ephemeral and entry.message_ts:
            # Slack redraws the person's ephemeral message in place; it is never stored.
            self.ephemerals.append(
                {
                    "channel": entry.channel,
                    "user": None,
                    "ts": entry.message_ts,
                    "text": text or "",
                    "blocks": blocks,
                    "attachments": attachments,
                    "via": "response_url",
                    "replaces": entry.message_ts,
                }
            )
            return {"channel": entry.channel, "ts": entry.message_ts, "ephemeral": True}
        if replace and entry.message_ts:
            msg = self._find_message(entry.channel, entry.message_ts)
            msg["text"] = text or ""
            self._set_or_drop(msg, "blocks", _with_block_ids(blocks) if blocks else None)
            self._set_or_drop(msg, "attachments", attachments)
            return {"channel": entry.channel, "ts": entry.message_ts}
        if body.get("response_type") == "in_channel":
            thread_ts = body.get("thread_ts")
            msg = self._new_bot_message(text, blocks, attachments)
            if thread_ts:
                msg["thread_ts"] = self._thread_parent(entry.channel, str(thread_ts))
            self._store_message(entry.channel, msg)
            return {"channel": entry.channel, "ts": msg["ts"]}
        ts = self._next_ts()
        self.ephemerals.append(
            {
                "channel": entry.channel,
                "user": None,
                "ts": ts,
                "text": text or "",
                "blocks": blocks,
                "attachments": attachments,
                "via": "response_url",
            }
        )
        return {"channel": entry.channel, "ts": ts, "ephemeral": True}

    # shared message logic ------------------------------------------------------------------

    def _next_ts(self) -> str:
        if self._deterministic_ts:
            self._last_ts_us += 100
        else:
            now_us = int(time.time() * 1_000_000) // 100 * 100
            self._last_ts_us = max(now_us, self._last_ts_us + 100)
        return _fmt_ts(self._last_ts_us)

    def _store_message(self, channel: str, msg: dict[str, Any]) -> None:
        messages = self._messages.setdefault(channel, [])
        messages.append(msg)
        messages.sort(key=lambda m: _ts_us(m["ts"]))

    def _find_message(self, channel: str, ts: str) -> dict[str, Any]:
        for msg in self._messages.get(channel, []):
            if msg["ts"] == ts:
                return msg
        raise SlackError("message_not_found")

    def _render_message(self, channel: str, msg: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(msg)
        replies = [
            m
            for m in self._messages.get(channel, [])
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

    @staticmethod
    def _set_or_drop(msg: dict[str, Any], key: str, value: Any) -> None:
        if value:
            msg[key] = value
        else:
            msg.pop(key, None)

    def _check_content(
        self, args: dict[str, Any], *, require: bool
    ) -> tuple[str | None, list[Any] | None, list[Any] | None]:
        """Validate text/blocks/attachments like chat.postMessage does."""
        text = args.get("text")
        if text is not None and not isinstance(text, str):
            text = str(text)
        blocks = args.get("blocks")
        attachments = args.get("attachments")
        if require and not text and not blocks and not attachments:
            raise SlackError("no_text")
        if text and len(text) > MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        v = _Validator()
        if blocks is not None:
            v.blocks(blocks, "/blocks", max_items=MAX_MESSAGE_BLOCKS)
        if attachments is not None:
            if not isinstance(attachments, list) or not all(
                isinstance(a, dict) for a in attachments
            ):
                raise SlackError("invalid_attachments")
            if len(attachments) > 100:
                raise SlackError("too_many_attachments")
            for i, att in enumerate(attachments):
                if "blocks" in att:
                    v.blocks(att["blocks"], f"/attachments/{i}/blocks", max_items=50)
        if v.errors:
            raise SlackError(
                "invalid_blocks",
                errors=v.errors,
                response_metadata={"messages": [f"[ERROR] {e}" for e in v.errors]},
            )
        if v.text_chars > MAX_BLOCKS_TEXT:
            raise SlackError("msg_blocks_too_long")
        return text, blocks or None, attachments or None

    def _new_bot_message(
        self, text: str | None, blocks: list[Any] | None, attachments: list[Any] | None
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "text": text or "",
            "ts": self._next_ts(),
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
            msg["blocks"] = _with_block_ids(blocks)
        if attachments:
            msg["attachments"] = copy.deepcopy(attachments)
        return msg

    def _resolve_channel(self, value: Any, *, allow_names: bool = False) -> _Channel:
        if not value or not isinstance(value, str):
            raise SlackError("channel_not_found")
        ch = self._channels.get(value)
        if ch is None and allow_names:
            name = value.removeprefix("#")
            ch = next((c for c in self._channels.values() if c.name == name), None)
            if ch is None and value in self._users:
                ch = self._im_with(value)
        if ch is None or (ch.is_private and not ch.is_member):
            raise SlackError("channel_not_found")
        return ch

    def _readable(self, value: Any) -> _Channel:
        ch = self._resolve_channel(value)
        if not ch.is_member:
            raise SlackError("not_in_channel")
        return ch

    def _writable(self, value: Any) -> _Channel:
        ch = self._resolve_channel(value, allow_names=True)
        if ch.is_archived:
            raise SlackError("is_archived")
        if not ch.is_member:
            raise SlackError("not_in_channel")
        return ch

    def _im_with(self, user: str) -> _Channel:
        for ch in self._channels.values():
            if ch.is_im and ch.user == user:
                return ch
        cid = "D" + user[1:]
        self.add_channel(cid, cid, is_im=True, user=user, members=[user, self.bot_user_id])
        return self._channels[cid]

    def _thread_parent(self, channel: str, thread_ts: str) -> str:
        if not _TS_RE.match(thread_ts):
            raise SlackError(
                "invalid_thread_ts",
                response_metadata={"messages": [f"[ERROR] {thread_ts} is not a valid thread_ts"]},
            )
        try:
            parent = self._find_message(channel, thread_ts)
        except SlackError:
            raise SlackError("thread_not_found") from None
        return str(parent.get("thread_ts") or parent["ts"])

    def _delete(self, channel: str, ts: str, *, bot_only: bool) -> None:
        msg = self._find_message(channel, ts)
        if bot_only and msg.get("user") != self.bot_user_id:
            raise SlackError("cant_delete_message")
        self._messages[channel].remove(msg)

    def _required(self, args: dict[str, Any], *keys: str) -> None:
        missing = [k for k in keys if args.get(k) in (None, "")]
        if missing:
            raise _invalid_arguments(*(f"missing required field: {k}" for k in missing))

    @staticmethod
    def _limit(args: dict[str, Any], default: int, maximum: int) -> int:
        raw = args.get("limit")
        if raw in (None, "", 0, "0"):
            return default
        try:
            limit = int(raw)
        except (TypeError, ValueError):
            raise SlackError("invalid_limit") from None
        if limit < 1:
            raise SlackError("invalid_limit")
        return min(limit, maximum)

    # Web API methods -----------------------------------------------------------------------

    def _api_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"args": args} if args else {}

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": TEAM_DOMAIN,
            "user": "meowbot",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._writable(args.get("channel"))
        text, blocks, attachments = self._check_content(args, require=True)
        thread_ts = args.get("thread_ts")
        msg = self._new_bot_message(text, blocks, attachments)
        if thread_ts not in (None, ""):
            msg["thread_ts"] = self._thread_parent(ch.id, str(thread_ts))
            if _truthy(args.get("reply_broadcast")):
                msg["subtype"] = "thread_broadcast"
        if isinstance(args.get("metadata"), dict):
            msg["metadata"] = copy.deepcopy(args["metadata"])
        self._store_message(ch.id, msg)
        return {"channel": ch.id, "ts": msg["ts"], "message": self._render_message(ch.id, msg)}

    def _chat_post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._writable(args.get("channel"))
        self._required(args, "user")
        user = str(args["user"])
        if user not in self._users:
            raise SlackError("user_not_found")
        if ch.members is not None and user not in ch.members:
            raise SlackError("user_not_in_channel")
        text, blocks, attachments = self._check_content(args, require=True)
        thread_ts = args.get("thread_ts")
        if thread_ts not in (None, ""):
            thread_ts = self._thread_parent(ch.id, str(thread_ts))
        ts = self._next_ts()
        self.ephemerals.append(
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

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._resolve_channel(args.get("channel"))
        if ch.is_archived:
            raise SlackError("is_archived")
        self._required(args, "ts")
        msg = self._find_message(ch.id, str(args["ts"]))
        if msg.get("user") != self.bot_user_id:
            raise SlackError("cant_update_message")
        text, blocks, attachments = self._check_content(args, require=True)
        if "text" in args:
            msg["text"] = text or ""
        if "blocks" in args:
            self._set_or_drop(msg, "blocks", _with_block_ids(blocks) if blocks else None)
        if "attachments" in args:
            self._set_or_drop(msg, "attachments", copy.deepcopy(attachments))
        msg["edited"] = {"user": self.bot_user_id, "ts": self._next_ts()}
        rendered = self._render_message(ch.id, msg)
        return {"channel": ch.id, "ts": msg["ts"], "text": msg["text"], "message": rendered}

    def _chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._resolve_channel(args.get("channel"))
        self._required(args, "ts")
        self._delete(ch.id, str(args["ts"]), bot_only=True)
        return {"channel": ch.id, "ts": str(args["ts"])}

    def _chat_get_permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._resolve_channel(args.get("channel"))
        self._required(args, "message_ts")
        msg = self._find_message(ch.id, str(args["message_ts"]))
        link = f"https://{TEAM_DOMAIN}.slack.com/archives/{ch.id}/p{msg['ts'].replace('.', '')}"
        parent = msg.get("thread_ts")
        if parent and parent != msg["ts"]:
            link += f"?thread_ts={parent}&cid={ch.id}"
        return {"channel": ch.id, "permalink": link}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._readable(args.get("channel"))
        limit = self._limit(args, 100, 999)
        in_window = _time_window(args)
        cursor = args.get("cursor")
        before = _ts_us(_decode_cursor(str(cursor), "next_ts")) if cursor else None

        def in_range(us: int) -> bool:
            return in_window(us) and (before is None or us <= before)

        top_level = [
            m
            for m in self._messages[ch.id]
            if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"
        ]
        selected = [m for m in reversed(top_level) if in_range(_ts_us(m["ts"]))]
        page, rest = selected[:limit], selected[limit:]
        messages = [self._render_message(ch.id, m) for m in page]
        if not _truthy(args.get("include_all_metadata")):
            for m in messages:  # Slack shows message metadata only when asked for it
                m.pop("metadata", None)
        result: dict[str, Any] = {"messages": messages, "has_more": bool(rest), "pin_count": 0}
        if rest:
            result["response_metadata"] = {"next_cursor": _encode_cursor("next_ts", rest[0]["ts"])}
        return result

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._readable(args.get("channel"))
        self._required(args, "ts")
        try:
            msg = self._find_message(ch.id, str(args["ts"]))
        except SlackError:
            raise SlackError("thread_not_found") from None
        parent_ts = str(msg.get("thread_ts") or msg["ts"])
        try:
            parent = self._find_message(ch.id, parent_ts)
        except SlackError:
            raise SlackError("thread_not_found") from None
        limit = self._limit(args, 1000, 1000)
        in_window = _time_window(args)
        cursor = args.get("cursor")
        after = _ts_us(_decode_cursor(str(cursor), "next_ts")) if cursor else None

        def in_range(us: int) -> bool:
            return in_window(us) and (after is None or us >= after)

        replies = [
            m
            for m in self._messages[ch.id]
            if m.get("thread_ts") == parent_ts
            and m["ts"] != parent_ts
            and in_range(_ts_us(m["ts"]))
        ]
        thread = replies if cursor else [parent, *replies]
        page, rest = thread[:limit], thread[limit:]
        result: dict[str, Any] = {
            "messages": [self._render_message(ch.id, m) for m in page],
            "has_more": bool(rest),
        }
        if rest:
            result["response_metadata"] = {"next_cursor": _encode_cursor("next_ts", rest[0]["ts"])}
        return result

    def _render_channel(self, ch: _Channel, *, num_members: bool = False) -> dict[str, Any]:
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
            "context_team_id": self.team_id,
            "topic": {"value": ch.topic, "creator": "", "last_set": 0},
            "purpose": {"value": ch.purpose, "creator": "", "last_set": 0},
            "previous_names": [],
        }
        if num_members:
            out["num_members"] = len(self._members(ch))
        return out

    def _members(self, ch: _Channel) -> list[str]:
        if ch.members is not None:
            return sorted(ch.members)
        return [u for u, info in self._users.items() if not info["deleted"]]

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._resolve_channel(args.get("channel"))
        return {
            "channel": self._render_channel(
                ch, num_members=_truthy(args.get("include_num_members"))
            )
        }

    def _conversations_list(self, args: dict[str, Any]) -> dict[str, Any]:
        types = {t.strip() for t in str(args.get("types") or "public_channel").split(",")}
        unknown = types - {"public_channel", "private_channel", "mpim", "im"}
        if unknown:
            raise SlackError("invalid_types")
        exclude_archived = _truthy(args.get("exclude_archived"))
        limit = self._limit(args, 100, 1000)

        def kind(ch: _Channel) -> str:
            if ch.is_im:
                return "im"
            if ch.is_mpim:
                return "mpim"
            return "private_channel" if ch.is_private else "public_channel"

        visible = [
            ch
            for ch in self._channels.values()
            if kind(ch) in types
            and (kind(ch) == "public_channel" or ch.is_member)
            and not (exclude_archived and ch.is_archived)
        ]
        start = int(_decode_cursor(str(args["cursor"]), "offset")) if args.get("cursor") else 0
        page = visible[start : start + limit]
        more = start + limit < len(visible)
        next_cursor = _encode_cursor("offset", str(start + limit)) if more else ""
        return {
            "channels": [self._render_channel(ch) for ch in page],
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _conversations_members(self, args: dict[str, Any]) -> dict[str, Any]:
        ch = self._resolve_channel(args.get("channel"))
        return {"members": self._members(ch), "response_metadata": {"next_cursor": ""}}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("channel"):
            ch = self._resolve_channel(args["channel"])
            return {"channel": {"id": ch.id}}
        self._required(args, "users")
        users = [u.strip() for u in str(args["users"]).split(",") if u.strip()]
        for u in users:
            if u not in self._users:
                raise SlackError("user_not_found")
        if len(users) != 1:
            raise SlackError("not_supported_by_emulator")  # mpim creation is not emulated
        ch = self._im_with(users[0])
        if _truthy(args.get("return_im")):
            return {"channel": self._render_channel(ch)}
        return {"channel": {"id": ch.id}}

    # views ---------------------------------------------------------------------------------

    def _take_trigger(self, args: dict[str, Any]) -> None:
        trigger = args.get("trigger_id")
        if not trigger or not isinstance(trigger, str):
            raise SlackError("invalid_trigger_id")
        if trigger in self._used_triggers:
            raise SlackError("exchanged_trigger_id")
        issued = self._triggers.get(trigger)
        if issued is None and not trigger[0].isdigit():
            raise SlackError("invalid_trigger_id")
        if issued is not None and time.monotonic() - issued > self.TRIGGER_ID_TTL:
            raise SlackError("expired_trigger_id")
        self._used_triggers.add(trigger)

    def _check_view(self, args: dict[str, Any], *, kind: str | None = None) -> dict[str, Any]:
        view = args.get("view")
        if view is None:
            raise _invalid_arguments("missing required field: view")
        errors = validate_view(view)
        if not errors and kind is not None and view.get("type") != kind:
            errors = [f"must be a valid enum value: {kind} [json-pointer:/view/type]"]
        if errors:
            raise SlackError(
                "invalid_arguments",
                response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
            )
        external_id = view.get("external_id")
        if external_id:
            for existing in self.views.values():
                if existing["external_id"] == external_id and existing["id"] != args.get("view_id"):
                    raise SlackError("duplicate_external_id")
        return dict(view)

    def _store_view(
        self, view: dict[str, Any], *, view_id: str | None = None, previous: str | None = None
    ) -> dict[str, Any]:
        vid = view_id or self._next_id("V")
        old = self.views.get(vid)
        stored = {
            "id": vid,
            "team_id": self.team_id,
            "type": view["type"],
            "blocks": _with_block_ids(view.get("blocks") or []),
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
            "app_id": self.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
        self.views[vid] = stored
        return copy.deepcopy(stored)

    def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        view = self._check_view(args, kind="modal")
        self._take_trigger(args)
        return {"view": self._store_view(view)}

    def _views_push(self, args: dict[str, Any]) -> dict[str, Any]:
        view = self._check_view(args, kind="modal")
        self._take_trigger(args)
        return {"view": self._store_view(view)}

    def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        view_id = args.get("view_id")
        external_id = args.get("external_id")
        if not view_id and not external_id:
            raise _invalid_arguments("either view_id or external_id is required")
        current: dict[str, Any] | None
        if view_id:
            current = self.views.get(str(view_id))
        else:
            current = next(
                (v for v in self.views.values() if v["external_id"] == external_id), None
            )
        if current is None:
            raise SlackError("not_found")
        if args.get("hash") and args["hash"] != current["hash"]:
            raise SlackError("hash_conflict")
        view = self._check_view({**args, "view_id": current["id"]})
        return {"view": self._store_view(view, view_id=current["id"])}

    def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "user_id")
        user_id = str(args["user_id"])
        if user_id not in self._users:
            raise SlackError("user_not_found")
        current = self.home_views.get(user_id)
        view = self._check_view(
            {**args, "view_id": current["id"] if current else None}, kind="home"
        )
        if current and args.get("hash") and args["hash"] != current["hash"]:
            raise SlackError("hash_conflict")
        stored = self._store_view(view, view_id=current["id"] if current else None)
        self.home_views[user_id] = stored
        return {"view": stored}

    # files ---------------------------------------------------------------------------------

    def _files_get_upload_url(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "filename", "length")
        try:
            length = int(args["length"])
        except (TypeError, ValueError):
            raise _invalid_arguments("length must be an integer") from None
        if length < 0:
            raise _invalid_arguments("length must be positive")
        file_id = self._next_id("F")
        self._pending_files[file_id] = {
            "filename": str(args["filename"]),
            "length": length,
            "alt_txt": args.get("alt_txt"),
            "snippet_type": args.get("snippet_type"),
            "uploaded": False,
            "completed": False,
        }
        return {"upload_url": f"{self.base_url}/upload/v1/{file_id}", "file_id": file_id}

    def _files_complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "files")
        items = args["files"]
        if not isinstance(items, list) or not items:
            raise _invalid_arguments("files must be a non-empty array")
        for item in items:
            if not isinstance(item, dict) or "id" not in item:
                raise _invalid_arguments("each file needs an id")
            pending = self._pending_files.get(str(item["id"]))
            if pending is None or not pending["uploaded"] or pending["completed"]:
                raise SlackError("file_not_found")
        channels: list[_Channel] = []
        if args.get("channel_id"):
            channels.append(self._writable(args["channel_id"]))
        if args.get("channels"):
            channels.extend(self._writable(c.strip()) for c in str(args["channels"]).split(","))
        thread_ts = args.get("thread_ts")
        if thread_ts and not channels:
            raise _invalid_arguments("thread_ts requires channel_id")
        parents = [self._thread_parent(ch.id, str(thread_ts)) for ch in channels if thread_ts]
        initial_comment = args.get("initial_comment")
        if initial_comment and len(str(initial_comment)) > MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        files = []
        for item in items:
            fid = str(item["id"])
            pending = self._pending_files[fid]
            pending["completed"] = True
            name = pending["filename"]
            data = self.uploads.get(fid, b"")
            mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
            info = {
                "id": fid,
                "created": int(time.time()),
                "timestamp": int(time.time()),
                "name": name,
                "title": item.get("title") or name,
                "mimetype": mimetype,
                "filetype": name.rsplit(".", 1)[-1].lower() if "." in name else "binary",
                "user": self.bot_user_id,
                "size": len(data),
                "alt_txt": pending["alt_txt"],
                "url_private": f"{self.base_url}/files-pri/{self.team_id}-{fid}/{name}",
                "permalink": f"https://{TEAM_DOMAIN}.slack.com/files/{self.bot_user_id}/{fid}/{name}",
                "channels": [ch.id for ch in channels],
            }
            self.files[fid] = info
            files.append(info)
        for i, ch in enumerate(channels):
            msg = self._new_bot_message(str(initial_comment) if initial_comment else "", None, None)
            msg["files"] = copy.deepcopy(files)
            msg["upload"] = True
            if thread_ts:
                msg["thread_ts"] = parents[i]
            self._store_message(ch.id, msg)
        return {"files": [{"id": f["id"], "title": f["title"]} for f in files]}

    def _files_info(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "file")
        info = self.files.get(str(args["file"]))
        if info is None:
            raise SlackError("file_not_found")
        return {"file": copy.deepcopy(info)}

    # reactions -----------------------------------------------------------------------------

    def _reaction_target(self, args: dict[str, Any]) -> tuple[_Channel, dict[str, Any]]:
        if not args.get("channel") or not args.get("timestamp"):
            raise SlackError("no_item_specified")
        ch = self._readable(args["channel"])
        return ch, self._find_message(ch.id, str(args["timestamp"]))

    def _reactions_get(self, args: dict[str, Any]) -> dict[str, Any]:
        ch, msg = self._reaction_target(args)
        return {"type": "message", "channel": ch.id, "message": self._render_message(ch.id, msg)}

    def _reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        _, msg = self._reaction_target(args)
        name = str(args.get("name") or "").strip(":")
        if not name or not re.fullmatch(r"[a-z0-9_+'\-]+(::skin-tone-\d)?", name):
            raise SlackError("invalid_name")
        reactions = msg.setdefault("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if entry is None:
            entry = {"name": name, "users": [], "count": 0}
            reactions.append(entry)
        if self.bot_user_id in entry["users"]:
            raise SlackError("already_reacted")
        entry["users"].append(self.bot_user_id)
        entry["count"] += 1
        return {}

    def _reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        _, msg = self._reaction_target(args)
        name = str(args.get("name") or "").strip(":")
        reactions = msg.get("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if entry is None or self.bot_user_id not in entry["users"]:
            raise SlackError("no_reaction")
        entry["users"].remove(self.bot_user_id)
        entry["count"] -= 1
        if entry["count"] <= 0:
            reactions.remove(entry)
        if not reactions:
            msg.pop("reactions", None)
        return {}

    # users and groups ----------------------------------------------------------------------

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "user")
        user = self._users.get(str(args["user"]))
        if user is None:
            raise SlackError("user_not_found")
        return {"user": copy.deepcopy(user)}

    def _users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "members": [copy.deepcopy(u) for u in self._users.values()],
            "cache_ts": int(time.time()),
            "response_metadata": {"next_cursor": ""},
        }

    def _users_lookup_by_email(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "email")
        email = str(args["email"]).lower()
        for user in self._users.values():
            if str(user["profile"].get("email", "")).lower() == email:
                return {"user": copy.deepcopy(user)}
        raise SlackError("users_not_found")

    def _render_usergroup(self, group: dict[str, Any], *, include_users: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": group["id"],
            "team_id": self.team_id,
            "is_usergroup": True,
            "name": group["handle"],
            "handle": group["handle"],
            "description": "",
            "date_delete": 0,
            "user_count": len(group["users"]),
        }
        if include_users:
            out["users"] = list(group["users"])
        return out

    def _usergroups_list(self, args: dict[str, Any]) -> dict[str, Any]:
        include = _truthy(args.get("include_users"))
        return {
            "usergroups": [
                self._render_usergroup(g, include_users=include) for g in self._usergroups.values()
            ]
        }

    def _usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        self._required(args, "usergroup")
        group = self._usergroups.get(str(args["usergroup"]))
        if group is None:
            raise SlackError("no_such_subteam")
        return {"users": list(group["users"])}

    # Socket Mode URL -----------------------------------------------------------------------

    def _apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.app_id}"}


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def _with_block_ids(blocks: list[Any]) -> list[Any]:
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
