"""The ranking: which candidate best tells the minutes before a fault from ordinary minutes.

Pure and synchronous (CPU work: run it off the event loop). For each candidate (and part):

1. Each event's lead window is the `lead` before it; its value is the candidate's highest
   (for a falling one, lowest) there, from the fine series read around the events.
2. Ordinary windows are the coarse window extremes of the same nodes at other times and of
   peers, each at least `quiet` away from any event of its node, and, to rule out what moves
   the whole fleet at once (a daily cycle, a fleet-wide job), the peers' windows that end
   within `lead` before each event.
3. Every event's value is tried as the threshold. Each is judged against the least favourable
   of the three references: the gap (the share of events preceded by a crossing minus the
   highest crossing rate, Youden's J) and a one-sided Fisher's exact test (the largest p); the
   one kept is the least likely by chance. A candidate high on the faulty nodes all the time
   crosses as often in their ordinary windows: no gap, no precursor.
4. Its honesty: that p multiplied by every threshold of every candidate tried (Bonferroni),
   a Wilson interval of the share preceded. A claim needs `min_events` events, three
   preceded at least, a corrected p below `alpha`; fewer events say the evidence is thin.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.precursors.models import (
    CONCURRENT,
    PEERS,
    SAME_NODES,
    Candidate,
    Event,
    Ranked,
    Reference,
    Series,
)
from bot.precursors.stats import fisher_greater, wilson

MIN_REFERENCE = 20
"""A reference with fewer windows than this is not compared against: its rate means little."""
MIN_PRECEDED = 3
"""Never a claim from fewer events preceded than this, whatever the p-value."""
MIN_GAP = 0.3
"""A claim needs the share preceded to beat the ordinary rate by this much: a difference a
person could act on, not only one a test can find."""
MAX_GAP_S = 900.0
"""A node silent for longer than this before its event has no lead window read."""
NO_DIFFERENCE_GAP = 0.2
NO_DIFFERENCE_P = 0.2
"""Past this corrected p-value (or below that gap) a candidate showed no difference: noise
alone, with the best of its thresholds picked, makes gaps of 0.3 at an uncorrected p of 0.03
over ten events, so the uncorrected p would call noise a difference."""


@dataclass(frozen=True, slots=True)
class RankConfig:
    lead_s: float = 600.0
    quiet_s: float = 3600.0
    min_events: int = 4
    alpha: float = 0.01


@dataclass(slots=True)
class _Trial:
    candidate: Candidate
    part: str
    maxima: list[tuple[float, float, tuple[tuple[float, float], ...]]]  # (max, at, window pts)
    refs: dict[str, list[float]]  # sorted, signed


def _signed(candidate: Candidate, value: float) -> float:
    return -value if candidate.direction == "below" else value


def _fine_index(fine: Iterable[Series]) -> dict[tuple[str, str, str], Series]:
    return {(s.candidate, s.part, s.node): s for s in fine}


def _lead_window(series: Series, at: float, lead_s: float) -> list[tuple[float, float]]:
    """The `lead` up to the node's last sample before the event: a node that crashed shows
    nothing until it boots, and a reboot is seen at its boot time."""
    hi = bisect.bisect_left(series.times, at)  # the event's own instant is after it
    if hi == 0 or at - series.times[hi - 1] > MAX_GAP_S:
        return []
    lo = bisect.bisect_right(series.times, series.times[hi - 1] - lead_s)
    return list(zip(series.times[lo:hi], series.values[lo:hi], strict=True))


def _near_event(t_end: float, lead_s: float, events: Sequence[float], quiet_s: float) -> bool:
    """Whether the window (t_end - lead, t_end] comes within `quiet_s` of an event."""
    i = bisect.bisect_left(events, t_end - lead_s - quiet_s)
    return i < len(events) and events[i] < t_end + quiet_s


def _trials(
    events: Sequence[Event],
    candidates: Sequence[Candidate],
    fine: Sequence[Series],
    coarse: Sequence[Series],
    cfg: RankConfig,
) -> list[_Trial]:
    by_name = {c.name: c for c in candidates}
    event_times: dict[str, list[float]] = defaultdict(list)
    for e in events:
        event_times[e.node].append(e.at.timestamp())
    for times in event_times.values():
        times.sort()
    index = _fine_index(fine)
    parts: dict[tuple[str, str], None] = {}
    for s in (*fine, *coarse):
        if s.candidate in by_name:
            parts[(s.candidate, s.part)] = None
    trials: dict[tuple[str, str], _Trial] = {}
    for name, part in parts:
        c = by_name[name]
        maxima = []
        for e in events:
            series = index.get((name, part, e.node))
            if series is None:
                continue
            at = e.at.timestamp()
            window = _lead_window(series, at, cfg.lead_s)
            if not window:
                continue
            signed = tuple((t, _signed(c, v)) for t, v in window)
            maxima.append((max(v for _, v in signed), at, signed))
        trials[(name, part)] = _Trial(c, part, maxima, {SAME_NODES: [], PEERS: [], CONCURRENT: []})
    all_events = sorted(e.at.timestamp() for e in events)
    for s in coarse:
        trial = trials.get((s.candidate, s.part))
        if trial is None:
            continue
        own = event_times.get(s.node)
        ref = trial.refs[SAME_NODES if own else PEERS]
        for t, v in zip(s.times, s.values, strict=True):
            if own and _near_event(t, cfg.lead_s, own, cfg.quiet_s):
                continue
            ref.append(_signed(trial.candidate, v))
        if own:
            continue
        # The peer's windows that end within `lead` before each event: the same moment.
        for at in all_events:
            i = bisect.bisect_right(s.times, at) - 1
            if i >= 0 and s.times[i] > at - cfg.lead_s:
                trial.refs[CONCURRENT].append(_signed(trial.candidate, s.values[i]))
    for trial in trials.values():
        for values in trial.refs.values():
            values.sort()
    return list(trials.values())


def _crossed(sorted_values: list[float], threshold: float) -> int:
    return len(sorted_values) - bisect.bisect_left(sorted_values, threshold)


def _best(trial: _Trial) -> tuple[float | None, int, float, float, list[Reference]]:
    """The threshold least likely to be crossed this often by chance: (threshold, preceded,
    gap, p, references). Not the widest gap: a precursor before 4 of 9 events and nearly never
    otherwise is stronger evidence than a level 6 of 9 events and a tenth of ordinary windows
    reach, though its gap is narrower."""
    n = len(trial.maxima)
    refs = {k: v for k, v in trial.refs.items() if len(v) >= MIN_REFERENCE}
    best: tuple[float | None, int, float, float, list[Reference]] = (None, 0, 0.0, 1.0, [])
    if not n or not refs:
        return best
    for threshold in sorted({mx for mx, _, _ in trial.maxima}, reverse=True):
        hits = sum(1 for mx, _, _ in trial.maxima if mx >= threshold)
        references = [Reference(k, len(v), _crossed(v, threshold)) for k, v in refs.items()]
        gap = hits / n - max(r.rate for r in references)
        p = max(fisher_greater(hits, n, r.crossed, r.windows) for r in references)
        if best[0] is None or (p, -gap) < (best[3], -best[2]):
            best = (threshold, hits, gap, p, references)
    return best


def _leads(trial: _Trial, threshold: float) -> tuple[float, ...]:
    out = []
    for mx, at, window in trial.maxima:
        if mx >= threshold:
            first = next(t for t, v in window if v >= threshold)
            out.append(at - first)
    return tuple(sorted(out))


def rank(
    events: Sequence[Event],
    candidates: Sequence[Candidate],
    fine: Sequence[Series],
    coarse: Sequence[Series],
    cfg: RankConfig | None = None,
) -> tuple[list[Ranked], int]:
    """Every candidate (part) with data, best first, and how many thresholds were tried."""
    cfg = cfg or RankConfig()
    trials = _trials(events, candidates, fine, coarse, cfg)
    tried = sum(len({mx for mx, _, _ in t.maxima}) for t in trials) or 1
    thin = len(events) < cfg.min_events
    out = []
    for trial in trials:
        threshold, hits, gap, p, references = _best(trial)
        n = len(trial.maxima)
        corrected = min(1.0, p * tried)
        claimed = (
            not thin
            and threshold is not None
            and n >= cfg.min_events
            and hits >= MIN_PRECEDED
            and gap >= MIN_GAP
            and corrected <= cfg.alpha
        )
        sign = -1.0 if trial.candidate.direction == "below" else 1.0
        out.append(
            Ranked(
                candidate=trial.candidate,
                part=trial.part,
                events=n,
                preceded=hits,
                threshold=None if threshold is None else sign * threshold,
                leads_s=() if threshold is None else _leads(trial, threshold),
                references=tuple(references),
                gap=gap,
                p_value=p,
                p_corrected=corrected,
                interval=wilson(hits, n),
                claimed=claimed,
                no_difference=not claimed
                and (gap < NO_DIFFERENCE_GAP or corrected > NO_DIFFERENCE_P),
            )
        )
    out.sort(key=lambda r: (not r.claimed, r.p_corrected, -r.gap, r.name))
    return out, tried
