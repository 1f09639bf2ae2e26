"""Block Kit builders that cannot produce a message Slack rejects.

Renderers build a `Message` (or a `Modal` / `HomeTab`) with a few chained calls and get back
plain dicts for the Web API. Every limit in `bot.render.limits` is kept by truncating visibly
("…", "…and 37 more") rather than by being rejected:

- text is cut on a character boundary (`mrkdwn.truncate`), header 150, section 3000, fields
  2000, button labels 75, option labels 75, modal title/submit/close 24;
- lists are chunked: more than 10 fields, 10 context elements or 25 actions become more blocks;
  more than 100 select options keep the first 100 and say so in the placeholder;
- a message keeps at most 50 blocks and about 11,000 characters of block text; the rest goes to
  `SlackMessage.overflow` (each chunk a valid message, meant for thread replies) and the message
  ends with "…and N more in the thread"; a view keeps 100 blocks and says how many it dropped;
- block_ids and action_ids are made unique by a `#2`, `#3`... suffix; match handlers with
  `action_id_pattern(...)` and read the original with `base_action_id(...)`.

Identifiers and values (action_id, block_id, callback_id, button value, option value, URLs,
private_metadata) are never truncated, since a cut identifier silently misroutes: a too-long
one raises `ValueError` while the message is built, which a unit test catches.

Text arguments are mrkdwn and used as given (so renderers can write `*bold*` and mention
`<@U123>` on purpose): escape anything from users, backends or models with `mrkdwn.escape`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal, Self

from bot.mrkdwn import and_more, bold, code_block, text_length, truncate
from bot.render import limits
from bot.slack_message import Block, SlackMessage

__all__ = [
    "NO_OPTION_VALUE",
    "Block",
    "HomeTab",
    "Message",
    "Modal",
    "action_id_pattern",
    "base_action_id",
    "block_text_length",
    "button",
    "confirm_dialog",
    "error",
    "image_element",
    "option",
    "plain_text_input",
    "select",
    "success",
    "usage",
    "working",
]

ButtonStyle = Literal["primary", "danger"]

# The value of the placeholder option a select gets when it is given no options at all.
NO_OPTION_VALUE = "__none__"

# Room kept free in a message for the "…and N more in the thread" context block.
_NOTICE_RESERVE = 200
_PER_BLOCK_TEXT_BUDGET = limits.MSG_BLOCKS_TEXT_BUDGET - _NOTICE_RESERVE

_ID_SUFFIX = re.compile(r"#\d+$")
SELECT_TYPES = frozenset(
    {
        "static_select",
        "multi_static_select",
        "external_select",
        "multi_external_select",
        "users_select",
        "multi_users_select",
        "conversations_select",
        "multi_conversations_select",
        "channels_select",
        "multi_channels_select",
    }
)
_INTERACTIVE_TYPES = SELECT_TYPES | {
    "button",
    "overflow",
    "datepicker",
    "timepicker",
    "datetimepicker",
    "checkboxes",
    "radio_buttons",
}
_ACCESSORY_TYPES = _INTERACTIVE_TYPES | {"image"}
_MAX_OPTIONS_BY_TYPE = {
    "overflow": limits.MAX_OVERFLOW_OPTIONS,
    "checkboxes": limits.MAX_CHOICE_OPTIONS,
    "radio_buttons": limits.MAX_CHOICE_OPTIONS,
}
_INPUT_TYPES = SELECT_TYPES | {
    "plain_text_input",
    "number_input",
    "email_text_input",
    "url_text_input",
    "datepicker",
    "timepicker",
    "datetimepicker",
    "checkboxes",
    "radio_buttons",
    "rich_text_input",
    "file_input",
}


# --- element builders --------------------------------------------------------------------


def button(
    text: str,
    action_id: str,
    value: str = "",
    *,
    style: ButtonStyle | None = None,
    url: str | None = None,
    confirm: Block | None = None,
) -> Block:
    """A button; `value` travels back in the block_actions payload (at most 2000 characters)."""
    element: Block = {
        "type": "button",
        "text": _plain(text, limits.MAX_BUTTON_TEXT),
        "action_id": _checked_id(action_id, limits.MAX_ACTION_ID, "action_id"),
    }
    if value:
        element["value"] = _checked(value, limits.MAX_BUTTON_VALUE, "button value")
    if style is not None:
        if style not in ("primary", "danger"):
            raise ValueError(f"button style must be 'primary' or 'danger', not {style!r}")
        element["style"] = style
    if url is not None:
        element["url"] = _checked(url, limits.MAX_URL, "button url")
    if confirm is not None:
        element["confirm"] = _clamp_confirm(confirm)
    return element


def option(label: str, value: str, *, description: str | None = None) -> Block:
    """One option of a select, checkbox group or radio group."""
    result: Block = {
        "text": _plain(label, limits.MAX_OPTION_TEXT),
        "value": _checked(value, limits.MAX_OPTION_VALUE, "option value"),
    }
    if description:
        result["description"] = _plain(description, limits.MAX_OPTION_TEXT)
    return result


def select(
    placeholder: str,
    action_id: str,
    options: Sequence[tuple[str, str]],
    *,
    initial: str | None = None,
    confirm: Block | None = None,
) -> Block:
    """A static select over `(label, value)` pairs; `initial` is the value chosen at first.

    More than 100 options keep the first 100 and the placeholder says "(first 100 of N)".
    No options at all give one "(none available)" option whose value is `NO_OPTION_VALUE`.
    """
    unique: list[tuple[str, str]] = []
    seen: set[str] = set()
    for label, value in options:
        if value not in seen:
            seen.add(value)
            unique.append((label, value))
    if not unique:
        unique = [("(none available)", NO_OPTION_VALUE)]
    if len(unique) > limits.MAX_SELECT_OPTIONS:
        placeholder = f"{placeholder} (first {limits.MAX_SELECT_OPTIONS} of {len(unique)})"
        unique = unique[: limits.MAX_SELECT_OPTIONS]
    built = [option(label, value) for label, value in unique]
    element: Block = {
        "type": "static_select",
        "action_id": _checked_id(action_id, limits.MAX_ACTION_ID, "action_id"),
        "placeholder": _plain(placeholder, limits.MAX_PLACEHOLDER),
        "options": built,
    }
    if initial is not None:
        for candidate in built:
            if candidate["value"] == initial:
                element["initial_option"] = candidate
                break
    if confirm is not None:
        element["confirm"] = _clamp_confirm(confirm)
    return element


def confirm_dialog(
    title: str,
    text: str,
    *,
    confirm: str = "Confirm",
    deny: str = "Cancel",
    style: ButtonStyle | None = None,
) -> Block:
    """An "are you sure?" dialog for `button(..., confirm=...)` and `select(..., confirm=...)`."""
    dialog: Block = {
        "title": _plain(title, limits.MAX_CONFIRM_TITLE),
        "text": _mrkdwn(text, limits.MAX_CONFIRM_TEXT),
        "confirm": _plain(confirm, limits.MAX_CONFIRM_BUTTON),
        "deny": _plain(deny, limits.MAX_CONFIRM_BUTTON),
    }
    if style is not None:
        dialog["style"] = style
    return dialog


def image_element(url: str, alt: str) -> Block:
    """An image for a section accessory or a context block."""
    return {
        "type": "image",
        "image_url": _checked(url, limits.MAX_URL, "image url"),
        "alt_text": _alt(alt),
    }


def plain_text_input(
    action_id: str,
    *,
    multiline: bool = False,
    placeholder: str | None = None,
    initial: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
) -> Block:
    """A text box for an input block (`Modal.input` / `Modal.text_input`)."""
    cap = limits.MAX_TEXT_INPUT_LENGTH
    if max_length is not None:
        cap = max(1, min(max_length, cap))
    element: Block = {
        "type": "plain_text_input",
        "action_id": _checked_id(action_id, limits.MAX_ACTION_ID, "action_id"),
        "multiline": multiline,
        "max_length": cap,
    }
    if min_length is not None:
        element["min_length"] = max(0, min(min_length, cap))
    if placeholder:
        element["placeholder"] = _plain(placeholder, limits.MAX_PLACEHOLDER)
    if initial:
        element["initial_value"] = truncate(initial, cap, mrkdwn=False)
    return element


def action_id_pattern(action_id: str) -> re.Pattern[str]:
    """Matches `action_id` and its de-duplicated forms (`drain#2`): for `app.action(...)`."""
    return re.compile(rf"^{re.escape(action_id)}(?:#\d+)?$")


def base_action_id(action_id: str) -> str:
    """The action_id as the renderer wrote it, without a `#N` de-duplication suffix."""
    return _ID_SUFFIX.sub("", action_id)


def block_text_length(blocks: Iterable[Block]) -> int:
    """The characters of text in `blocks`, as counted against `msg_blocks_too_long`."""
    return sum(_text_in(block) for block in blocks)


# --- block lists -------------------------------------------------------------------------


class _Blocks:
    """The blocks every surface shares; subclasses say how many fit and how they are built."""

    def __init__(self) -> None:
        self._blocks: list[Block] = []

    def __len__(self) -> int:
        return len(self._blocks)

    def header(self, text: str, *, block_id: str | None = None) -> Self:
        """A header (plain text, one line, at most 150 characters)."""
        line = " ".join(text.split())
        if line:
            self._add({"type": "header", "text": _plain(line, limits.MAX_HEADER_TEXT)}, block_id)
        return self

    def section(
        self,
        text: str = "",
        *,
        fields: Sequence[str] | None = None,
        accessory: Block | None = None,
        block_id: str | None = None,
    ) -> Self:
        """A section of mrkdwn `text` (3000), optional `fields` (2000 each) and an accessory.

        More than 10 fields continue in further sections. A section with neither text nor
        fields is left out; its accessory, if any, goes to an actions block instead.
        """
        field_objects = [
            _mrkdwn(value if value.strip() else "-", limits.MAX_FIELD_TEXT)
            for value in (fields or [])
        ]
        element = _clamp_element(accessory, _ACCESSORY_TYPES) if accessory else None
        if not text.strip() and not field_objects:
            if element is not None and element["type"] == "image":
                self._add(
                    {
                        "type": "image",
                        "image_url": element["image_url"],
                        "alt_text": element["alt_text"],
                    },
                    block_id,
                )
            elif element is not None:
                self._add({"type": "actions", "elements": [element]}, block_id)
            return self
        first: Block = {"type": "section"}
        if text.strip():
            first["text"] = _mrkdwn(text, limits.MAX_SECTION_TEXT)
        chunks = _chunks(field_objects, limits.MAX_SECTION_FIELDS) or [[]]
        if chunks[0]:
            first["fields"] = chunks[0]
        if element is not None:
            first["accessory"] = element
        self._add(first, block_id)
        for chunk in chunks[1:]:
            self._add({"type": "section", "fields": chunk}, block_id)
        return self

    def fields(self, pairs: Iterable[tuple[str, str]], *, block_id: str | None = None) -> Self:
        """Label/value fields (`*label*` over the value), ten to a section."""
        rendered = [f"{bold(label)}\n{value if value.strip() else '-'}" for label, value in pairs]
        if rendered:
            self.section(fields=rendered, block_id=block_id)
        return self

    def context(self, *items: str | Block, block_id: str | None = None) -> Self:
        """Small grey text: mrkdwn strings and `image_element`s, ten to a block."""
        elements: list[Block] = []
        for item in items:
            if isinstance(item, str):
                if item.strip():
                    elements.append(_mrkdwn(item, limits.MAX_CONTEXT_ELEMENT_TEXT))
            elif item.get("type") == "image":
                elements.append(_clamp_element(item, frozenset({"image"})))
            elif item.get("type") in ("mrkdwn", "plain_text"):
                elements.append(_clamp_text_object(item, limits.MAX_CONTEXT_ELEMENT_TEXT))
            else:
                raise ValueError(f"a context element must be text or an image: {item!r}")
        for chunk in _chunks(elements, limits.MAX_CONTEXT_ELEMENTS):
            self._add({"type": "context", "elements": chunk}, block_id)
        return self

    def divider(self) -> Self:
        self._blocks.append({"type": "divider"})
        return self

    def actions(self, *elements: Block, block_id: str | None = None) -> Self:
        """Buttons and selects, 25 to a block."""
        cleaned = [_clamp_element(element, _INTERACTIVE_TYPES) for element in elements]
        for chunk in _chunks(cleaned, limits.MAX_ACTIONS_ELEMENTS):
            self._add({"type": "actions", "elements": chunk}, block_id)
        return self

    def lines(
        self,
        items: Iterable[str],
        *,
        max_items: int | None = None,
        more_hint: str = "",
        bullet: str = "• ",
    ) -> Self:
        """A list, one mrkdwn line per item, packed into as few sections as fit.

        With `max_items`, the rest is left out and a context line says "…and N more",
        followed by `more_hint` (say, the command that shows them all).
        """
        every = list(items)
        shown = every if max_items is None else every[: max(0, max_items)]
        hidden = len(every) - len(shown)
        rendered = [
            truncate(f"{bullet}{item}", limits.MAX_SECTION_TEXT) for item in shown if item.strip()
        ]
        chunk: list[str] = []
        used = 0
        for line in rendered:
            cost = text_length(line) + (1 if chunk else 0)
            if chunk and used + cost > limits.MAX_SECTION_TEXT:
                self.section("\n".join(chunk))
                chunk, used = [], 0
                cost = text_length(line)
            chunk.append(line)
            used += cost
        if chunk:
            self.section("\n".join(chunk))
        if hidden > 0:
            self.context(and_more(hidden, more_hint))
        return self

    def code(self, text: str, *, tail: bool = False, block_id: str | None = None) -> Self:
        """A section holding `text` literally as a code block (with `tail`, keep its end)."""
        return self.section(code_block(text, limits.MAX_SECTION_TEXT, tail=tail), block_id=block_id)

    def image(
        self, url: str, alt: str, *, title: str | None = None, block_id: str | None = None
    ) -> Self:
        """An image block; `alt` is what screen readers and the terminal show."""
        block: Block = {
            "type": "image",
            "image_url": _checked(url, limits.MAX_URL, "image url"),
            "alt_text": _alt(alt),
        }
        if title and title.strip():
            block["title"] = _plain(title, limits.MAX_IMAGE_TITLE)
        self._add(block, block_id)
        return self

    def _add(self, block: Block, block_id: str | None) -> None:
        if block_id is not None:
            block["block_id"] = _checked_id(block_id, limits.MAX_BLOCK_ID, "block_id")
        self._blocks.append(block)

    def _finished_blocks(self) -> list[Block]:
        """A copy of the blocks with unique ids (the builder stays usable)."""
        blocks = copy.deepcopy(self._blocks)
        _make_ids_unique(blocks)
        return blocks


class Message(_Blocks):
    """One Slack message. `text` is the fallback for notifications and screen readers."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def build(self) -> SlackMessage:
        blocks: list[Block] = []
        for block in self._finished_blocks():
            blocks.extend(_split_to_budget(block, _PER_BLOCK_TEXT_BUDGET))
        if not blocks:  # a text-only message still gets one block, so updates replace blocks
            blocks = [{"type": "section", "text": _mrkdwn(self.text, limits.MAX_SECTION_TEXT)}]
        shown, overflow = _paginate(blocks)
        return SlackMessage(text=self._fallback_text(blocks), blocks=shown, overflow=overflow)

    def _fallback_text(self, blocks: list[Block]) -> str:
        text = self.text if self.text.strip() else _first_text(blocks)
        return truncate(text or "(message)", limits.MAX_MESSAGE_TEXT)


