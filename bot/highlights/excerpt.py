"""A message's text as a short plain excerpt: Slack's markup turned into words, nothing live.

Slack sends `<@U123>`, `<!here>`, `<#C123|general>`, `<!subteam^S1|@ops>`, `<https://x|label>`
and `&amp; &lt; &gt;`. The excerpt keeps what a reader sees (`@Ana`, `@here`, `#general`,
`label`) as plain text; the renderer escapes it once more, so nothing in it can ping anyone or
become a link.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

_TOKEN = re.compile(r"<([^<>]*)>")
_SPACE = re.compile(r"\s+")


def _token(body: str, name_of: Callable[[str], str | None]) -> str:
    target, _, label = body.partition("|")
    if target.startswith("@"):
        uid = target[1:]
        return "@" + (label or name_of(uid) or "someone")
    if target.startswith("#"):
        return "#" + (label or "channel")
    if target.startswith("!subteam^"):
        return label or "@group"
    if target.startswith("!date^"):
        return label or "a date"
    if target.startswith("!"):
        return "@" + target[1:].split("^", 1)[0]
    if label:
        return label
    return re.sub(r"^[a-z]+://", "", target).removeprefix("mailto:")


def plain(text: str, name_of: Callable[[str], str | None] = lambda _: None) -> str:
    """The text a reader sees, on one line, as plain (unescaped) text."""
    replaced = _TOKEN.sub(lambda m: _token(m.group(1), name_of), text)
    return _SPACE.sub(" ", html.unescape(replaced)).strip()


def excerpt(
    text: str, limit: int = 200, name_of: Callable[[str], str | None] = lambda _: None
) -> str:
    """The first `limit` characters of `plain(text)`, cut at a word with "…" when longer."""
    body = plain(text, name_of)
    if len(body) <= limit:
        return body
    cut = body[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"
