"""Notify: the pure planner behind the notifier loop.

Each tick the loop hands `plan` the dirty groups (changed since their message was last
written), and gets back at most one Slack call per channel, never two within a second of each
other in one channel (Slack's rate for posting to a channel). Everything else waits for the
next tick, so several changes of one group coalesce into one `chat.update`.

Above `cfg.storm_groups` open groups in a channel, groups not yet posted are not posted one by
one: a single storm summary lists every open group and is kept up to date. A big event (firing
on `cfg.storm_own_nodes` nodes or more) is still posted on its own with its thread, worst and
biggest first, at most `cfg.storm_own_events` of them open at once (those posted since the
summary), so the one event that matters keeps its per-node Drain buttons while a flood of big
ones cannot take the channel. When the storm passes the others are posted on their own (they
stay dirty until then; a posted one has its ts and is never posted again), and the summary is
written a last time.

The loop's side of the contract:
- after running a step, set `last_call_at[channel] = now` and clear the dirty mark of the
  step's group (POST, UPDATE) or its pending replies (THREAD_REPLY); a STORM_SUMMARY clears no
  dirty mark but its `text` is the summary's digest: pass it back in `storm_digest[channel]`,
  and the summary's ts in `storm_since[channel]` (what was posted after it counts against
  `cfg.storm_own_events`);
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
from bot.alerts.models import AlertGroup, AlertSource

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
    """Changes whenever what the storm summary shows changes (a group's message posted
    included: the summary then links it)."""
    parts = sorted(f"{g.key.id}:{len(g.firing)}:{g.severity.value}:{g.ts or ''}" for g in groups)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16] if parts else ""


def _worst_first(group: AlertGroup) -> tuple[int, datetime, str]:
    return (-group.severity.rank, group.opened_at, group.key.id)


def firing_nodes(group: AlertGroup) -> int:
    return len({a.node for a in group.firing if a.node})


def _worst_biggest_first(group: AlertGroup) -> tuple[int, int, datetime, str]:
    # The storm summary's order too (worst, then most nodes), so the events it links lead it.
    return (-group.severity.rank, -firing_nodes(group), group.opened_at, group.key.id)


def _posted_since(group: AlertGroup, since: str | None) -> bool:
    """Posted after the storm summary (Slack's ts are epoch seconds, "1700000000.000100")."""
    if group.ts is None or since is None:
        return False
    try:
        return float(group.ts) > float(since)
    except ValueError:
        return False


def storm_own(
    open_here: Sequence[AlertGroup], cfg: AlertsConfig, since: str | None
) -> list[AlertGroup]:
    """In a storm: the events not yet posted that are big enough to be posted on their own
    now, worst and biggest first, within what is left of `cfg.storm_own_events` (big events
    posted since the summary at `since` count; those posted before the storm do not). Without
    `since`, every posted big event counts: the cap then errs on the quiet side."""
    big = [g for g in open_here if firing_nodes(g) >= cfg.storm_own_nodes]
    used = sum(1 for g in big if g.ts is not None and (since is None or _posted_since(g, since)))
    left = max(0, cfg.storm_own_events - used)
    waiting = sorted((g for g in big if g.ts is None), key=_worst_biggest_first)
    return waiting[:left]


def _gathering(open_here: Sequence[AlertGroup], cfg: AlertsConfig, now: datetime) -> bool:
    """A burst is still arriving: an event opened in the channel within `cfg.burst_quiet_s`,
    and the oldest one waiting to be posted has waited less than `cfg.burst_hold_s`. Only
    Alertmanager's events wait: it sends a burst as a webhook a group, where a sweep opens all
    its events in one pass. An event opened "after" now (the wall clock was set back) holds
    nothing: a clock jump is no burst."""
    waiting = [
        g.opened_at
        for g in open_here
        if g.ts is None and any(a.source is AlertSource.ALERTMANAGER for a in g.alerts)
    ]
    if not waiting:
        return False
    since_newest = now - max(g.opened_at for g in open_here)
    quiet = timedelta(seconds=cfg.burst_quiet_s)
    held = now - min(waiting) < timedelta(seconds=cfg.burst_hold_s)
    return timedelta(0) <= since_newest < quiet and held


def plan(
    channel_groups: Sequence[AlertGroup],
    now: datetime,
    last_call_at: Mapping[str, datetime],
    cfg: AlertsConfig,
    *,
    open_groups: Sequence[AlertGroup] | None = None,
    replies: Mapping[str, Sequence[str]] | None = None,
    storm_digest_shown: Mapping[str, str] | None = None,
    storm_since: Mapping[str, str] | None = None,
) -> list[Step]:
    """At most one step per channel whose last call is a second or more ago.

    `channel_groups`: the dirty groups (any number of channels; a group id given twice keeps
    its last state). `open_groups`: every open group of those channels, for the storm count
    and summary (default: the open ones among `channel_groups`). `replies`: pending thread
    replies by group id. `storm_digest_shown`: per channel, the digest of the storm summary
    last written ("" or absent: none is shown). `storm_since`: per channel, the ts of the
    storm summary shown (absent: none known).

    Priority in a channel: the storm summary when what it lists changed, then new posts (worst
    first, once a burst has gathered: `_gathering`; in a storm only the big events of
    `storm_own`), then updates (worst first), then
    thread replies.
    """
    pending = replies or {}
    shown = storm_digest_shown or {}
    since = storm_since or {}
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
        step = _next_step(
            channel,
            dirty,
            everyone,
            by_id,
            pending,
            (shown.get(channel, ""), since.get(channel)),
            cfg,
            now,
        )
        if step is not None:
            steps.append(step)
    return steps


def _next_step(
    channel: str,
    dirty: Mapping[str, AlertGroup],
    everyone: Mapping[str, AlertGroup],
    by_id: Mapping[str, AlertGroup],
    pending: Mapping[str, Sequence[str]],
    storm_shown: tuple[str, str | None],
    cfg: AlertsConfig,
    now: datetime,
) -> Step | None:
    shown_digest, since = storm_shown
    open_here = [g for g in everyone.values() if g.channel == channel]
    storm = len(open_here) > cfg.storm_groups
    if storm:
        # Every open event, the ones posted on their own too (linked), counted in events.
        summary = Step.storm_summary(channel, sorted(open_here, key=_worst_biggest_first))
        if summary.text != shown_digest:
            return summary
    elif shown_digest:
        return Step.storm_summary(channel, ())  # the storm is over: say so once

    mine = [g for g in dirty.values() if g.channel == channel and needs_message(g)]
    if storm:
        own = [g for g in storm_own(open_here, cfg, since) if g.key.id in dirty]
        if own:
            return Step.post(own[0])
    elif not _gathering(open_here, cfg, now):
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