class _View(_Blocks):
    """A modal or the home tab: up to 100 blocks, input blocks allowed."""

    view_type: ClassVar[str]

    def __init__(self, *, callback_id: str = "", private_metadata: str = "") -> None:
        super().__init__()
        self.callback_id = _checked(callback_id, limits.MAX_CALLBACK_ID, "callback_id")
        self.private_metadata = _checked(
            private_metadata, limits.MAX_PRIVATE_METADATA, "private_metadata"
        )

    def input(
        self,
        label: str,
        element: Block,
        *,
        block_id: str | None = None,
        optional: bool = False,
        hint: str | None = None,
        dispatch_action: bool = False,
    ) -> Self:
        """An input block. Its block_id defaults to the element's action_id, so the submitted
        value is at `state["values"][action_id][action_id]`."""
        cleaned = _clamp_element(element, _INPUT_TYPES)
        block: Block = {
            "type": "input",
            "label": _plain(label, limits.MAX_INPUT_LABEL, empty="Input"),
            "element": cleaned,
            "optional": optional,
        }
        if hint and hint.strip():
            block["hint"] = _plain(hint, limits.MAX_INPUT_HINT)
        if dispatch_action:
            block["dispatch_action"] = True
        self._add(block, block_id if block_id is not None else cleaned.get("action_id"))
        return self

    def text_input(
        self,
        label: str,
        action_id: str,
        *,
        multiline: bool = False,
        placeholder: str | None = None,
        initial: str | None = None,
        max_length: int | None = None,
        optional: bool = False,
        hint: str | None = None,
        block_id: str | None = None,
    ) -> Self:
        element = plain_text_input(
            action_id,
            multiline=multiline,
            placeholder=placeholder,
            initial=initial,
            max_length=max_length,
        )
        return self.input(label, element, block_id=block_id, optional=optional, hint=hint)

    def select_input(
        self,
        label: str,
        action_id: str,
        options: Sequence[tuple[str, str]],
        *,
        placeholder: str = "Choose…",
        initial: str | None = None,
        optional: bool = False,
        hint: str | None = None,
        block_id: str | None = None,
    ) -> Self:
        element = select(placeholder, action_id, options, initial=initial)
        return self.input(label, element, block_id=block_id, optional=optional, hint=hint)

    def _view_blocks(self) -> list[Block]:
        blocks = self._finished_blocks()
        if not blocks:
            blocks = [{"type": "section", "text": _mrkdwn("_Nothing to show._", 100)}]
        if len(blocks) > limits.MAX_VIEW_BLOCKS:
            kept = blocks[: limits.MAX_VIEW_BLOCKS - 1]
            hidden = len(blocks) - len(kept)
            kept.append(
                {"type": "context", "elements": [_mrkdwn(and_more(hidden, "not shown"), 200)]}
            )
            blocks = kept
        return blocks

    def _base(self) -> Block:
        view: Block = {"type": self.view_type, "blocks": self._view_blocks()}
        if self.callback_id:
            view["callback_id"] = self.callback_id
        if self.private_metadata:
            view["private_metadata"] = self.private_metadata
        return view


