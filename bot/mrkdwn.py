"""Slack mrkdwn helpers: escaping, visible truncation, code spans and blocks.

Plain text functions, no Block Kit: mrkdwn is the text every answer is written in, so the core
writes its own lines with them too (an alert's thread lines are stored as mrkdwn). The builders
in `bot.render.blocks` take mrkdwn as given, so that a renderer can write `*bold*` and mention
`<@U123>` on purpose. Text that comes from users, backends or a model must go through `escape`
(or `code` / `code_block`) first: after that it can never ping a channel, mention a user, or
become a link.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "ELLIPSIS",
    "TRUNCATED",
    "and_more",
    "bold",
    "channel_mention",
    "code",
    "code_block",
    "escape",
    "italic",
    "link",
    "text_length",
    "truncate",
    "user_mention",
]

ELLIPSIS = "…"
TRUNCATED = "…(truncated)"

# U+2060 WORD JOINER: invisible, not a line break opportunity, and it stops Slack from
# reading "@here" (with link_names) as a broadcast. The terminal renderer strips it again.
WORD_JOINER = "\u2060"
ZERO_WIDTH_SPACE = "\u200b"
_ZWJ = "\u200d"

_FENCE = "```"
# An "@word" at the start of a word: "@here", "@channel", "@everyone", "@alice". Addresses such
# as "ops@example.com" are left alone because the "@" follows a word character.
_AT_WORD = re.compile(r"(?<![\w.+\-])@(?=\w)")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[A-Za-z]{1,8});")
_SLACK_ID = re.compile(r"[A-Z0-9]{2,40}")


def text_length(text: str) -> int:
    """Length of `text` as counted against Slack's limits (UTF-16 code units, conservative)."""
    if text.isascii():
        return len(text)
    # Astral characters (most emoji) are two UTF-16 units; everything else is one.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def escape(text: str) -> str:
    """Make arbitrary text safe to embed in mrkdwn: no mentions, broadcasts or links.

    `&`, `<` and `>` become entities (so `<!channel>`, `<@U123>` and `<http://x|y>` show as
    typed), and a plain `@here` / `@channel` / `@everyone` / `@name` gets an invisible word
    joiner after the `@`. Not idempotent: escape raw text exactly once.
    """
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _AT_WORD.sub("@" + WORD_JOINER, text)


def truncate(text: str, limit: int, suffix: str = ELLIPSIS, *, mrkdwn: bool = True) -> str:
    """Return `text` if it fits in `limit`, else a prefix of it ending with `suffix`.

    The cut never splits a character, an emoji sequence, or (with `mrkdwn`) an entity such as
    `&amp;` or a `<...>` link/mention; an open code fence is closed again. The result fits in
    `limit` as measured by `text_length`.
    """
    if limit <= 0:
        return ""
    if text_length(text) <= limit:
        return text
    if text_length(suffix) >= limit:
        return _prefix(suffix, limit)
    room = limit - text_length(suffix)
    kept = _safe_prefix(text, room, mrkdwn=mrkdwn)
    if mrkdwn and kept.count(_FENCE) % 2 == 1:
        closing = "\n" + _FENCE
        kept = _safe_prefix(text, room - len(closing), mrkdwn=mrkdwn)
        if kept.count(_FENCE) % 2 == 1:
            return kept + suffix + closing
    return kept + suffix


def and_more(count: int, hint: str = "") -> str:
    """The visible marker for cut lists: "…and 37 more", with an optional hint after a dash."""
    marker = f"{ELLIPSIS}and {count} more"
    return f"{marker} — {hint}" if hint else marker


def code(text: str) -> str:
    """An inline code span showing `text` literally (escaped, on one line, no backticks)."""
    body = escape(text).replace("`", "\u02cb").replace("\r", "").replace("\n", " ")
    return f"`{body}`" if body.strip() else "` `"


def code_block(text: str, limit: int | None = None, *, tail: bool = False) -> str:
    """A fenced code block showing `text` literally, at most `limit` long if given.

    With `tail`, a cut keeps the end of the text (the interesting part of a log) instead.
    """
    body = escape(text).replace(_FENCE, "`" + ZERO_WIDTH_SPACE + "``").rstrip("\n") or " "
    wrapped = f"{_FENCE}\n{body}\n{_FENCE}"
    if limit is None or text_length(wrapped) <= limit:
        return wrapped
    room = limit - text_length(f"{_FENCE}\n\n{_FENCE}")
    if tail:
        body = TRUNCATED + "\n" + _safe_suffix(body, room - text_length(TRUNCATED) - 1)
    else:
        body = truncate(body, room, TRUNCATED)
    return f"{_FENCE}\n{body}\n{_FENCE}"


