"""The highlights service: record reactions, keep excerpts current, read weeks and stats.

Takes its ports (a HighlightStore, a Directory) and returns models; the listeners in
handlers/highlights.py and the digest runner call it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from bot.highlights import privacy
from bot.highlights.config import HighlightsConfig
from bot.highlights.digest import Digest, build_digest
from bot.highlights.excerpt import excerpt
from bot.highlights.models import ChannelInfo, Highlight, MessageInfo, Names, Reaction
from bot.highlights.ports import Directory, HighlightStore, Reacted
from bot.highlights.rules import is_tracked
from bot.highlights.schedule import Week
from bot.highlights.stats import Stats, build_stats

_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


class Outcome(StrEnum):
    STORED = "stored"
    DUPLICATE = "duplicate"
    NOT_TRACKED = "not_tracked"  # another emoji
    CHANNEL = "channel"  # a DM, a group DM, an excluded or unreadable channel
    SELF = "self"  # the author's own reaction
    BOT = "bot"  # a bot reacting, or a bot's message
    GONE = "gone"  # the message was deleted


@dataclass(frozen=True)
class Recorded:
    outcome: Outcome
    reacted: Reacted | None = None

    @property
    def needs_enrich(self) -> bool:
        return self.reacted is not None and self.reacted.created


@dataclass
class Highlights:
    store: HighlightStore
    directory: Directory
    cfg: HighlightsConfig
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    # recording -----------------------------------------------------------------------------

    async def record(self, r: Reaction, *, first_tagged_at: datetime | None = None) -> Recorded:
        """Applies one reaction; raises when a store or Slack failure deserves a retry.

        `first_tagged_at` is for the backfill, which knows when a message was posted but not
        when it was first tagged: the post's time stands in for it."""
        cfg = self.cfg
        if not is_tracked(r.emoji, cfg.emoji):
            return Recorded(Outcome.NOT_TRACKED)
        if r.channel in cfg.excluded_channels:
            return Recorded(Outcome.CHANNEL)
        if r.author and r.user == r.author and not cfg.count_own_reactions:
            return Recorded(Outcome.SELF)
        if not privacy.recordable(await self.directory.channel(r.channel)):
            return Recorded(Outcome.CHANNEL)
        reactor = await self.directory.person(r.user)
        if reactor is None or reactor.is_bot:
            return Recorded(Outcome.BOT)
        if r.author and not cfg.include_bot_messages:
            author = await self.directory.person(r.author)
            if author is not None and author.is_bot:
                return Recorded(Outcome.BOT)
        done = await self.store.react(
            r, threshold=cfg.threshold, now=self.clock(), first_tagged_at=first_tagged_at
        )
        if done.duplicate:
            return Recorded(Outcome.DUPLICATE, done)
        if done.gone:
            return Recorded(Outcome.GONE, done)
        return Recorded(Outcome.STORED, done)

    async def name_of_mentions(self, text: str) -> dict[str, str]:
        ids = set(_MENTION.findall(text))
        people = await asyncio.gather(*(self.directory.person(u) for u in ids))
        return {p.id: p.name for p in people if p is not None}

    async def excerpt_of(self, text: str) -> str:
        names = await self.name_of_mentions(text)
        return excerpt(text, self.cfg.excerpt_chars, names.get)

    async def enrich(self, team: str, channel: str, ts: str) -> bool:
        """Reads the message once: excerpt, thread, author, permalink. False if unreadable."""
        msg = await self.directory.message(channel, ts)
        if msg is None:
            return False
        return await self.enrich_from(team, msg)

    async def enrich_from(self, team: str, msg: MessageInfo) -> bool:
        """As `enrich`, with the message already at hand (the backfill read it)."""
        if msg.is_bot and not self.cfg.include_bot_messages:
            await self.store.delete(team, msg.channel, msg.ts)
            return False
        link = await self.directory.permalink(msg.channel, msg.ts)
        return await self.store.enrich(
            team,
            msg.channel,
            msg.ts,
            thread_ts=msg.thread_ts if msg.thread_ts != msg.ts else None,
            author=msg.author,
            excerpt=await self.excerpt_of(msg.text),
            permalink=link or "",
        )

    async def edited(self, team: str, channel: str, ts: str, text: str, edited_ts: str) -> bool:
        if await self.store.get(team, channel, ts) is None:
            return False  # most edits are of messages nobody reacted to: nothing to read
        return await self.store.edit(team, channel, ts, await self.excerpt_of(text), edited_ts)

    async def deleted(self, team: str, channel: str, ts: str) -> bool:
        return await self.store.delete(team, channel, ts)

    async def set_opt_out(self, team: str, user: str, out: bool) -> None:
        await self.store.set_opt_out(team, user, out)

    # reading -------------------------------------------------------------------------------

    async def channels(self, ids: Iterable[str]) -> dict[str, ChannelInfo | None]:
        unique = sorted(set(ids))
        found = await asyncio.gather(*(self.directory.channel(c) for c in unique))
        return dict(zip(unique, found, strict=True))

    async def _complete(self, team: str, hs: list[Highlight]) -> list[Highlight]:
        """Records whose message was never read (Slack was down then) are read now."""
        out: list[Highlight] = []
        for h in hs:
            if not h.permalink and await self.enrich(team, h.channel, h.ts):
                h = await self.store.get(team, h.channel, h.ts) or h
            out.append(h)
        return out

    async def visible(
        self, team: str, hs: list[Highlight], audience: str, *, listing: bool = True
    ) -> list[Highlight]:
        opted = await self.store.opted_out(team)
        infos = await self.channels(h.channel for h in hs)
        return [
            h
            for h in hs
            if privacy.shown(h, infos.get(h.channel), audience, self.cfg, opted, listing=listing)
        ]

    async def names(self, people: Iterable[str], channels: Iterable[str]) -> Names:
        people_ids = sorted(set(people))
        found = await asyncio.gather(*(self.directory.person(u) for u in people_ids))
        infos = await self.channels(channels)
        return Names(
            people={p.id: p.name for p in found if p is not None},
            channels={c: i.name for c, i in infos.items() if i is not None},
        )

    async def digest(
        self, team: str, week: Week, audience: str, *, own_only: bool = False
    ) -> tuple[Digest, Names]:
        """The week's highlights that may be shown in `audience` (with `own_only`, only those
        from `audience` itself: a private channel's own digest)."""
        hs = await self.store.between(team, week.start, week.end)
        if own_only:
            hs = [h for h in hs if h.channel == audience]
        shown = await self._complete(team, await self.visible(team, hs, audience))
        digest = build_digest(shown, week, audience, self.cfg.top_n)
        return digest, await self.names((h.author for h in shown), (h.channel for h in shown))

    async def stats(self, team: str, audience: str) -> tuple[Stats, Names]:
        hs = await self.visible(team, await self.store.index(team), audience, listing=False)
        stats = build_stats(hs, self.clock(), self.cfg.schedule)
        named = await self.names(
            (u for u, _ in stats.top_authors), (c for c, _ in stats.top_channels)
        )
        return stats, named