class Modal(_View):
    """A modal for `views.open` / `views.push` / `views.update` (`view=modal.build()`)."""

    view_type = "modal"

    def __init__(
        self,
        title: str,
        *,
        callback_id: str = "",
        submit: str | None = None,
        close: str | None = "Cancel",
        private_metadata: str = "",
        notify_on_close: bool = False,
        clear_on_close: bool = False,
    ) -> None:
        super().__init__(callback_id=callback_id, private_metadata=private_metadata)
        self.title = title
        self.submit = submit
        self.close = close
        self.notify_on_close = notify_on_close
        self.clear_on_close = clear_on_close

    def build(self) -> Block:
        view = self._base()
        view["title"] = _plain(" ".join(self.title.split()), limits.MAX_VIEW_TITLE, empty="meowbot")
        submit = self.submit
        if submit is None and any(block["type"] == "input" for block in view["blocks"]):
            submit = "Submit"  # Slack requires a submit button once there is an input
        if submit is not None:
            view["submit"] = _plain(submit, limits.MAX_VIEW_SUBMIT, empty="Submit")
        if self.close is not None:
            view["close"] = _plain(self.close, limits.MAX_VIEW_CLOSE, empty="Cancel")
        if self.notify_on_close:
            view["notify_on_close"] = True
        if self.clear_on_close:
            view["clear_on_close"] = True
        return view


