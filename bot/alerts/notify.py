"""Notify: the pure planner behind the notifier loop.

Each tick the loop hands `plan` the dirty groups (changed since their message was last
written), and gets back at most one Slack call per channel, never two within a second of each
other in one channel (Slack's rate for posting to a channel). Everything else waits for the
next tick, so several changes of one group coalesce into one `chat.update`.

Above `cfg.storm_groups` open groups in a channel, groups not yet posted are not posted one by
one: a single storm summary lists them and is kept up to date. When the storm passes they are
posted on their own (they stay dirty until then), and the summary is written a last time.

The loop's side of the contract:
- after running a step, set `last_call_at[channel] = now` and clear the dirty mark of the
  step's group (POST, UPDATE) or its pending replies (THREAD_REPLY); a STORM_SUMMARY clears no
  dirty mark but its `text` is the summary's digest: pass it back in `storm_digest[channel]`;
- a dirty group for which `needs_message` is False (resolved before it was ever posted) needs
  no call: forget it;
- after a POST or UPDATE store the group's `drawn` (`drawn(group)`), and after a PAGE the
  page's ts and digest; clear the dirty mark only once no page is stale (`pages.stale`), so a
  big event's thread is rewritten, a reply a second, after its message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from bot.alerts import pages
from bot.alerts.config import AlertsConfig
from bot.alerts.models import AlertGroup

MIN_CALL_INTERVAL = timedelta(seconds=1)
MAX_REPLY_CHARS = 3000


class StepKind(StrEnum):
    POST = "post"
    UPDATE = "update"
    THREAD_REPLY = "thread_reply"
    STORM_SUMMARY = "storm_summary"
    PAGE = "page"
    """Post or rewrite one reply of a big event's per-node detail in its thread."""


@dataclass(frozen=True)
class Step:
    kind: StepKind
    channel: str
    group: AlertGroup | None = None
    groups: tuple[AlertGroup, ...] = ()
    """STORM_SUMMARY: the open groups it lists (empty: the storm is over)."""
    text: str = ""
    """THREAD_REPLY: the reply; STORM_SUMMARY: the digest of what it lists."""
    page: int = 0
    """PAGE: which reply of the thread's per-node detail."""

    @classmethod
    def post(cls, group: AlertGroup) -> Step:
        return cls(StepKind.POST, group.channel, group=group)

    @classmethod
    def update(cls, group: AlertGroup) -> Step:
        return cls(StepKind.UPDATE, group.channel, group=group)

    @classmethod
    def thread_reply(cls, group: AlertGroup, text: str) -> Step:
        return cls(StepKind.THREAD_REPLY, group.channel, group=group, text=text)

    @classmethod
    def page_of(cls, group: AlertGroup, index: int) -> Step:
        return cls(StepKind.PAGE, group.channel, group=group, page=index)

    @classmethod
    def storm_summary(cls, channel: str, groups: Sequence[AlertGroup]) -> Step:
        return cls(StepKind.STORM_SUMMARY, channel, groups=tuple(groups), text=storm_digest(groups))


def needs_message(group: AlertGroup) -> bool:
    """False for a group resolved before it was ever posted: nobody needs to hear of it."""
    return group.ts is not None or not group.resolved


def drawn(group: AlertGroup) -> str:
    """Changes whenever the group's own message must change: its members' states, its claim,
    its silence. (A redraw for the scheduler's sake is asked for by marking the group dirty.)"""
    parts = [f"{a.fingerprint}={a.status.value}" for a in group.alerts] + [
        group.claim.user_id if group.claim else "",
        group.silenced_until.isoformat() if group.silenced_until else "",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def storm_digest(groups: Sequence[AlertGroup]) -> str:
    """Changes whenever what the storm summary shows changes."""
    parts = sorted(f"{g.key.id}:{len(g.firing)}:{g.severity.value}" for g in groups)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16] if parts else ""


def _worst_first(group: AlertGroup) -> tuple[int, datetime, str]:
    return (-group.severity.rank, group.opened_at, group.key.id)


