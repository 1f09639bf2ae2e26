"""Who may see a highlight where: its security rules, as one pure function.

- A highlight from a public channel may be shown anywhere, unless its channel is excluded, its
  author opted out, or (for listings) the channel is archived or the bot has left it.
- A highlight from a private channel is shown only in that same channel, and only when the
  channel opted in (`private_opt_in`): never in a digest posted elsewhere, never in
  `/highlights` answered elsewhere.
- DMs and group DMs are not recorded at all; should one be found, it is never shown.
- A channel whose visibility cannot be read counts as private: fail closed.
"""

from __future__ import annotations

from collections.abc import Collection

from bot.highlights.config import HighlightsConfig
from bot.highlights.models import ChannelInfo, Highlight, Visibility


def recordable(channel: ChannelInfo | None) -> bool:
    """Reactions are recorded in public and private channels, never in DMs or group DMs."""
    return channel is not None and channel.visibility in (Visibility.PUBLIC, Visibility.PRIVATE)


def shown(
    h: Highlight,
    source: ChannelInfo | None,
    audience: str,
    cfg: HighlightsConfig,
    opted_out: Collection[str],
    *,
    listing: bool = True,
) -> bool:
    """May `h` (from channel `source`) appear in conversation `audience`?

    `listing` is for the digest and the week lists; stats (`listing=False`) still count a
    highlight whose public channel was archived or left, since it stays in history.
    """
    if h.author in opted_out or h.channel in cfg.excluded_channels or source is None:
        return False
    if listing and (source.archived or not source.member):
        return False
    if source.visibility is Visibility.PUBLIC:
        return True
    if source.visibility is Visibility.PRIVATE:
        return audience == h.channel and h.channel in cfg.private_opt_in
    return False