class HomeTab(_View):
    """The app's home tab for `views.publish` (`view=home.build()`)."""

    view_type = "home"

    def build(self) -> Block:
        return self._base()


# --- ready-made messages -----------------------------------------------------------------


def error(text: str) -> SlackMessage:
    """A short failure answer: one sentence behind a warning sign."""
    return Message(text).section(f":warning: {text}").build()


def success(text: str) -> SlackMessage:
    """A short confirmation: one sentence behind a check mark."""
    return Message(text).section(f":white_check_mark: {text}").build()


def working(text: str) -> SlackMessage:
    """A placeholder while the answer is being worked out ("looking at gpu-a17…")."""
    return Message(text).context(f":hourglass_flowing_sand: {text}").build()


def usage(command: str, usage_lines: Sequence[str], description: str) -> SlackMessage:
    """The `help` answer of a command: what it does and how to call it."""
    message = Message(f"{command}: {description}").section(f"{bold(command)} — {description}")
    if usage_lines:
        # The lines are mrkdwn with `code` spans for what to type: a list, not a code block.
        message.lines(list(usage_lines))
    return message.build()


# --- internals ---------------------------------------------------------------------------


def _plain(text: str, limit: int, *, empty: str = "-") -> Block:
    value = text if text.strip() else empty
    return {"type": "plain_text", "text": truncate(value, limit, mrkdwn=False), "emoji": True}


