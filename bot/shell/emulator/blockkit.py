"""Block Kit validation as Slack does it: types, required fields, length and count limits,
unknown properties on the common blocks, unique ids. Errors read like Slack's:
``"<message> [json-pointer:/blocks/0/text]"``.

The limits are `bot.render.limits`, the numbers the bot's builders keep.
"""

from __future__ import annotations

from typing import Any

from bot.render import limits
from bot.shell.emulator.blockkit_schema import (
    ACCESSORY_ELEMENTS,
    ACTIONS_ELEMENTS,
    BLOCK_PROPS,
    BLOCK_TYPES,
    BUTTON_PROPS,
    INPUT_ELEMENTS,
    OPTION_PROPS,
    VIEW_PROPS,
)
from bot.shell.emulator.errors import SlackError

# Not a limit Slack documents: a bound on a rich_text block's elements, so that a runaway
# payload fails here instead of passing.
_MAX_RICH_TEXT_ELEMENTS = 10_000
_CONFIRM_LIMITS = (
    ("title", limits.MAX_CONFIRM_TITLE),
    ("confirm", limits.MAX_CONFIRM_BUTTON),
    ("deny", limits.MAX_CONFIRM_BUTTON),
)


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
        value = self.string(block, "block_id", ptr, max_len=limits.MAX_BLOCK_ID, allow_empty=False)
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
        if not isinstance(kind, str) or kind not in BLOCK_TYPES:
            self.err(f"{ptr}/type", f"unsupported block type: {kind}")
            return
        if kind in BLOCK_PROPS:
            self.props(block, BLOCK_PROPS[kind], ptr)
        self.block_id(block, ptr)
        getattr(self, f"_block_{kind}")(block, ptr)

    def _block_section(self, b: dict[str, Any], ptr: str) -> None:
        if b.get("text") is None and b.get("fields") is None:
            self.err(ptr, "must provide either text or fields")
        if b.get("text") is not None:
            self.text_obj(b["text"], f"{ptr}/text", max_len=limits.MAX_SECTION_TEXT)
        fields = self.array(b, "fields", ptr, max_items=limits.MAX_SECTION_FIELDS, required=False)
        for i, f in enumerate(fields):
            self.text_obj(f, f"{ptr}/fields/{i}", max_len=limits.MAX_FIELD_TEXT)
        self.boolean(b, "expand", ptr)
        if b.get("accessory") is not None:
            self.element(b["accessory"], f"{ptr}/accessory", ACCESSORY_ELEMENTS, set())

    def _block_header(self, b: dict[str, Any], ptr: str) -> None:
        if "text" not in b:
            self.err(ptr, "missing required field: text")
            return
        self.text_obj(b["text"], f"{ptr}/text", max_len=limits.MAX_HEADER_TEXT, plain_only=True)

    def _block_divider(self, b: dict[str, Any], ptr: str) -> None:
        return

    def _block_context(self, b: dict[str, Any], ptr: str) -> None:
        elements = self.array(b, "elements", ptr, max_items=limits.MAX_CONTEXT_ELEMENTS)
        for i, el in enumerate(elements):
            eptr = f"{ptr}/elements/{i}"
            if isinstance(el, dict) and el.get("type") == "image":
                self._image_like(el, eptr)
            else:
                self.text_obj(el, eptr, max_len=None)

    def _block_actions(self, b: dict[str, Any], ptr: str) -> None:
        elements = self.array(b, "elements", ptr, max_items=limits.MAX_ACTIONS_ELEMENTS)
        action_ids: set[str] = set()
        for i, el in enumerate(elements):
            self.element(el, f"{ptr}/elements/{i}", ACTIONS_ELEMENTS, action_ids)

    def _block_image(self, b: dict[str, Any], ptr: str) -> None:
        self._image_like(b, ptr)
        if b.get("title") is not None:
            self.text_obj(
                b["title"], f"{ptr}/title", max_len=limits.MAX_IMAGE_TITLE, plain_only=True
            )

    def _image_like(self, obj: dict[str, Any], ptr: str) -> None:
        if obj.get("image_url") is None and obj.get("slack_file") is None:
            self.err(ptr, "missing required field: image_url")
        self.string(obj, "image_url", ptr, max_len=limits.MAX_URL, allow_empty=False)
        self.string(
            obj, "alt_text", ptr, max_len=limits.MAX_IMAGE_ALT, required=True, allow_empty=False
        )

    def _block_input(self, b: dict[str, Any], ptr: str) -> None:
        if "label" not in b:
            self.err(ptr, "missing required field: label")
        else:
            self.text_obj(
                b["label"], f"{ptr}/label", max_len=limits.MAX_INPUT_LABEL, plain_only=True
            )
        if "hint" in b:
            self.text_obj(b["hint"], f"{ptr}/hint", max_len=limits.MAX_INPUT_HINT, plain_only=True)
        self.boolean(b, "optional", ptr)
        self.boolean(b, "dispatch_action", ptr)
        if "element" not in b:
            self.err(ptr, "missing required field: element")
        else:
            self.element(b["element"], f"{ptr}/element", INPUT_ELEMENTS, set())

    def _block_rich_text(self, b: dict[str, Any], ptr: str) -> None:
        elements = self.array(b, "elements", ptr, max_items=_MAX_RICH_TEXT_ELEMENTS)
        self.text_chars += _rich_text_chars(elements)

    def _block_markdown(self, b: dict[str, Any], ptr: str) -> None:
        text = self.string(
            b, "text", ptr, max_len=limits.MAX_MARKDOWN_TEXT, required=True, allow_empty=False
        )
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
            self.text_obj(
                b["title"], f"{ptr}/title", max_len=limits.MAX_VIDEO_TITLE, plain_only=True
            )

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
            action_id = self.string(
                el, "action_id", ptr, max_len=limits.MAX_ACTION_ID, allow_empty=False
            )
            if action_id is not None:
                if action_id in action_ids:
                    self.err(f"{ptr}/action_id", f"duplicate action_id: {action_id}")
                action_ids.add(action_id)
        if "placeholder" in el:
            self.text_obj(
                el["placeholder"],
                f"{ptr}/placeholder",
                max_len=limits.MAX_PLACEHOLDER,
                plain_only=True,
            )
        if "confirm" in el:
            self.confirm(el["confirm"], f"{ptr}/confirm")
        if kind == "button":
            self.props(el, BUTTON_PROPS, ptr)
            if "text" not in el:
                self.err(ptr, "missing required field: text")
            else:
                self.text_obj(
                    el["text"], f"{ptr}/text", max_len=limits.MAX_BUTTON_TEXT, plain_only=True
                )
            self.string(el, "value", ptr, max_len=limits.MAX_BUTTON_VALUE)
            self.string(el, "url", ptr, max_len=limits.MAX_URL)
            self.string(el, "accessibility_label", ptr, max_len=limits.MAX_ACCESSIBILITY_LABEL)
            if "style" in el and el["style"] not in ("primary", "danger"):
                self.err(f"{ptr}/style", "must be a valid enum value")
        elif kind in ("static_select", "multi_static_select"):
            if el.get("options") is None and el.get("option_groups") is None:
                self.err(ptr, "must provide either options or option_groups")
            options = self.array(
                el, "options", ptr, max_items=limits.MAX_SELECT_OPTIONS, required=False
            )
            for i, o in enumerate(options):
                self.option(o, f"{ptr}/options/{i}", plain_only=True)
            groups = self.array(
                el, "option_groups", ptr, max_items=limits.MAX_OPTION_GROUPS, required=False
            )
            for i, g in enumerate(groups):
                gptr = f"{ptr}/option_groups/{i}"
                if not isinstance(g, dict):
                    self.err(gptr, "must provide an object")
                    continue
                if "label" in g:
                    self.text_obj(
                        g["label"],
                        f"{gptr}/label",
                        max_len=limits.MAX_OPTION_GROUP_LABEL,
                        plain_only=True,
                    )
                for j, o in enumerate(
                    self.array(g, "options", gptr, max_items=limits.MAX_SELECT_OPTIONS)
                ):
                    self.option(o, f"{gptr}/options/{j}", plain_only=True)
        elif kind == "overflow":
            for i, o in enumerate(
                self.array(el, "options", ptr, max_items=limits.MAX_OVERFLOW_OPTIONS)
            ):
                self.option(o, f"{ptr}/options/{i}", plain_only=True)
        elif kind in ("checkboxes", "radio_buttons"):
            for i, o in enumerate(
                self.array(el, "options", ptr, max_items=limits.MAX_CHOICE_OPTIONS)
            ):
                self.option(o, f"{ptr}/options/{i}", plain_only=False)
        elif kind == "image":
            self._image_like(el, ptr)
        elif kind == "plain_text_input":
            for key in ("min_length", "max_length"):
                value = el.get(key)
                if key in el and (
                    not isinstance(value, int) or not 0 <= value <= limits.MAX_TEXT_INPUT_LENGTH
                ):
                    self.err(
                        f"{ptr}/{key}",
                        f"must be an integer between 0 and {limits.MAX_TEXT_INPUT_LENGTH}",
                    )
            self.string(el, "initial_value", ptr, max_len=limits.MAX_TEXT_INPUT_LENGTH)

    def option(self, o: Any, ptr: str, *, plain_only: bool) -> None:
        if not isinstance(o, dict):
            self.err(ptr, "must provide an object")
            return
        self.props(o, OPTION_PROPS, ptr)
        if "text" not in o:
            self.err(ptr, "missing required field: text")
        else:
            self.text_obj(
                o["text"], f"{ptr}/text", max_len=limits.MAX_OPTION_TEXT, plain_only=plain_only
            )
        self.string(
            o, "value", ptr, max_len=limits.MAX_OPTION_VALUE, required=True, allow_empty=False
        )
        if "description" in o:
            self.text_obj(
                o["description"], f"{ptr}/description", max_len=limits.MAX_OPTION_DESCRIPTION
            )
        self.string(o, "url", ptr, max_len=limits.MAX_URL)

    def confirm(self, c: Any, ptr: str) -> None:
        if not isinstance(c, dict):
            self.err(ptr, "must provide an object")
            return
        self.props(c, frozenset({"title", "text", "confirm", "deny", "style"}), ptr)
        for key, max_len in _CONFIRM_LIMITS:
            if key not in c:
                self.err(ptr, f"missing required field: {key}")
            else:
                self.text_obj(c[key], f"{ptr}/{key}", max_len=max_len, plain_only=True)
        if "text" not in c:
            self.err(ptr, "missing required field: text")
        else:
            self.text_obj(c["text"], f"{ptr}/text", max_len=limits.MAX_CONFIRM_TEXT)

    # views ---------------------------------------------------------------------------------

    def view(self, view: Any, ptr: str = "/view") -> None:
        if not isinstance(view, dict):
            self.err(ptr, "must provide an object")
            return
        self.props(view, VIEW_PROPS, ptr)
        kind = view.get("type")
        if kind not in ("modal", "home"):
            self.err(f"{ptr}/type", "must be a valid enum value: modal, home")
            return
        if kind == "modal":
            if "title" not in view:
                self.err(ptr, "missing required field: title")
            else:
                self.text_obj(
                    view["title"], f"{ptr}/title", max_len=limits.MAX_VIEW_TITLE, plain_only=True
                )
        elif "title" in view:
            self.text_obj(
                view["title"], f"{ptr}/title", max_len=limits.MAX_VIEW_TITLE, plain_only=True
            )
        for key, max_len in (("submit", limits.MAX_VIEW_SUBMIT), ("close", limits.MAX_VIEW_CLOSE)):
            if view.get(key) is not None:
                self.text_obj(view[key], f"{ptr}/{key}", max_len=max_len, plain_only=True)
        if "blocks" not in view:
            self.err(ptr, "missing required field: blocks")
        else:
            self.blocks(view["blocks"], f"{ptr}/blocks", max_items=limits.MAX_VIEW_BLOCKS)
            has_input = isinstance(view["blocks"], list) and any(
                isinstance(b, dict) and b.get("type") == "input" for b in view["blocks"]
            )
            if kind == "modal" and has_input and view.get("submit") is None:
                self.err(ptr, "submit is required when an input block is within the blocks array")
        self.string(view, "private_metadata", ptr, max_len=limits.MAX_PRIVATE_METADATA)
        self.string(view, "callback_id", ptr, max_len=limits.MAX_CALLBACK_ID)
        self.string(view, "external_id", ptr, max_len=limits.MAX_EXTERNAL_ID)
        for key in ("clear_on_close", "notify_on_close", "submit_disabled"):
            self.boolean(view, key, ptr)


