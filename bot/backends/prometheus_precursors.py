"""/hw-faults why's PrecursorHistory over Prometheus: events and candidates over days, bounded.

What one answer asks, whatever the fleet size:
- the events, one range query: an unexpected reboot is a new `node_boot_time_seconds` value
  (the boot time itself: exact), an Xid a growth of `DCGM_EXP_XID_ERRORS_TOTAL` (a series
  born in the window counts), a link down a growth of `node_infiniband_link_downed_total`
  (after one count of its series, whose step widens to stay within `SAMPLE_BUDGET`; the event
  is placed at the end of its step);
- each candidate's window extremes on the events' nodes and their peers, one range query a
  candidate: `max_over_time((<candidate>)[<lead>:1m])` at a step of the lead;
- each candidate around the events, one range query a candidate at a minute's step over the
  events' nodes, masked to the minutes around each event (`and on() (vector(time()) >= a <=
  b or ...)`): only those minutes come back, however far apart the events are (past a week
  the query is cut in two, as Prometheus answers 11,000 steps at most);
- the leading candidate on every node now, one instant query.

Where `meowbot prometheus-rules` records a candidate (`meowbot-precursor-candidates`: each
candidate's per-node query, fleet-wide, every minute), the same reads take its recorded series
instead: the window extremes are `max_over_time(<recorded>[<lead>])`, a range selector over the
same minutes' points, where raw Prometheus evaluates the candidate (rates over 2-5 minutes) at
every minute of the week; around the events, each minute's latest recorded point. A week of
1,024 nodes' windows was 0.35 s of Prometheus' CPU a gauge and 0.8 s a rate raw. Each recorded
read asks the rule's sentinel beside it (its runs counted over each window) and is used only
where the rule ran all along; a candidate whose rule is not loaded, stale, named for another
query, or late over part of the window is read raw, with the same statistics: one small query
first (which rules ran lately), then at most two queries a candidate a read. On a live server
a rule runs at its own second within each minute, so a recorded point is up to a minute older
than the raw value at the same step (as a scrape is); backfilled, they are the same.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from bot import metric_names as m
from bot.backends import prometheus_rules as rules
from bot.backends.http import Deadline
from bot.backends.prometheus import BACKEND, PrometheusMetrics, fresh_rules
from bot.backends.promql import nodes_regex, promql_string
from bot.errors import BackendError
from bot.precursors.config import NODES, PrecursorsConfig
from bot.precursors.models import Candidate, Event, Series
from bot.precursors.rule import aggregated, unselected
from bot.triage.table import node_name
from bot.triage.window import DataReach

READ_TIMEOUT_S = 30.0
PARALLEL = 4
"""Candidate queries in flight at once."""
FINE_RES_S = 60
SAMPLE_BUDGET = 20_000_000
"""Samples the link-down query may have Prometheus evaluate (series x steps): far below the
50M it refuses past."""
KINDS = ("unexpected_reboot", "xid", "ib_link_down")
MAX_STEPS = 10_900
"""Steps one range query asks at most: Prometheus refuses past 11,000 points a series, and a
week at a minute's step with the margins around its events is 10,115."""


RAN = 0.8
"""A recorded window is read where its rule ran this share of the window's intervals: a
missed evaluation or two on a busy server, not a gap the raw read would fill."""


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def matcher(label: str, nodes: Sequence[str]) -> str:
    """`$nodes` for these nodes: the host label's value, or an instance with its port."""
    alternation = nodes_regex(nodes)
    if label == m.LABEL_INSTANCE:
        return f"{label}=~{promql_string(f'({alternation})(:[0-9]+)?')}"
    return f"{label}=~{promql_string(f'({alternation})')}"


def candidate_expr(c: Candidate, nodes: Sequence[str] | None) -> str:
    query = (
        unselected(c.query)
        if nodes is None
        else c.query.replace(NODES, matcher(c.host_label, nodes))
    )
    return aggregated(c, query)