def _mrkdwn(text: str, limit: int) -> Block:
    return {"type": "mrkdwn", "text": truncate(text if text.strip() else "-", limit)}


def _alt(alt: str) -> str:
    return truncate(alt if alt.strip() else "image", limits.MAX_IMAGE_ALT, mrkdwn=False)


def _checked(value: str, limit: int, what: str) -> str:
    if text_length(value) > limit:
        raise ValueError(f"{what} is {text_length(value)} characters; Slack allows {limit}")
    return value


def _checked_id(value: str, limit: int, what: str) -> str:
    _checked(value, limit, what)
    if _ID_SUFFIX.search(value):
        raise ValueError(f"{what} {value!r} ends like a de-duplication suffix (#N)")
    return value


def _clamp_text_object(obj: Block, limit: int) -> Block:
    if obj.get("type") == "plain_text":
        return _plain(str(obj.get("text", "")), limit)
    return _mrkdwn(str(obj.get("text", "")), limit)


def _clamp_confirm(dialog: Block) -> Block:
    def text_of(key: str, default: str) -> str:
        value = dialog.get(key)
        return str(value.get("text", default)) if isinstance(value, dict) else default

    style = dialog.get("style")
    return confirm_dialog(
        text_of("title", "Are you sure?"),
        text_of("text", "Are you sure?"),
        confirm=text_of("confirm", "Confirm"),
        deny=text_of("deny", "Cancel"),
        style=style if style in ("primary", "danger") else None,
    )