def _rich_text_chars(node: Any) -> int:
    if isinstance(node, list):
        return sum(_rich_text_chars(n) for n in node)
    if isinstance(node, dict):
        own = len(node["text"]) if isinstance(node.get("text"), str) else 0
        return own + _rich_text_chars(node.get("elements"))
    return 0


def validate_blocks(blocks: Any, *, max_items: int = limits.MAX_MESSAGE_BLOCKS) -> list[str]:
    """Slack-style error strings for a message's blocks ([] when valid)."""
    v = _Validator()
    v.blocks(blocks, "/blocks", max_items=max_items)
    return v.errors


def validate_view(view: Any) -> list[str]:
    """Slack-style error strings for a view payload ([] when valid)."""
    v = _Validator()
    v.view(view)
    return v.errors


def check_message(
    args: dict[str, Any], *, require: bool
) -> tuple[str | None, list[Any] | None, list[Any] | None]:
    """(text, blocks, attachments) of a message, checked as chat.postMessage checks them."""
    text = args.get("text")
    if text is not None and not isinstance(text, str):
        text = str(text)
    blocks = args.get("blocks")
    attachments = args.get("attachments")
    if require and not text and not blocks and not attachments:
        raise SlackError("no_text")
    if text and len(text) > limits.MAX_MESSAGE_TEXT:
        raise SlackError("msg_too_long")
    v = _Validator()
    if blocks is not None:
        v.blocks(blocks, "/blocks", max_items=limits.MAX_MESSAGE_BLOCKS)
    if attachments is not None:
        if not isinstance(attachments, list) or not all(isinstance(a, dict) for a in attachments):
            raise SlackError("invalid_attachments")
        if len(attachments) > limits.MAX_ATTACHMENTS:
            raise SlackError("too_many_attachments")
        for i, att in enumerate(attachments):
            if "blocks" in att:
                v.blocks(
                    att["blocks"], f"/attachments/{i}/blocks", max_items=limits.MAX_MESSAGE_BLOCKS
                )
    if v.errors:
        raise SlackError(
            "invalid_blocks",
            errors=v.errors,
            response_metadata={"messages": [f"[ERROR] {e}" for e in v.errors]},
        )
    if v.text_chars > limits.MSG_BLOCKS_TEXT_LIMIT:
        raise SlackError("msg_blocks_too_long")
    return text, blocks or None, attachments or None