def plan(
    channel_groups: Sequence[AlertGroup],
    now: datetime,
    last_call_at: Mapping[str, datetime],
    cfg: AlertsConfig,
    *,
    open_groups: Sequence[AlertGroup] | None = None,
    replies: Mapping[str, Sequence[str]] | None = None,
    storm_digest_shown: Mapping[str, str] | None = None,
) -> list[Step]:
    """At most one step per channel whose last call is a second or more ago.

    `channel_groups`: the dirty groups (any number of channels; a group id given twice keeps
    its last state). `open_groups`: every open group of those channels, for the storm count
    and summary (default: the open ones among `channel_groups`). `replies`: pending thread
    replies by group id. `storm_digest_shown`: per channel, the digest of the storm summary
    last written ("" or absent: none is shown).

    Priority in a channel: the storm summary when what it lists changed, then new posts (worst
    first), then updates (worst first), then thread replies.
    """
    pending = replies or {}
    shown = storm_digest_shown or {}
    dirty: dict[str, AlertGroup] = {}
    for group in channel_groups:
        if group.channel:
            dirty[group.key.id] = group
    everyone: dict[str, AlertGroup] = {}
    for group in open_groups if open_groups is not None else channel_groups:
        if group.channel and not group.resolved:
            everyone[group.key.id] = group
    for group in dirty.values():  # the dirty state is the newest
        if group.key.id in everyone or not group.resolved:
            everyone[group.key.id] = group
    everyone = {k: g for k, g in everyone.items() if not g.resolved}

    by_id = {**everyone, **dirty}
    channels = sorted({g.channel for g in by_id.values()} | {c for c, d in shown.items() if d})
    steps: list[Step] = []
    for channel in channels:
        last = last_call_at.get(channel)
        if last is not None and now - last < MIN_CALL_INTERVAL:
            continue
        step = _next_step(channel, dirty, everyone, by_id, pending, shown.get(channel, ""), cfg)
        if step is not None:
            steps.append(step)
    return steps


def _next_step(
    channel: str,
    dirty: Mapping[str, AlertGroup],
    everyone: Mapping[str, AlertGroup],
    by_id: Mapping[str, AlertGroup],
    pending: Mapping[str, Sequence[str]],
    shown_digest: str,
    cfg: AlertsConfig,
) -> Step | None:
    open_here = [g for g in everyone.values() if g.channel == channel]
    storm = len(open_here) > cfg.storm_groups
    unposted = sorted((g for g in open_here if g.ts is None), key=_worst_first)
    if storm:
        summary = Step.storm_summary(channel, unposted)
        if summary.text != shown_digest:
            return summary
    elif shown_digest:
        return Step.storm_summary(channel, ())  # the storm is over: say so once

    mine = [g for g in dirty.values() if g.channel == channel and needs_message(g)]
    if not storm:
        posts = sorted((g for g in mine if g.ts is None), key=_worst_first)
        if posts:
            return Step.post(posts[0])
    shown = sorted((g for g in mine if g.ts is not None), key=_worst_first)
    # A message already drawn as its group stands, with thread replies still to write: the
    # replies go next. Any other dirty posted group is redrawn.
    for posted in shown:
        if posted.drawn != drawn(posted):
            return Step.update(posted)
    for posted in shown:
        stale = pages.stale(posted)
        if stale is not None:
            return Step.page_of(posted, stale)
    if shown:
        return Step.update(shown[0])
    for group_id in sorted(pending):
        group = by_id.get(group_id)
        texts = [t for t in pending[group_id] if t.strip()]
        if group is None or group.channel != channel or group.ts is None or not texts:
            continue
        return Step.thread_reply(group, _joined(texts))
    return None


def _joined(texts: Sequence[str]) -> str:
    """Several pending replies of one group as one reply, cut visibly."""
    out: list[str] = []
    used = 0
    for index, text in enumerate(texts):
        if used + len(text) + 1 > MAX_REPLY_CHARS - 40:
            out.append(f"…and {len(texts) - index} more")
            break
        out.append(text)
        used += len(text) + 1
    return "\n".join(out)