def _clamp_element(element: Block, allowed: frozenset[str]) -> Block:
    """A copy of a hand-made or built element with its text and lists within Slack's limits."""
    kind = element.get("type")
    if kind not in allowed:
        raise ValueError(f"element of type {kind!r} is not allowed here ({sorted(allowed)})")
    result = copy.deepcopy(element)
    if "action_id" in result:
        _checked(str(result["action_id"]), limits.MAX_ACTION_ID, "action_id")
    if kind == "button":
        result["text"] = _clamp_text_object(result.get("text", {}), limits.MAX_BUTTON_TEXT)
        result["text"]["type"] = "plain_text"
        if "value" in result:
            _checked(str(result["value"]), limits.MAX_BUTTON_VALUE, "button value")
    if kind == "image":
        result["alt_text"] = _alt(str(result.get("alt_text", "")))
    if isinstance(result.get("placeholder"), dict):
        result["placeholder"] = _plain(
            str(result["placeholder"].get("text", "")), limits.MAX_PLACEHOLDER
        )
    if isinstance(result.get("options"), list):
        most = _MAX_OPTIONS_BY_TYPE.get(str(kind), limits.MAX_SELECT_OPTIONS)
        unique: dict[Any, Any] = {}
        for entry in result["options"]:
            key = entry.get("value") if isinstance(entry, dict) else id(entry)
            unique.setdefault(key, entry)
        result["options"] = list(unique.values())[:most]
        for entry in result["options"]:
            if isinstance(entry, dict) and isinstance(entry.get("text"), dict):
                entry["text"] = _clamp_text_object(entry["text"], limits.MAX_OPTION_TEXT)
        # The initial choice must be one of the options, exactly; one no longer offered
        # would be rejected.
        offered = {
            entry.get("value"): entry for entry in result["options"] if isinstance(entry, dict)
        }
        initial = result.get("initial_option")
        if isinstance(initial, dict) and initial.get("value") in offered:
            result["initial_option"] = offered[initial.get("value")]
        else:
            result.pop("initial_option", None)
        if isinstance(result.get("initial_options"), list):
            kept = [
                offered[o.get("value")]
                for o in result["initial_options"]
                if isinstance(o, dict) and o.get("value") in offered
            ]
            if kept:
                result["initial_options"] = kept
            else:
                del result["initial_options"]
    if isinstance(result.get("confirm"), dict):
        result["confirm"] = _clamp_confirm(result["confirm"])
    return result