def bold(text: str) -> str:
    """`*text*` (mrkdwn in, mrkdwn out). Slack needs the markers against non-space."""
    stripped = text.strip()
    return f"*{stripped}*" if stripped else text


def italic(text: str) -> str:
    """`_text_` (mrkdwn in, mrkdwn out)."""
    stripped = text.strip()
    return f"_{stripped}_" if stripped else text


def link(url: str, label: str | None = None) -> str:
    """A link to `url` showing `label` (plain text, escaped here)."""
    safe_url = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    if not label:
        return f"<{safe_url}>"
    return f"<{safe_url}|{escape(label)}>"


def user_mention(user_id: str) -> str:
    """A deliberate mention of one user (`<@U123>`); anything but a Slack id is escaped."""
    return f"<@{user_id}>" if _SLACK_ID.fullmatch(user_id) else escape(f"@{user_id}")


def channel_mention(channel_id: str) -> str:
    """A link to a channel (`<#C123>`); anything but a Slack id is escaped."""
    return f"<#{channel_id}>" if _SLACK_ID.fullmatch(channel_id) else escape(f"#{channel_id}")


# --- cutting safely ---------------------------------------------------------------------


def _prefix(text: str, limit: int) -> str:
    """The longest prefix of `text` with `text_length` <= `limit` (plain code-point cut)."""
    head = text[:limit]
    if text_length(head) <= limit:  # no astral characters in the way: one unit each
        return head
    low, high = 0, len(head)  # text_length(text[:low]) fits, text[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if text_length(text[:middle]) <= limit:
            low = middle
        else:
            high = middle
    return text[:low]


def _safe_prefix(text: str, limit: int, *, mrkdwn: bool) -> str:
    if limit <= 0:
        return ""
    cut = len(_prefix(text, limit))
    cut = _grapheme_boundary(text, cut)
    if mrkdwn:
        cut = _outside_markup(text, cut)
        cut = _grapheme_boundary(text, cut)
    return text[:cut].rstrip()


def _is_extender(char: str) -> bool:
    """True for characters that belong to the character before them."""
    code_point = ord(char)
    return (
        unicodedata.combining(char) != 0
        or char == _ZWJ
        or 0xFE00 <= code_point <= 0xFE0F  # variation selectors
        or 0x1F3FB <= code_point <= 0x1F3FF  # skin tones
        or 0xE0020 <= code_point <= 0xE007F  # tag sequences (subdivision flags)
    )


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _grapheme_boundary(text: str, cut: int) -> int:
    """Move `cut` left until it does not split an emoji sequence or a combining mark."""
    while 0 < cut < len(text):
        if _is_extender(text[cut]) or text[cut - 1] == _ZWJ:
            cut -= 1
            continue
        if _is_regional_indicator(text[cut]) and _is_regional_indicator(text[cut - 1]):
            run = 0
            while cut - run - 1 >= 0 and _is_regional_indicator(text[cut - run - 1]):
                run += 1
            if run % 2 == 1:  # the cut falls inside a flag (a pair of indicators)
                cut -= 1
                continue
        break
    return cut


def _outside_markup(text: str, cut: int) -> int:
    """Move `cut` left so it does not fall inside `&amp;` or a `<...>` token."""
    amp = text.rfind("&", max(0, cut - 10), cut)
    if amp != -1 and ";" not in text[amp:cut]:
        entity = _ENTITY.match(text, amp)
        if entity is not None and entity.end() > cut:
            cut = amp
    opening = text.rfind("<", 0, cut)
    if opening != -1 and ">" not in text[opening:cut] and text.find(">", cut) != -1:
        cut = opening
    return cut


def _safe_suffix(text: str, limit: int) -> str:
    """The longest suffix of `text` that fits in `limit` and starts on a clean boundary."""
    if limit <= 0:
        return ""
    start = len(text) - len(_prefix(text[::-1], limit))
    while start < len(text):
        amp = text.rfind("&", max(0, start - 10), start)
        entity = _ENTITY.match(text, amp) if amp != -1 else None
        if entity is not None and entity.end() > start:
            start = entity.end()
            continue
        if _is_extender(text[start]) or (start > 0 and text[start - 1] == _ZWJ):
            start += 1
            continue
        break
    return text[start:].lstrip()
