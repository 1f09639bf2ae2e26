"""Slack messages and views, rendered readably in a terminal (the `meowbot shell`).

`render_terminal(blocks, text, color=...)` turns Block Kit into lines of at most `width`
columns: headers in bold, mrkdwn styled (`*bold*`, `_italic_`, `~strike~`, `` `code` ``, code
blocks, quotes, `<url|label>` as "label (url)", mentions as `@U123`), fields as aligned
label/value rows, context dimmed, dividers as a rule, and buttons and selects numbered
(`[1: Drain node] [2: Silence] [3: Pick a node ▾]`) in the same order as `button_targets`, so
the shell can answer `press 2` with a block_actions payload.

With `color=False` the output holds no escape byte at all; control characters that came in
with the text (a terminal escape hidden in a node's name, say) are always removed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.render.blocks import SELECT_TYPES
from bot.slack_message import SlackMessage

__all__ = [
    "DEFAULT_WIDTH",
    "button_targets",
    "message_targets",
    "render_message",
    "render_mrkdwn",
    "render_terminal",
    "render_view",
]

DEFAULT_WIDTH = 100
_MIN_WIDTH = 20
_MAX_LABEL_COLUMN = 32
_RULE = "─"
_CONTEXT_PREFIX = "  · "
_CODE_INDENT = "    "
_QUOTE_PREFIX = "│ "

# The element types a number is given for: the shell can "press" them.
_NUMBERED_TYPES = SELECT_TYPES | {"button", "overflow"}

_SGR = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "underline": "4",
    "strike": "9",
    "red": "31",
    "green": "32",
    "code": "36",
}
_RESET = "\x1b[0m"

# C0 and C1 controls except newline (tabs become spaces), plus the invisible characters that
# `mrkdwn.escape` inserts to defuse mentions.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2060]")
_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
_INLINE = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<token><[^<>\n]+>)"
    r"|(?P<bold>(?<![\w*])\*(?=[^\s*])[^*\n]*?[^\s*]\*(?![\w*])|(?<![\w*])\*[^\s*]\*(?![\w*]))"
    r"|(?P<italic>(?<![\w_])_(?=[^\s_])[^_\n]*?[^\s_]_(?![\w_])|(?<![\w_])_[^\s_]_(?![\w_]))"
    r"|(?P<strike>(?<![\w~])~(?=[^\s~])[^~\n]*?[^\s~]~(?![\w~])|(?<![\w~])~[^\s~]~(?![\w~]))"
)
_PIECES = re.compile(r"\n|[^\S\n]+|\S+")
_BULLET = re.compile(r"^\s*(?:[•◦▪\-*]|\d{1,3}[.)])\s+")  # list items wrap with a hanging indent

Style = frozenset[str]
Span = tuple[str, Style]
_PLAIN: Style = frozenset()


# --- public API --------------------------------------------------------------------------


def render_terminal(
    blocks: Sequence[dict[str, Any]],
    text: str = "",
    *,
    color: bool,
    width: int = DEFAULT_WIDTH,
    start: int = 1,
) -> str:
    """A Slack message as terminal text; `text` is shown only when there are no blocks.

    Interactive elements are numbered from `start` (as `button_targets(blocks, start=...)`).
    """
    renderer = _Renderer(color=color, width=width, numbers=_numbers(blocks, start))
    if not blocks:
        return "\n".join(renderer.mrkdwn_block(text))
    return "\n".join(renderer.blocks(blocks))


def render_view(
    view: dict[str, Any], *, color: bool, width: int = DEFAULT_WIDTH, start: int = 1
) -> str:
    """A modal or home tab view (the dict given to views.open / views.publish)."""
    blocks = list(view.get("blocks") or [])
    renderer = _Renderer(color=color, width=width, numbers=_numbers(blocks, start))
    title = _text_of(view.get("title")) or ("Home" if view.get("type") == "home" else "")
    lines = renderer.header(title) if title else []
    lines.extend(renderer.blocks(blocks))
    footer = [
        f"[{label}]"
        for label in (_text_of(view.get("close")), _text_of(view.get("submit")))
        if label
    ]
    if footer:
        lines.append(renderer.emit([("  ".join(footer), frozenset({"bold"}))]))
    return "\n".join(lines)


def render_message(message: SlackMessage, *, color: bool, width: int = DEFAULT_WIDTH) -> str:
    """A built message and its thread replies, numbered as `message_targets(message)`."""
    parts = [render_terminal(message.blocks, message.text, color=color, width=width)]
    number = 1 + len(button_targets(message.blocks))
    replies = message.replies()
    for index, reply in enumerate(replies, start=1):
        marker = f"↳ in the thread ({index}/{len(replies)})"
        renderer = _Renderer(color=color, width=width, numbers={})
        parts.append(renderer.emit([(marker, frozenset({"dim"}))]))
        parts.append(
            render_terminal(reply.blocks, reply.text, color=color, width=width, start=number)
        )
        number += len(button_targets(reply.blocks))
    return "\n".join(parts)


def render_mrkdwn(text: str, *, color: bool, width: int = DEFAULT_WIDTH) -> str:
    """One piece of mrkdwn (a message's fallback text, say) as terminal text."""
    return "\n".join(_Renderer(color=color, width=width, numbers={}).mrkdwn_block(text))


def button_targets(blocks: Sequence[dict[str, Any]], *, start: int = 1) -> list[dict[str, Any]]:
    """The numbered elements of `blocks`, in the numbering `render_terminal` shows.

    Each entry: `number`, `type`, `block_id`, `action_id`, `value` (buttons; else None),
    `text` (label or placeholder), `url`, `options` (`[{"text", "value"}]` for selects and
    overflow menus) and `element` (the element dict, for building the payload).
    """
    targets: list[dict[str, Any]] = []
    for number, (block, element) in enumerate(_interactive(blocks), start=start):
        options = [
            {"text": _text_of(entry.get("text")), "value": entry.get("value")}
            for entry in _options_of(element)
        ]
        targets.append(
            {
                "number": number,
                "type": element.get("type"),
                "block_id": block.get("block_id", ""),
                "action_id": element.get("action_id", ""),
                "value": element.get("value") if element.get("type") == "button" else None,
                "text": _element_label(element),
                "url": element.get("url"),
                "options": options,
                "element": element,
            }
        )
    return targets


def message_targets(message: SlackMessage) -> list[dict[str, Any]]:
    """`button_targets` over a message and its thread replies, numbered as `render_message`."""
    targets = button_targets(message.blocks)
    for reply in message.replies():
        targets.extend(button_targets(reply.blocks, start=len(targets) + 1))
    return targets


# --- walking the blocks ------------------------------------------------------------------


def _interactive(
    blocks: Iterable[dict[str, Any]],
) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    """(block, element) for each numbered element, in reading order."""
    for block in blocks:
        candidates: list[Any] = []
        if block.get("type") == "section":
            candidates = [block.get("accessory")]
        elif block.get("type") == "actions":
            candidates = list(block.get("elements") or [])
        for element in candidates:
            if isinstance(element, dict) and element.get("type") in _NUMBERED_TYPES:
                yield block, element


def _numbers(blocks: Sequence[dict[str, Any]], start: int) -> dict[int, int]:
    return {id(element): n for n, (_, element) in enumerate(_interactive(blocks), start=start)}


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        text = obj.get("text")
        return text if isinstance(text, str) else ""
    return obj if isinstance(obj, str) else ""


def _options_of(element: dict[str, Any]) -> list[dict[str, Any]]:
    options = [entry for entry in element.get("options") or [] if isinstance(entry, dict)]
    for group in element.get("option_groups") or []:
        if isinstance(group, dict):
            options.extend(e for e in group.get("options") or [] if isinstance(e, dict))
    return options


def _element_label(element: dict[str, Any]) -> str:
    kind = element.get("type")
    if kind == "button":
        return _text_of(element.get("text"))
    if kind == "overflow":
        return "…"
    initial = element.get("initial_option")
    if isinstance(initial, dict):
        return _text_of(initial.get("text"))
    initial_many = element.get("initial_options")
    if isinstance(initial_many, list) and initial_many:
        return ", ".join(_text_of(entry.get("text")) for entry in initial_many)
    return _text_of(element.get("placeholder")) or "Choose"


def _clean(text: str) -> str:
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\t", "    "))


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _cell_width(text: str) -> int:
    width = 0
    for char in text:
        if unicodedata.combining(char) or char in "\u200d\ufe0e\ufe0f":
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _spans_width(spans: Iterable[Span]) -> int:
    return sum(_cell_width(text) for text, _ in spans)


# --- rendering ---------------------------------------------------------------------------


@dataclass
class _Word:
    """Pieces that must stay on one line (a word, or a whole button)."""

    pieces: list[Span]

    @property
    def width(self) -> int:
        return _spans_width(self.pieces)


@dataclass
class _Space:
    piece: Span


class _Break:
    pass


_Token = _Word | _Space | _Break


class _Renderer:
    def __init__(self, *, color: bool, width: int, numbers: dict[int, int]) -> None:
        self.color = color
        self.width = max(width, _MIN_WIDTH)
        self.numbers = numbers

    # blocks

    def blocks(self, blocks: Sequence[dict[str, Any]]) -> list[str]:
        label_columns = self._label_columns(blocks)
        lines: list[str] = []
        for index, block in enumerate(blocks):
            lines.extend(self.block(block, label_columns.get(index, 0)))
        return lines

    def block(self, block: dict[str, Any], label_column: int) -> list[str]:
        kind = block.get("type")
        if kind == "header":
            return self.header(_text_of(block.get("text")))
        if kind == "section":
            return self.section(block, label_column)
        if kind == "context":
            return self.context(block)
        if kind == "divider":
            return [self.emit([(_RULE * self.width, frozenset({"dim"}))])]
        if kind == "actions":
            return self.atoms([self.element_atom(e) for e in block.get("elements") or []])
        if kind == "image":
            return self.image(block)
        if kind == "input":
            return self.input(block)
        if kind == "rich_text":
            return self.rich_text(block)
        return [self.emit([(f"[{kind} block]", frozenset({"dim"}))])]

    def header(self, text: str) -> list[str]:
        bold = frozenset({"bold"})
        wrapped = self.wrap(self.tokens([(_clean(text), bold)]), self.width, self.width)
        lines = [self.emit(line) for line in wrapped]
        if not self.color:
            longest = max((_spans_width(line) for line in wrapped), default=0)
            lines.append(_RULE * max(1, min(longest, self.width)))
        return lines

    def section(self, block: dict[str, Any], label_column: int) -> list[str]:
        lines: list[str] = []
        if isinstance(block.get("text"), dict):
            lines.extend(self.text_object(block["text"]))
        fields = [f for f in block.get("fields") or [] if isinstance(f, dict)]
        for field in fields:
            lines.extend(self.field(field, label_column))
        accessory = block.get("accessory")
        if isinstance(accessory, dict):
            lines.extend(self.atoms([self.element_atom(accessory)]))
        return lines

    def field(self, field: dict[str, Any], label_column: int) -> list[str]:
        label, value = self._split_field(field)
        label_width = _spans_width(label)
        value_width = self.width - label_column - 2
        indent: list[Span] = [(" " * (label_column + 2), _PLAIN)] if label_column else []
        if label_width > label_column or value_width < _MIN_WIDTH // 2:
            # An outsized label: on a line of its own, the value indented below it.
            lines = [
                self.emit(line) for line in self.wrap(self.tokens(label), self.width, self.width)
            ]
            indent = [("  ", _PLAIN)]
            value_lines = self.mrkdwn_lines(value, self.width - 2, self.width - 2, _PLAIN)
            return lines + [self.emit(indent + line) for line in value_lines]
        pad: list[Span] = [(" " * (label_column - label_width + 2), _PLAIN)] if label_column else []
        value_lines = self.mrkdwn_lines(value, value_width, value_width, _PLAIN) or [[]]
        lines = [self.emit(label + pad + value_lines[0])]
        lines.extend(self.emit(indent + line) for line in value_lines[1:])
        return lines

    def context(self, block: dict[str, Any]) -> list[str]:
        dim = frozenset({"dim"})
        spans: list[Span] = []
        for element in block.get("elements") or []:
            if not isinstance(element, dict):
                continue
            if spans:
                spans.append(("  ", dim))
            if element.get("type") == "image":
                spans.append((f"[image: {_clean(str(element.get('alt_text', '')))}]", dim))
            elif element.get("type") == "plain_text":
                spans.append((_clean(_text_of(element)), dim))
            else:
                spans.extend(self.inline(_clean(_text_of(element)).replace("\n", " "), dim))
        if self.color:
            wrapped = self.wrap(self.tokens(spans), self.width, self.width)
            return [self.emit(line) for line in wrapped]
        first, rest = _CONTEXT_PREFIX, " " * len(_CONTEXT_PREFIX)
        room = self.width - len(first)
        wrapped = self.wrap(self.tokens(spans), room, room)
        return [
            self.emit([(first if index == 0 else rest, _PLAIN), *line])
            for index, line in enumerate(wrapped)
        ]

    def image(self, block: dict[str, Any]) -> list[str]:
        alt = _clean(str(block.get("alt_text", ""))) or "image"
        title = _clean(_text_of(block.get("title")))
        label = f"[image: {alt}]" + (f" {title}" if title and title != alt else "")
        return self.atoms([_Word([(label, frozenset({"dim"}))])])

    def input(self, block: dict[str, Any]) -> list[str]:
        label = _clean(_text_of(block.get("label")))
        if block.get("optional"):
            label += " (optional)"
        lines = [self.emit([(label, frozenset({"bold"}))])]
        element = block.get("element")
        if isinstance(element, dict):
            lines.append(self.emit([("  ", _PLAIN), *self.input_atom(element).pieces]))
        hint = _clean(_text_of(block.get("hint")))
        if hint:
            lines.extend(self.context({"elements": [{"type": "plain_text", "text": hint}]}))
        return lines

    def rich_text(self, block: dict[str, Any]) -> list[str]:
        lines: list[str] = []
        for element in block.get("elements") or []:
            if not isinstance(element, dict):
                continue
            kind = element.get("type")
            if kind == "rich_text_preformatted":
                text = "".join(self._rich_inline_text(element.get("elements") or []))
                lines.extend(self.emit(line) for line in self.code_lines(text, _PLAIN))
            elif kind == "rich_text_list":
                ordered = element.get("style") == "ordered"
                items = [item for item in element.get("elements") or [] if isinstance(item, dict)]
                for number, item in enumerate(items, start=1):
                    bullet = f"{number}. " if ordered else "• "
                    spans = self.rich_spans(item.get("elements") or [])
                    room = self.width - len(bullet)
                    for index, line in enumerate(self.wrap(self.tokens(spans), room, room)):
                        prefix = bullet if index == 0 else " " * len(bullet)
                        lines.append(self.emit([(prefix, _PLAIN), *line]))
            else:
                prefix = _QUOTE_PREFIX if kind == "rich_text_quote" else ""
                spans = self.rich_spans(element.get("elements") or [])
                room = self.width - len(prefix)
                for line in self.wrap(self.tokens(spans), room, room):
                    lines.append(self.emit([(prefix, _PLAIN), *line] if prefix else line))
        return lines

    def rich_spans(self, elements: Sequence[Any]) -> list[Span]:
        spans: list[Span] = []
        for element in elements:
            if not isinstance(element, dict):
                continue
            flags = element.get("style")
            style_flags: dict[str, Any] = flags if isinstance(flags, dict) else {}
            style = frozenset(
                name for name in ("bold", "italic", "strike", "code") if style_flags.get(name)
            )
            spans.append((self._rich_text(element), style))
        return spans

    def _rich_inline_text(self, elements: Sequence[Any]) -> list[str]:
        return [self._rich_text(e) for e in elements if isinstance(e, dict)]

    @staticmethod
    def _rich_text(element: dict[str, Any]) -> str:
        kind = element.get("type")
        if kind == "text":
            return _clean(str(element.get("text", "")))
        if kind == "link":
            url = _clean(str(element.get("url", "")))
            label = _clean(str(element.get("text", "")))
            return f"{label} ({url})" if label and label != url else url
        if kind == "user":
            return f"@{_clean(str(element.get('user_id', '')))}"
        if kind == "channel":
            return f"#{_clean(str(element.get('channel_id', '')))}"
        if kind == "usergroup":
            return f"@{_clean(str(element.get('usergroup_id', '')))}"
        if kind == "broadcast":
            return f"@{_clean(str(element.get('range', 'here')))}"
        if kind == "emoji":
            return f":{_clean(str(element.get('name', '')))}:"
        return _clean(str(element.get("text", "")))

    # elements

    def element_atom(self, element: Any) -> _Word:
        if not isinstance(element, dict):
            return _Word([("[?]", _PLAIN)])
        kind = element.get("type")
        number = self.numbers.get(id(element))
        label = _clean(_element_label(element))
        if kind == "image":
            return _Word([(f"[image: {_clean(str(element.get('alt_text', '')))}]", _PLAIN)])
        if number is None:
            return self.input_atom(element)
        if kind == "button":
            style = {"danger": frozenset({"bold", "red"}), "primary": frozenset({"bold", "green"})}
            mark = " ↗" if element.get("url") else ""
            text = f"[{number}: {label}{mark}]"
            return _Word([(text, style.get(str(element.get("style")), frozenset({"bold"})))])
        return _Word([(f"[{number}: {label} ▾]", frozenset({"bold"}))])

    def input_atom(self, element: dict[str, Any]) -> _Word:
        kind = str(element.get("type"))
        placeholder = _clean(_text_of(element.get("placeholder")))
        if kind == "plain_text_input":
            initial = _clean(str(element.get("initial_value") or "")).replace("\n", " ")
            shown = initial or placeholder
            box = "text box" + (", several lines" if element.get("multiline") else "")
            return _Word([(f"[{box}: {shown}]" if shown else f"[{box}]", _PLAIN)])
        if kind in ("datepicker", "timepicker", "datetimepicker"):
            initial = element.get("initial_date") or element.get("initial_time") or ""
            shown = _clean(str(initial)) or placeholder
            return _Word([(f"[{kind.removesuffix('picker')}: {shown}]", _PLAIN)])
        if kind in ("checkboxes", "radio_buttons"):
            chosen = {
                entry.get("value")
                for entry in element.get("initial_options") or [element.get("initial_option")]
                if isinstance(entry, dict)
            }
            marks = ("☑", "☐") if kind == "checkboxes" else ("◉", "○")
            choices = " ".join(
                f"{marks[0] if entry.get('value') in chosen else marks[1]} "
                f"{_clean(_text_of(entry.get('text')))}"
                for entry in _options_of(element)
            )
            return _Word([(f"[{choices}]", _PLAIN)])
        label = _clean(_element_label(element))
        return _Word([(f"[{label} ▾]", _PLAIN)])

    def atoms(self, words: Sequence[_Word]) -> list[str]:
        tokens: list[_Token] = []
        for word in words:
            if tokens:
                tokens.append(_Space((" ", _PLAIN)))
            tokens.append(word)
        return [self.emit(line) for line in self.wrap(tokens, self.width, self.width)]

    # mrkdwn

    def text_object(self, obj: dict[str, Any]) -> list[str]:
        if obj.get("type") == "plain_text":
            spans = [(_clean(_text_of(obj)), _PLAIN)]
            return [
                self.emit(line) for line in self.wrap(self.tokens(spans), self.width, self.width)
            ]
        return self.mrkdwn_block(_text_of(obj))

    def mrkdwn_block(self, text: str) -> list[str]:
        return [self.emit(line) for line in self.mrkdwn_lines(text, self.width, self.width, _PLAIN)]

    def mrkdwn_lines(
        self, text: str, first_width: int, rest_width: int, base: Style
    ) -> list[list[Span]]:
        """Styled lines of `text`: the first at most `first_width` wide, the others
        `rest_width`."""
        text = _clean(text)
        lines: list[list[Span]] = []
        position = 0
        segments: list[tuple[bool, str]] = []
        for fence in _FENCE.finditer(text):
            segments.append((False, text[position : fence.start()]))
            segments.append((True, fence.group(1)))
            position = fence.end()
        segments.append((False, text[position:]))
        for index, (is_code, segment) in enumerate(segments):
            if is_code:
                lines.extend(self.code_lines(_unescape(segment), base))
                continue
            if index > 0:
                segment = segment.removeprefix("\n")
            if index < len(segments) - 1:
                segment = segment.removesuffix("\n")
            if not segment and (index > 0 or len(segments) > 1):
                continue
            for raw_line in segment.split("\n"):
                prefix: list[Span] = []
                quote = re.match(r"^(?:&gt;|>)\s?", raw_line)
                if quote is not None:
                    prefix = [(_QUOTE_PREFIX, base | {"dim"})]
                    raw_line = raw_line[quote.end() :]
                first = first_width if not lines else rest_width
                inset = len(_QUOTE_PREFIX) if prefix else 0
                bullet = _BULLET.match(raw_line)
                hang = len(bullet.group()) if bullet else 0
                spans = self.inline(raw_line, base)
                wrapped = self.wrap(self.tokens(spans), first - inset, rest_width - inset - hang)
                hanging: list[Span] = [(" " * hang, _PLAIN)] if hang else []
                for number, line in enumerate(wrapped):
                    lines.append(prefix + (hanging if number else []) + line)
        return lines

    def code_lines(self, text: str, base: Style) -> list[list[Span]]:
        style = base | {"code"}
        room = max(1, self.width - len(_CODE_INDENT))
        lines: list[list[Span]] = []
        for line in text.strip("\n").split("\n"):
            chunks = _hard_split(line, room) or [""]
            lines.extend([(_CODE_INDENT, _PLAIN), (chunk, style)] for chunk in chunks)
        return lines

    def inline(self, text: str, base: Style) -> list[Span]:
        spans: list[Span] = []
        position = 0
        for match in _INLINE.finditer(text):
            if match.start() > position:
                spans.append((_unescape(text[position : match.start()]), base))
            found = match.group()
            kind = match.lastgroup
            if kind == "code":
                body = _unescape(found[1:-1])
                spans.append((body if self.color else f"`{body}`", base | {"code"}))
            elif kind == "token":
                spans.extend(self.token(found[1:-1], base))
            else:
                style = {"bold": "bold", "italic": "italic", "strike": "strike"}[str(kind)]
                spans.extend(self.inline(found[1:-1], base | {style}))
            position = match.end()
        if position < len(text):
            spans.append((_unescape(text[position:]), base))
        return spans

    def token(self, body: str, base: Style) -> list[Span]:
        target, _, label = body.partition("|")
        label = _unescape(label)
        if target.startswith("@"):
            return [("@" + (label.removeprefix("@") or target[1:]), base | {"bold"})]
        if target.startswith("#"):
            return [("#" + (label.removeprefix("#") or target[1:]), base | {"bold"})]
        if target.startswith("!"):
            name = target[1:]
            if name.startswith("subteam^"):
                return [(label or "@" + name.split("^", 1)[1], base | {"bold"})]
            if name.split("^", 1)[0] in ("here", "channel", "everyone"):
                return [("@" + name.split("^", 1)[0], base | {"bold"})]
            return [(label or name, base)]
        url = _unescape(target)
        if label and label != url:
            return [(label, base | {"underline"}), (f" ({url})", base | {"dim"})]
        return [(url, base | {"underline"})]

    # layout

    def tokens(self, spans: Iterable[Span]) -> list[_Token]:
        tokens: list[_Token] = []
        for text, style in spans:
            for match in _PIECES.finditer(text):
                piece = match.group()
                if piece == "\n":
                    tokens.append(_Break())
                elif piece.isspace():
                    tokens.append(_Space((piece, style)))
                elif tokens and isinstance(tokens[-1], _Word):
                    tokens[-1].pieces.append((piece, style))
                else:
                    tokens.append(_Word([(piece, style)]))
        return tokens

    def wrap(self, tokens: Sequence[_Token], first_width: int, rest_width: int) -> list[list[Span]]:
        """Greedy word wrap; a word wider than the line is cut; spaces at a soft break go."""
        first_width, rest_width = max(1, first_width), max(1, rest_width)
        lines: list[list[Span]] = []
        line: list[Span] = []
        used = 0
        room = first_width
        pending: Span | None = None
        fresh = True  # at the start of a hard line: leading spaces are kept

        def flush() -> None:
            nonlocal line, used, room, pending
            lines.append(line)
            line, used, room, pending = [], 0, rest_width, None

        for token in tokens:
            if isinstance(token, _Break):
                flush()
                fresh = True
            elif isinstance(token, _Space):
                if line or fresh:
                    pending = (pending[0] + token.piece[0], pending[1]) if pending else token.piece
            else:
                gap = _cell_width(pending[0]) if pending else 0
                if line and used + gap + token.width > room:
                    flush()
                    fresh = False
                    gap = 0
                if pending and (line or fresh) and gap:
                    line.append(pending)
                    used += gap
                pending = None
                fresh = False
                if used + token.width <= room:
                    line.extend(token.pieces)
                    used += token.width
                    continue
                for text, style in token.pieces:
                    for char in text:
                        width = _cell_width(char)
                        if used + width > room and line:
                            flush()
                        line.append((char, style))
                        used += width
        if line or not lines:
            lines.append(line)
        return lines

    def emit(self, spans: Sequence[Span]) -> str:
        merged: list[Span] = []
        for text, style in spans:
            if merged and merged[-1][1] == style:
                merged[-1] = (merged[-1][0] + text, style)
            elif text:
                merged.append((text, style))
        if not self.color:
            return "".join(text for text, _ in merged).rstrip()
        while merged and not merged[-1][0].strip():
            merged.pop()
        if merged:
            last_text, last_style = merged[-1]
            merged[-1] = (last_text.rstrip(), last_style)
        out: list[str] = []
        for text, style in merged:
            codes = sorted({_SGR[name] for name in style if name in _SGR}, key=int)
            out.append(f"\x1b[{';'.join(codes)}m{text}{_RESET}" if codes else text)
        return "".join(out)

    # fields

    def _split_field(self, field: dict[str, Any]) -> tuple[list[Span], str]:
        text = _clean(_text_of(field))
        head, newline, rest = text.partition("\n")
        if not newline:
            return [], text
        if field.get("type") == "plain_text":
            return [(head, frozenset({"bold"}))], rest
        return self.inline(head, _PLAIN), rest

    def _label_columns(self, blocks: Sequence[dict[str, Any]]) -> dict[int, int]:
        """One label column for each run of consecutive sections with fields."""
        columns: dict[int, int] = {}
        run: list[int] = []
        widest = 0

        def close() -> None:
            for index in run:
                columns[index] = min(widest, _MAX_LABEL_COLUMN)

        for index, block in enumerate(blocks):
            fields = block.get("fields") if block.get("type") == "section" else None
            if not fields:
                close()
                run, widest = [], 0
                continue
            if block.get("text") is not None and run:
                close()
                run, widest = [], 0
            run.append(index)
            for field in fields:
                if isinstance(field, dict):
                    label, _ = self._split_field(field)
                    width = _spans_width(label)
                    if width <= _MAX_LABEL_COLUMN:
                        widest = max(widest, width)
        close()
        return columns


def _hard_split(text: str, width: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    used = 0
    for char in text:
        char_width = _cell_width(char)
        if used + char_width > width and current:
            chunks.append(current)
            current, used = "", 0
        current += char
        used += char_width
    if current:
        chunks.append(current)
    return chunks