def extremes_expr(c: Candidate, nodes: Sequence[str] | None, lead_s: float) -> str:
    op = "min_over_time" if c.direction == "below" else "max_over_time"
    return f"{op}(({candidate_expr(c, nodes)})[{int(lead_s)}s:{FINE_RES_S}s])"


def recorded_selector(c: Candidate, nodes: Sequence[str] | None) -> str:
    """The candidate's recorded series (`meowbot prometheus-rules`) on these nodes, or on
    every node (its sentinel row left out)."""
    record = rules.candidate_record(c)
    if nodes is None:
        return f'{record}{{{rules.SENTINEL_LABEL}=""}}'
    return f"{record}{{{matcher(c.host_label, nodes)}}}"


def sentinel_selector(c: Candidate) -> str:
    return f'{rules.candidate_record(c)}{{{rules.SENTINEL_LABEL}!=""}}'


def recorded_extremes_expr(c: Candidate, nodes: Sequence[str] | None, lead_s: float) -> str:
    """`extremes_expr` over the recorded series: a range selector over its points (a minute
    apart, as the subquery's), not the candidate evaluated at every minute; and beside it the
    rule's runs within each window (its sentinel), to tell whether it ran all along."""
    op = "min_over_time" if c.direction == "below" else "max_over_time"
    lead = int(lead_s)
    return (
        f"{op}({recorded_selector(c, nodes)}[{lead}s]) "
        f"or count_over_time({sentinel_selector(c)}[{lead}s])"
    )


def merged_spans(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The spans on whole seconds (as the mask writes them), merged where they overlap."""
    merged: list[list[float]] = []
    for a, b in sorted((float(f"{a:.0f}"), float(f"{b:.0f}")) for a, b in spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def time_mask(spans: Sequence[tuple[float, float]]) -> str:
    """A vector present only inside the spans (merged where they overlap)."""
    return " or ".join(f"(vector(time()) >= {a:.0f} <= {b:.0f})" for a, b in merged_spans(spans))


def masked_steps(
    spans: Sequence[tuple[float, float]], first: int, last: int, step_s: int
) -> set[float]:
    """The steps of a range query from `first` to `last` that `time_mask(spans)` lets through."""
    merged = merged_spans(spans)
    return {float(t) for t in range(first, last + 1, step_s) if any(a <= t <= b for a, b in merged)}


def covered(
    rows: list[dict[str, Any]], steps: set[float], window_s: float
) -> list[dict[str, Any]] | None:
    """The recorded rows, where the rule's sentinel row (its runs counted over the `window_s`
    before each step) shows it ran at least `RAN` of its intervals there, once at least, at
    every one of `steps`; else None (read raw)."""
    marks = [r for r in rows if rules.SENTINEL_LABEL in (r.get("metric") or {})]
    if len(marks) != 1:
        return None
    try:
        interval = float(marks[0]["metric"][rules.SENTINEL_LABEL])
    except (KeyError, TypeError, ValueError):
        return None
    runs: dict[float, float] = {}
    for point in marks[0].get("values") or [marks[0].get("value")]:
        try:
            runs[float(point[0])] = float(point[1])
        except (IndexError, TypeError, ValueError):
            continue
    if interval <= 0:
        return None
    least = max(1.0, math.floor(RAN * window_s / interval))
    if any(runs.get(t, 0.0) < least for t in steps):
        return None
    return [r for r in rows if r is not marks[0]]


def chunked(
    spans: Sequence[tuple[str, datetime, datetime]], step_s: int
) -> list[list[tuple[str, datetime, datetime]]]:
    """The spans in time order, cut where one range query would pass MAX_STEPS: a week at a
    minute's step is one query a candidate, two weeks two."""
    out: list[list[tuple[str, datetime, datetime]]] = []
    for span in sorted(spans, key=lambda s: s[1]):
        if out and (span[2] - out[-1][0][1]).total_seconds() / step_s < MAX_STEPS:
            out[-1].append(span)
        else:
            out.append([span])
    return out


