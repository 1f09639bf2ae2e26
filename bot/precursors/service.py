"""/hw-faults why's service: find the events, read the candidates around them and in ordinary
windows, rank them.

The reads are bounded whatever the fleet size (bot/precursors/ports.py): one for the events,
then one a candidate for the window extremes of the events' nodes and their peers, one a
candidate around the events, and one for the leading candidate on every node now. The
ranking is the pure, synchronous `rank` (bot/precursors/ranking.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from bot.errors import BackendError
from bot.precursors.config import PrecursorsConfig
from bot.precursors.models import Candidate, Event, PrecursorReport, Ranked, Series
from bot.precursors.ports import PrecursorHistory
from bot.precursors.ranking import RankConfig, rank
from bot.precursors.rule import warn_level
from bot.words import count

Progress = Callable[[str], Awaitable[None]]
Compute = Callable[..., Awaitable[Any]]
"""Runs `rank` off the event loop (bot/offload.py: Offload.run)."""

FINE_STEP_S = 60
AROUND_BEFORE = 3
"""The chart shows three lead windows before each event..."""
AROUND_AFTER_S = 300.0
"""...and five minutes after it."""
SAME_EVENT_S = 900.0
"""A recorded occurrence this close to an event the history found on the same node is that
event, seen by the sweep (which sees a reboot a scrape or more after its boot time)."""


async def _quiet(_: str) -> None:
    return None


def pick_peers(names: Sequence[str], exclude: set[str], limit: int) -> tuple[str, ...]:
    """Up to `limit` nodes without an event, spread evenly over the sorted names (the same
    ones for the same fleet): neighbours by name share racks and jobs, so spread, not first."""
    pool = sorted(n for n in names if n not in exclude)
    if len(pool) <= limit:
        return tuple(pool)
    stride = len(pool) / limit
    return tuple(pool[int(i * stride)] for i in range(limit))


def merge_events(found: Sequence[Event], recorded: Sequence[Event]) -> list[Event]:
    """The history's events, and the recorded occurrences (the sweep's fault history, which
    holds every kind the checks find) that are not one of them."""
    out = list(found)
    by_node: dict[str, list[float]] = {}
    for e in found:
        by_node.setdefault(e.node, []).append(e.at.timestamp())
    for e in recorded:
        t = e.at.timestamp()
        if not any(abs(t - x) <= SAME_EVENT_S for x in by_node.get(e.node, ())):
            out.append(e)
            by_node.setdefault(e.node, []).append(t)
    return sorted(out, key=lambda e: (e.at, e.node))


def _leading_around(
    ranked: Ranked, fine: Sequence[Series], events: Sequence[Event]
) -> tuple[Series, ...]:
    nodes = {e.node for e in events}
    return tuple(
        s
        for s in fine
        if s.candidate == ranked.candidate.name and s.part == ranked.part and s.node in nodes
    )


def _rank(
    events: list[Event],
    cfg: PrecursorsConfig,
    fine: list[Series],
    coarse: list[Series],
) -> tuple[list[Ranked], int]:
    rc = RankConfig(
        lead_s=cfg.lead_s, quiet_s=cfg.quiet_s, min_events=cfg.min_events, alpha=cfg.alpha
    )
    return rank(events, cfg.candidate_list(), fine, coarse, rc)


async def find_precursors(
    history: PrecursorHistory,
    kind: str,
    *,
    nodes: Sequence[str] | None,
    fleet: Sequence[str],
    start: datetime,
    end: datetime,
    cfg: PrecursorsConfig | None = None,
    progress: Progress | None = None,
    compute: Compute | None = None,
    recorded: Sequence[Event] = (),
) -> PrecursorReport:
    """What preceded the `kind` events between `start` and `end` (on `nodes`, or anywhere),
    against ordinary windows of the same nodes and of peers from `fleet` (or `nodes`).
    `recorded` are occurrences the fault history kept (any kind the checks find): events
    too, where the history port does not find one of them itself."""
    cfg = cfg or PrecursorsConfig()
    say = progress or _quiet
    await say(f"Looking for {kind} events...")
    events = await _events(history, kind, nodes, start, end, cfg, recorded)
    event_nodes = tuple(sorted({e.node for e in events}))
    peers = pick_peers(nodes if nodes is not None else fleet, set(event_nodes), cfg.peers)
    try:
        reach = await history.reach(start, end)
    except BackendError:
        reach = None  # the answer stands without it
    empty = PrecursorReport(
        kind=kind,
        start=start,
        end=end,
        lead_s=cfg.lead_s,
        events=tuple(events),
        nodes=event_nodes,
        peers=peers,
        ranked=(),
        tried=0,
        thin=len(events) < cfg.min_events,
        min_events=cfg.min_events,
        alpha=cfg.alpha,
        reach=reach,
    )
    if not events:
        return empty
    candidates = cfg.candidate_list()
    await say(
        f"Found {count(len(events), f'{kind} event')} on {count(len(event_nodes), 'node')}; "
        f"reading {count(len(candidates), 'candidate')} on them and "
        f"{count(len(peers), 'peer')}..."
    )
    ranked, tried, fine = await _read_and_rank(
        history, events, candidates, [*event_nodes, *peers], start, end, cfg, say, compute
    )
    seen = {r.candidate.name for r in ranked}
    report = replace(
        empty,
        ranked=tuple(ranked),
        tried=tried,
        missing=tuple(c.name for c in candidates if c.name not in seen),
    )
    leading = report.leading
    if leading is None:
        return report
    return replace(
        report,
        around=_leading_around(leading, fine, events),
        crossing_now=await _crossing_now(history, leading, end, cfg),
    )


async def _read_and_rank(
    history: PrecursorHistory,
    events: list[Event],
    candidates: Sequence[Candidate],
    read: Sequence[str],
    start: datetime,
    end: datetime,
    cfg: PrecursorsConfig,
    say: Progress,
    compute: Compute | None,
) -> tuple[list[Ranked], int, list[Series]]:
    """Every candidate over `read`'s windows (coarse) and around each event (fine), ranked:
    the ranking, how many candidates were tried, and the fine series for the chart."""
    coarse = await history.windows(candidates, nodes=read, start=start, end=end, lead_s=cfg.lead_s)
    before = timedelta(seconds=cfg.lead_s * AROUND_BEFORE)
    after = timedelta(seconds=AROUND_AFTER_S)
    spans = [(e.node, e.at - before, min(end, e.at + after)) for e in events]
    fine = await history.around(candidates, spans, step_s=FINE_STEP_S)
    await say(f"Comparing the {count(len(events), 'lead window')} with the ordinary windows...")
    if compute is None:
        ranked, tried = _rank(events, cfg, fine, coarse)
    else:
        ranked, tried = await compute(_rank, events, cfg, fine, coarse)
    return ranked, tried, fine


async def _events(
    history: PrecursorHistory,
    kind: str,
    nodes: Sequence[str] | None,
    start: datetime,
    end: datetime,
    cfg: PrecursorsConfig,
    recorded: Sequence[Event],
) -> list[Event]:
    """The `kind` events late enough to have a whole lead window, the history port's and the
    recorded ones merged, the newest `cfg.max_events`."""
    lead = timedelta(seconds=cfg.lead_s)
    found = (
        await history.events(kind, nodes=nodes, start=start + lead, end=end)
        if kind in history.kinds()
        else []
    )
    keep = None if nodes is None else set(nodes)
    events = merge_events(
        found,
        [
            e
            for e in recorded
            if e.kind == kind and start + lead <= e.at <= end and (keep is None or e.node in keep)
        ],
    )
    return sorted(events, key=lambda e: e.at)[-cfg.max_events :]


async def _crossing_now(
    history: PrecursorHistory, leading: Ranked, end: datetime, cfg: PrecursorsConfig
) -> tuple[tuple[str, float], ...]:
    """The nodes whose leading signal is past its warning level now, furthest first."""
    now = await history.current(leading.candidate, at=end, lead_s=cfg.lead_s)
    level = warn_level(leading)
    up = leading.candidate.direction == "above"
    crossing = {
        (s.node, s.values[-1])
        for s in now
        if s.part == leading.part
        and s.values
        and (s.values[-1] >= level if up else s.values[-1] <= level)
    }
    return tuple(sorted(crossing, key=lambda nv: (-nv[1] if up else nv[1], nv[0])))
