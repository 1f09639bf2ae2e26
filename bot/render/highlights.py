"""The highlights in Block Kit: the weekly digest (top N, the rest in its thread), the
`/highlights` week lists, and stats.

Excerpts come from users: they are escaped here (no mention, broadcast or link survives) and
dots inside domain names get a zero-width space, so `example.com` is not turned into a link
either. Authors are shown by name, never mentioned, so nobody is pinged by a digest.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.highlights.digest import ChannelGroup, Digest
from bot.highlights.models import Highlight, Names
from bot.highlights.stats import Stats, week_spans
from bot.mrkdwn import ZERO_WIDTH_SPACE, and_more, bold, channel_mention, escape, link
from bot.render.blocks import Message
from bot.slack_message import SlackMessage

EN_DASH = "\u2013"
_DOMAIN_DOT = re.compile(r"(?<=[A-Za-z0-9-])\.(?=[A-Za-z]{2,})")
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)")


def neutral(text: str) -> str:
    """User text as inert mrkdwn: escaped, and no domain or URL left for Slack to link."""
    safe = escape(text)
    safe = _SCHEME.sub(lambda m: m.group(1) + ":" + ZERO_WIDTH_SPACE, safe)
    return _DOMAIN_DOT.sub("." + ZERO_WIDTH_SPACE, safe)


def _day(at: datetime, zone: ZoneInfo) -> str:
    local = at.astimezone(zone)
    return f"{local:%a} {local.day} {local:%b %Y}"


def span(digest: Digest, zone: ZoneInfo) -> str:
    return f"{_day(digest.week.start, zone)} {EN_DASH} {_day(digest.week.end, zone)}"


def entry(h: Highlight, names: Names, emoji: str) -> str:
    who = bold(escape(names.person(h.author)))
    quote = f"“{neutral(h.excerpt)}”" if h.excerpt else "_(no text)_"
    where = f" · {link(h.permalink, 'open')}" if h.permalink else ""
    return f"*{len(h.reactors)}* :{emoji}: {who}: {quote}{where}"


def _groups(message: Message, groups: tuple[ChannelGroup, ...], names: Names, emoji: str) -> None:
    for group in groups:
        message.section(bold(channel_mention(group.channel)))
        message.lines([entry(h, names, emoji) for h in group.entries], bullet="")


def totals(digest: Digest, emoji: str) -> str:
    n = digest.total
    return (
        f":{emoji}: {n} highlight{'s' if n != 1 else ''} in {digest.channels} "
        f"channel{'s' if digest.channels != 1 else ''} · {digest.reactions} reactions from "
        f"{digest.people} {'person' if digest.people == 1 else 'people'}"
    )


def render_digest(
    digest: Digest, names: Names, *, emoji: str, zone: ZoneInfo, title: str = "Highlights"
) -> tuple[SlackMessage, list[SlackMessage]]:
    """The digest message and the thread replies holding the rest (maybe none)."""
    when = span(digest, zone)
    message = Message(f"{title}, {when}: {digest.total} highlights").header(
        f":{emoji}: {title}, {when}"
    )
    if digest.empty:
        message.section(
            f"A quiet week: no highlights this time. Spotted something inspiring? "
            f"React to it with :{emoji}:."
        )
        return message.build(), []
    message.context(totals(digest, emoji))
    _groups(message, digest.top, names, emoji)
    replies: list[SlackMessage] = []
    if digest.rest:
        message.context(and_more(digest.rest_count, "in the thread"))
        rest = Message(f"{title}, {when}: the other {digest.rest_count}")
        _groups(rest, digest.rest, names, emoji)
        built = rest.build()
        replies = [built, *built.replies()]
    built_main = message.build()
    # Whatever did not fit in the digest message itself also goes to the thread, first.
    return built_main, [*built_main.replies(), *replies]


def render_week(
    digest: Digest, names: Names, *, emoji: str, zone: ZoneInfo, title: str
) -> SlackMessage:
    """One message for `/highlights` (this week so far, last week): everything, ranked."""
    when = span(digest, zone)
    message = Message(f"{title}: {digest.total} highlights").header(f":{emoji}: {title}")
    message.context(when)
    if digest.empty:
        message.section(f"No highlights yet. React with :{emoji}: to what inspires you.")
        return message.build()
    message.context(totals(digest, emoji))
    _groups(message, digest.top + digest.rest, names, emoji)
    return message.build()


def render_stats(
    stats: Stats, names: Names, *, emoji: str, zone: ZoneInfo, now: datetime | None = None
) -> SlackMessage:
    message = Message(f"Highlights: {stats.total} in all").header(f":{emoji}: Highlight stats")
    if stats.total == 0 or stats.first_at is None:
        message.section(f"No highlights recorded yet. React with :{emoji}: to what inspires you.")
        return message.build()
    since = stats.first_at.astimezone(zone)
    noun = "highlight" if stats.total == 1 else "highlights"
    message.section(
        f"{bold(f'{stats.total:,}')} {noun} since {since:%Y-%m}, {stats.per_week:.1f} a week"
    )
    # Each week by its days, as the chart draws it: "04 Dec: 9" read as the week starting on
    # 4 Dec, whose highlights had not happened yet.
    recent = week_spans(stats.weeks)[-8:]
    message.fields(
        [
            (
                "Top channels",
                "\n".join(f"{channel_mention(c)}: {n}" for c, n in stats.top_channels),
            ),
            (
                "Top authors",
                "\n".join(f"{escape(names.person(u))}: {n}" for u, n in stats.top_authors),
            ),
            (
                "Last weeks",
                "\n".join(
                    f"{start.astimezone(zone):%d %b} to {end.astimezone(zone):%d %b}: {n}"
                    + (" so far" if now is not None and end > now else "")
                    for start, end, n in reversed(recent)
                ),
            ),
        ]
    )
    message.context("The chart of every week follows in the thread.")
    return message.build()