def _joined(series: Sequence[Series]) -> list[Series]:
    """One series a node, candidate and part, from the chunks' pieces."""
    by: dict[tuple[str, str, str], dict[float, float]] = {}
    for s in series:
        by.setdefault((s.node, s.candidate, s.part), {}).update(zip(s.times, s.values, strict=True))
    return [
        Series(n, c, p, tuple(sorted(v)), tuple(v[t] for t in sorted(v)))
        for (n, c, p), v in by.items()
    ]


def _points(row: dict[str, Any]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    times, values = [], []
    for point in row.get("values") or ():
        try:
            t, v = float(point[0]), float(point[1])
        except (IndexError, TypeError, ValueError):
            continue
        if math.isfinite(v):
            times.append(t)
            values.append(v)
    return tuple(times), tuple(values)


class PrometheusPrecursorHistory:
    name = BACKEND

    def __init__(
        self,
        metrics: PrometheusMetrics,
        config: PrecursorsConfig | None = None,
        *,
        timeout_s: float = READ_TIMEOUT_S,
        parallel: int = PARALLEL,
    ) -> None:
        self.metrics = metrics
        self.config = config or PrecursorsConfig()
        self.timeout_s = timeout_s
        self.parallel = parallel

    def kinds(self) -> tuple[str, ...]:
        return KINDS

    async def reach(self, start: datetime, end: datetime) -> DataReach | None:
        since = await self.metrics.data_since(start, end, timeout_s=self.timeout_s)
        return None if since is None else DataReach(BACKEND, since)

    def _series_of(self, c: Candidate, rows: list[dict[str, Any]]) -> list[Series]:
        out = []
        for row in rows:
            labels = row.get("metric") or {}
            node = node_name(labels, node_label=self.metrics.node_label)
            if not node:
                continue
            times, values = _points(row)
            if times:
                part = labels.get(c.by, "") if c.by else ""
                out.append(Series(node, c.name, part, times, values))
        return out

    # --- events ------------------------------------------------------------------------------
    async def events(
        self, kind: str, *, nodes: Sequence[str] | None, start: datetime, end: datetime
    ) -> list[Event]:
        deadline = Deadline(self.timeout_s)
        if kind == "unexpected_reboot":
            return await self._reboots(nodes, start, end, deadline)
        if kind == "xid":
            return await self._growth(
                kind, m.DCGM_EXP_XID_ERRORS_TOTAL, m.LABEL_HOSTNAME, nodes, start, end, deadline
            )
        if kind == "ib_link_down":
            return await self._growth(
                kind,
                m.NODE_INFINIBAND_LINK_DOWNED_TOTAL,
                m.LABEL_INSTANCE,
                nodes,
                start,
                end,
                deadline,
            )
        raise BackendError(BACKEND, f"has no history of {kind} events here.")

    def _select(self, metric: str, label: str, nodes: Sequence[str] | None) -> str:
        return metric if nodes is None else f"{metric}{{{matcher(label, nodes)}}}"

    async def _reboots(
        self, nodes: Sequence[str] | None, start: datetime, end: datetime, deadline: Deadline
    ) -> list[Event]:
        # A new boot time shows within the step it happened in; its value is the instant.
        # The change is looked for over two steps, so that sparse scrapes and left-open
        # ranges cannot miss it; the same boot time seen at two steps is one event. Highest
        # above lowest, not changes(): VictoriaMetrics counts a series' first sample as a
        # change, which made every node whose samples begin in the range reboot at its boot.
        step = 300
        sel = self._select(m.NODE_BOOT_TIME_SECONDS, m.LABEL_INSTANCE, nodes)
        window = f"[{2 * step}s]"
        promql = f"{sel} and max_over_time({sel}{window}) > min_over_time({sel}{window})"
        rows = await self.metrics.query_range(
            promql, start=start, end=end, step_s=step, deadline=deadline
        )
        found: set[tuple[str, float]] = set()
        for row in rows:
            node = node_name(row.get("metric") or {}, node_label=self.metrics.node_label)
            if not node:
                continue
            for _, boot in zip(*_points(row), strict=True):
                if start.timestamp() <= boot <= end.timestamp():
                    found.add((node, boot))
        return [Event("unexpected_reboot", n, _at(t)) for n, t in sorted(found, key=lambda x: x[1])]

    async def _growth(
        self,
        kind: str,
        metric: str,
        label: str,
        nodes: Sequence[str] | None,
        start: datetime,
        end: datetime,
        deadline: Deadline,
    ) -> list[Event]:
        sel = self._select(metric, label, nodes)
        rows = await self.metrics.query(f"count({sel})", at=end, deadline=deadline)
        try:
            series = float(rows[0]["value"][1]) if rows else 0.0
        except (KeyError, IndexError, TypeError, ValueError):
            series = 0.0
        if not series:
            return []
        span = max(60.0, (end - start).total_seconds())
        step = max(60, math.ceil(span * series / SAMPLE_BUDGET / 60) * 60)
        # Grown over the step, or born in it (a counter's first sample is its first count).
        by = f"{m.LABEL_HOSTNAME}, {m.LABEL_HOSTNAME_NEW}, {m.LABEL_INSTANCE}"
        grown = f"({sel} - ({sel} offset {step}s)) > 0 or ({sel} unless ({sel} offset {step}s))"
        promql = f"sum by ({by}) ({grown})"
        rows = await self.metrics.query_range(
            promql, start=start, end=end, step_s=step, deadline=deadline
        )
        out: list[Event] = []
        for row in rows:
            node = node_name(row.get("metric") or {}, node_label=self.metrics.node_label)
            if not node:
                continue
            out.extend(Event(kind, node, _at(t)) for t in _points(row)[0])
        return sorted(out, key=lambda e: (e.at, e.node))

    # --- candidates ----------------------------------------------------------------------
    async def _recorded(
        self, candidates: Sequence[Candidate], at: datetime, deadline: Deadline
    ) -> frozenset[str]:
        """The candidates' recorded series whose rule is loaded and ran lately at `at` (their
        sentinels, and the engine's clock: `fresh_rules`): one small query, so that without
        the rules no candidate asks twice."""
        if not self.metrics.recorded or not candidates:
            return frozenset()
        names = "|".join(sorted({rules.candidate_record(c) for c in candidates}))
        rows = await self.metrics.query(
            f'{{__name__=~{promql_string(names)}, {rules.SENTINEL_LABEL}!=""}} or vector(time())',
            at=at,
            deadline=deadline,
        )
        return frozenset(fresh_rules(rows))

    async def _read(
        self,
        c: Candidate,
        recorded: frozenset[str],
        read_recorded: Callable[[], Awaitable[list[dict[str, Any]] | None]],
        read_raw: Callable[[], Awaitable[list[dict[str, Any]]]],
    ) -> list[Series]:
        """A candidate's recorded rows where its rule ran all along, else its raw rows."""
        if rules.candidate_record(c) in recorded:
            rows = await read_recorded()
            if rows is not None:
                self.metrics.recorded_reads += 1
                return self._series_of(c, rows)
        return self._series_of(c, await read_raw())

    async def windows(
        self,
        candidates: Sequence[Candidate],
        *,
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        lead_s: float,
    ) -> list[Series]:
        deadline = Deadline(self.timeout_s)
        step = max(FINE_RES_S, int(lead_s))
        first_s = math.ceil(start.timestamp() / step) * step
        last_s = math.floor(end.timestamp() / step) * step
        first, last = _at(first_s), _at(last_s)
        steps = {float(t) for t in range(first_s, last_s + 1, step)}
        recorded = await self._recorded(candidates, last, deadline)

        async def one(c: Candidate) -> list[Series]:
            async def from_rule() -> list[dict[str, Any]] | None:
                rows = await self.metrics.query_range(
                    recorded_extremes_expr(c, nodes, lead_s), start=first, end=last,
                    step_s=step, deadline=deadline,
                )  # fmt: skip
                return covered(rows, steps, lead_s)

            async def raw() -> list[dict[str, Any]]:
                return await self.metrics.query_range(
                    extremes_expr(c, nodes, lead_s), start=first, end=last, step_s=step,
                    deadline=deadline,
                )  # fmt: skip

            return await self._read(c, recorded, from_rule, raw)

        return await self._each(candidates, one)

    async def around(
        self,
        candidates: Sequence[Candidate],
        spans: Sequence[tuple[str, datetime, datetime]],
        *,
        step_s: int,
    ) -> list[Series]:
        deadline = Deadline(self.timeout_s)
        out: list[Series] = []
        if not spans:
            return out
        recorded = await self._recorded(candidates, max(b for _, _, b in spans), deadline)
        for chunk in chunked(spans, step_s):
            nodes = sorted({n for n, _, _ in chunk})
            first = math.floor(min(a for _, a, _ in chunk).timestamp() / step_s) * step_s
            last = math.ceil(max(b for _, _, b in chunk).timestamp() / step_s) * step_s
            bounds = [(a.timestamp(), b.timestamp()) for _, a, b in chunk]
            mask = time_mask(bounds)
            steps = masked_steps(bounds, first, last, step_s)

            async def one(c: Candidate) -> list[Series]:
                async def query(promql: str) -> list[dict[str, Any]]:
                    return await self.metrics.query_range(
                        promql, start=_at(first), end=_at(last), step_s=step_s,  # noqa: B023
                        deadline=deadline,
                    )  # fmt: skip

                async def from_rule() -> list[dict[str, Any]] | None:
                    # Each step's latest recorded point within the step (not one carried on
                    # past a series' end), and whether the rule ran in the step.
                    latest = f"last_over_time({recorded_selector(c, nodes)}[{step_s}s])"  # noqa: B023
                    runs = f"count_over_time({sentinel_selector(c)}[{step_s}s])"
                    # The mask once: over a week of steps it costs more than the points.
                    rows = await query(f"(({latest}) or ({runs})) and on() ({mask})")  # noqa: B023
                    return covered(rows, steps, step_s)  # noqa: B023

                async def raw() -> list[dict[str, Any]]:
                    return await query(f"({candidate_expr(c, nodes)}) and on() ({mask})")  # noqa: B023

                return await self._read(c, recorded, from_rule, raw)

            out.extend(await self._each(candidates, one))
        return _joined(out)

    async def _each(
        self,
        candidates: Sequence[Candidate],
        one: Callable[[Candidate], Awaitable[list[Series]]],
    ) -> list[Series]:
        """`one` for every candidate, `parallel` at once: Prometheus answers queries on all
        its cores, and a candidate's query waits mostly on it."""
        gate = asyncio.Semaphore(self.parallel)

        async def gated(c: Candidate) -> list[Series]:
            async with gate:
                return await one(c)

        parts = await asyncio.gather(*(gated(c) for c in candidates))
        return [s for part in parts for s in part]

    async def current(self, candidate: Candidate, *, at: datetime, lead_s: float) -> list[Series]:
        deadline = Deadline(self.timeout_s)
        recorded = await self._recorded([candidate], at, deadline)

        async def from_rule() -> list[dict[str, Any]] | None:
            rows = await self.metrics.query(
                recorded_extremes_expr(candidate, None, lead_s), at=at, deadline=deadline
            )
            return covered(rows, {float(f"{at.timestamp():.3f}")}, lead_s)

        async def raw() -> list[dict[str, Any]]:
            return await self.metrics.query(
                extremes_expr(candidate, None, lead_s), at=at, deadline=deadline
            )

        rows: list[dict[str, Any]] | None = None
        if rules.candidate_record(candidate) in recorded:
            rows = await from_rule()
            if rows is not None:
                self.metrics.recorded_reads += 1
        if rows is None:
            rows = await raw()
        out: list[Series] = []
        for row in rows:
            labels = row.get("metric") or {}
            node = node_name(labels, node_label=self.metrics.node_label)
            try:
                t, v = float(row["value"][0]), float(row["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if node and math.isfinite(v):
                part = labels.get(candidate.by, "") if candidate.by else ""
                out.append(Series(node, candidate.name, part, (t,), (v,)))
        return out