def _chunks(items: list[Block], size: int) -> list[list[Block]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _text_in(node: object) -> int:
    if isinstance(node, dict):
        if node.get("type") in ("plain_text", "mrkdwn") and isinstance(node.get("text"), str):
            return text_length(node["text"])
        return sum(_text_in(value) for value in node.values())
    if isinstance(node, list):
        return sum(_text_in(value) for value in node)
    return 0


def _first_text(blocks: list[Block]) -> str:
    for block in blocks:
        for key in ("text", "fields", "elements"):
            found = _text_in_order(block.get(key))
            if found:
                return found
    return ""


def _text_in_order(node: object) -> str:
    if isinstance(node, dict) and isinstance(node.get("text"), str):
        return str(node["text"]).strip()
    if isinstance(node, list):
        for value in node:
            found = _text_in_order(value)
            if found:
                return found
    return ""


def _unique(value: str, seen: dict[str, int], limit: int) -> str:
    """`value`, or `value#N` with the next free N; `seen` maps ids to their last N."""
    if value not in seen:
        seen[value] = 1
        return value
    number = seen[value]
    while True:
        number += 1
        suffix = f"#{number}"
        candidate = value[: limit - len(suffix)] + suffix
        if candidate not in seen:
            seen[value] = number
            seen[candidate] = 1
            return candidate


def _make_ids_unique(blocks: list[Block]) -> None:
    block_ids: dict[str, int] = {}
    action_ids: dict[str, int] = {}

    def fix_element(element: object) -> None:
        if isinstance(element, dict) and isinstance(element.get("action_id"), str):
            element["action_id"] = _unique(element["action_id"], action_ids, limits.MAX_ACTION_ID)

    for block in blocks:
        if isinstance(block.get("block_id"), str):
            block["block_id"] = _unique(block["block_id"], block_ids, limits.MAX_BLOCK_ID)
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            fix_element(element)
        fix_element(block.get("accessory"))
        fix_element(block.get("element"))


def _split_to_budget(block: Block, budget: int) -> list[Block]:
    """Split a block whose text alone would pass the message budget into several blocks."""
    if _text_in(block) <= budget:
        return [block]
    key = "fields" if block["type"] == "section" else "elements"
    items = block.get(key)
    if not isinstance(items, list) or len(items) < 2:
        return [block]  # cannot pass the budget for blocks these builders make
    head = {name: value for name, value in block.items() if name != key}
    pieces: list[Block] = []
    if block["type"] == "section":
        if "text" in head:
            pieces.append(head)
        template = {"type": "section"}
    else:
        template = head
    current: list[Block] = []
    used = 0
    for item in items:
        cost = _text_in(item)
        if current and used + cost > budget:
            pieces.append({**copy.deepcopy(template), key: current})
            current, used = [], 0
        current.append(item)
        used += cost
    if current:
        pieces.append({**copy.deepcopy(template), key: current})
    for later in pieces[1:]:
        later.pop("block_id", None)  # only the first piece keeps the id
    return pieces


def _paginate(blocks: list[Block]) -> tuple[list[Block], list[list[Block]]]:
    """Split blocks into the message and its thread replies, each within Slack's limits."""
    total = block_text_length(blocks)
    if len(blocks) <= limits.MAX_MESSAGE_BLOCKS and total <= limits.MSG_BLOCKS_TEXT_BUDGET:
        return blocks, []
    shown: list[Block] = []
    used = 0
    for block in blocks:
        cost = _text_in(block)
        if len(shown) >= limits.MAX_MESSAGE_BLOCKS - 1 or used + cost > _PER_BLOCK_TEXT_BUDGET:
            break
        shown.append(block)
        used += cost
    rest = blocks[len(shown) :]
    while shown and shown[-1]["type"] == "divider":
        rest.insert(0, shown.pop())
    hidden = sum(1 for block in rest if block["type"] != "divider")
    if hidden == 0:
        return shown, []
    notice = f":speech_balloon: {and_more(hidden)} in the thread"
    shown.append({"type": "context", "elements": [_mrkdwn(notice, 200)]})
    return shown, _chunk_messages(rest)


def _chunk_messages(blocks: list[Block]) -> list[list[Block]]:
    chunks: list[list[Block]] = []
    current: list[Block] = []
    used = 0
    for block in blocks:
        cost = _text_in(block)
        if current and (
            len(current) >= limits.MAX_MESSAGE_BLOCKS or used + cost > limits.MSG_BLOCKS_TEXT_BUDGET
        ):
            chunks.append(current)
            current, used = [], 0
        if not current and block["type"] == "divider":
            continue
        current.append(block)
        used += cost
    if current:
        chunks.append(current)
    for chunk in chunks:
        while chunk and chunk[-1]["type"] == "divider":
            chunk.pop()
    return [chunk for chunk in chunks if chunk]
