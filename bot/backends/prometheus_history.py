"""The regression finder's FleetHistory over Prometheus: days of versions and paces, bounded.

What one read asks, whatever the fleet size or the window (each is `prometheus_rules`' own
query, so that a recording rule of it can stand in):
- per info metric, `count by (<host labels>, <labels>) (<metric>)`, summed up over the window
  in one instant subquery: when each node first showed each value (the `regressions:` config
  section names the metric and label of each component; components on one metric, as driver
  and VBIOS on the DCGM series, share it): a row a node and value, not a point a step;
- the job-to-node map, `count by (<job>, <node>) (<step metric>)`, likewise: the most ranks
  (GPUs) each job held on each node;
- every job's slowest rank, `max by (<job>) (<step metric>)` (/job-slow's recorded pace), a
  range query: a point a step, a row a job;
- each node's compute time in each job that exports it,
  `avg by (<job>, <node>, instance) (<compute metric>)`, a range query: a point a step, a row
  a job and node (recorded by `meowbot prometheus-rules`, or raw: the ranks averaged in
  Prometheus, the step widened for the rank series it loads).

Each is read from its recorded series where `meowbot prometheus-rules` keeps it and has kept it
over the whole window (the sentinel checked first), else raw after one count of the series a
step would load: 2 to 4 queries each, a fixed number in all. The step widens (whole minutes, at
least 5) until series x steps stays within `RegressionsConfig.sample_budget` (1M samples):
over 7 days at 4,096 nodes, raw, the kernel is read at 42-minute steps and the 32k GPU series
(driver, VBIOS) at 5.5-hour ones; recorded (a row a node; the drift checks' per-node reads are
the same queries), every component at 42 minutes. A node's switch is placed to within its step
(bench/regressions_prometheus.py times the read).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bot.backends import prometheus_rules as rules
from bot.backends.http import Deadline
from bot.backends.prometheus import BACKEND, PrometheusMetrics, _covers
from bot.backends.promql import METRIC_NAME_RE
from bot.regressions.config import RegressionsConfig
from bot.regressions.models import JobPace, NodeCompute, PaceSample, VersionSpan
from bot.triage.stragglers import StragglerConfig
from bot.triage.table import node_name

MIN_STEP_S = 300
"""The finest step read: the recorded pace's rules run every minute, but a rollout's minute
does not need finer than five to place a job's switch."""
READ_TIMEOUT_S = 30.0


def bounded_step(span_s: float, series: float, budget: int) -> int:
    """The step (whole minutes, at least MIN_STEP_S) at which `series` over `span_s` load at
    most `budget` samples."""
    needed = span_s * max(series, 1.0) / budget
    return max(MIN_STEP_S, math.ceil(needed / 60) * 60)


def aligned(start: datetime, end: datetime, step_s: int) -> tuple[datetime, datetime]:
    """The window's steps on multiples of the step, inside it: the same window read twice
    reads the same instants (and Prometheus' results cache can keep them)."""
    first = math.ceil(start.timestamp() / step_s) * step_s
    last = max(first, math.floor(end.timestamp() / step_s) * step_s)
    return datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC)


def _at(t_s: float) -> datetime:
    return datetime.fromtimestamp(t_s, UTC)


def _times(row: dict[str, Any]) -> list[tuple[float, str]]:
    out = []
    for point in row.get("values") or ():
        try:
            out.append((float(point[0]), str(point[1])))
        except (IndexError, TypeError, ValueError):
            continue
    return out


def spans_of(
    rows: Sequence[dict[str, Any]],
    component: str,
    label: str,
    node_label: str,
    *,
    step_s: int,
    end: datetime,
) -> list[VersionSpan]:
    """Each node's span of each value, from rows of when a series first showed in the window:
    a node's rows of one value (a series a GPU, or one that also carries another component's
    label) give its earliest sight; a value lasts until the step before the node's next one
    first showed, the last until the window's end. A value that came back after a rollback
    is seen at its first time only (the last sight of each would double the query's cost)."""
    firsts: dict[tuple[str, str], float] = {}
    for row in rows:
        labels = row.get("metric") or {}
        node = node_name(labels, node_label=node_label)
        value = labels.get(label)
        if not node or not value:
            continue
        try:
            t = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        firsts[(node, value)] = min(firsts.get((node, value), t), t)
    by_node: dict[str, list[tuple[float, str]]] = {}
    for (node, value), t in firsts.items():
        by_node.setdefault(node, []).append((t, value))
    spans = []
    for node, seen in sorted(by_node.items()):
        seen.sort()
        for k, (t, value) in enumerate(seen):
            until = _at(max(t, seen[k + 1][0] - step_s)) if k + 1 < len(seen) else end
            spans.append(VersionSpan(node, component, value, _at(t), until))
    return spans


class PrometheusFleetHistory:
    name = BACKEND

    def __init__(
        self,
        metrics: PrometheusMetrics,
        config: RegressionsConfig | None = None,
        stragglers: StragglerConfig | None = None,
        *,
        timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self.metrics = metrics
        self.config = config or RegressionsConfig()
        self.stragglers = stragglers or StragglerConfig()
        self.timeout_s = timeout_s
        for name in (self.stragglers.step_metric, self.stragglers.compute_metric):
            if not METRIC_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a metric name")
        self.last_steps: dict[str, int] = {}
        """The step each query of the last read took, by what it read (for the benchmark)."""

    def components(self) -> tuple[str, ...]:
        return tuple(self.config.info_metrics())

    async def _series(self, metric: str, at: datetime, deadline: Deadline) -> float:
        """How many series `metric` (a selector or an aggregation) has at `at`."""
        rows = await self.metrics.query(f"count({metric})", at=at, deadline=deadline)
        try:
            return float(rows[0]["value"][1]) if rows else 0.0
        except (KeyError, IndexError, TypeError, ValueError):
            return 0.0

    async def _range(
        self,
        what: str,
        promql: str,
        series: float,
        start: datetime,
        end: datetime,
        deadline: Deadline,
    ) -> tuple[list[dict[str, Any]], int]:
        span_s = max(0.0, (end - start).total_seconds())
        step = bounded_step(span_s, series, self.config.sample_budget)
        first, last = aligned(start, end, step)
        self.last_steps[what] = step
        rows = await self.metrics.query_range(
            promql, start=first, end=last, step_s=step, deadline=deadline
        )
        return rows, step

    async def _recorded(
        self, what: str, name: str, start: datetime, end: datetime, deadline: Deadline
    ) -> tuple[list[dict[str, Any]], int] | None:
        """The rows of a recorded series over the window, or None where its rule is not
        loaded or did not run over all of it (its sentinel comes in the same answer)."""
        rows_now = await self._series(name, end, deadline)
        if not rows_now:
            return None
        promql = f'{name} or {name}{{{rules.SENTINEL_LABEL}!=""}}'
        rows, step = await self._range(what, promql, rows_now, start, end, deadline)
        sentinel = [r for r in rows if rules.SENTINEL_LABEL in (r.get("metric") or {})]
        first, last = aligned(start, end, step)
        if not _covers(sentinel, first, last, step):
            return None
        self.metrics.recorded_reads += 1
        return [r for r in rows if r not in sentinel], step

    async def _read(
        self, what: str, expr: str, metric: str, start: datetime, end: datetime, deadline: Deadline
    ) -> tuple[list[dict[str, Any]], int]:
        """`expr` over the window, a point a step: its recording rule's rows where kept up all
        along (a row a job), else raw, the step widened for the series `metric` has now."""
        if self.metrics.recorded:
            name = rules.recorded_name(expr, metric)
            recorded = await self._recorded(what, name, start, end, deadline)
            if recorded is not None:
                return recorded
        series = await self._series(metric, end, deadline)
        return await self._range(what, expr, series, start, end, deadline)

    async def _recorded_source(
        self, name: str, start: datetime, end: datetime, deadline: Deadline
    ) -> tuple[str, float] | None:
        """A recorded series' rows (its selector) and how many there are at most, where its
        rule ran over the whole window: one small range query (its sentinel and its count)."""
        sentinel = f'{name}{{{rules.SENTINEL_LABEL}!=""}}'
        own = f'{name}{{{rules.SENTINEL_LABEL}=""}}'
        rows, step = await self._range(
            "sentinel", f"{sentinel} or count({own})", 1, start, end, deadline
        )
        marks = [r for r in rows if rules.SENTINEL_LABEL in (r.get("metric") or {})]
        first, last = aligned(start, end, step)
        if not _covers(marks, first, last, step):
            return None
        counts = [float(v) for r in rows if r not in marks for _, v in _times(r)]
        self.metrics.recorded_reads += 1
        return own, max(counts, default=0.0)

    async def _over_window(
        self,
        what: str,
        expr: str,
        metric: str,
        shape: str,
        start: datetime,
        end: datetime,
        deadline: Deadline,
    ) -> list[dict[str, Any]]:
        """One row a series of `expr` (recorded where kept up all along, else raw) summing up
        the window in a single instant answer, `shape` of `{inner}` a subquery over it (the
        steps Prometheus evaluates are bounded as a range query's; the answer is a row a
        series, not a point a step, so a week of 4,096 nodes is a few thousand rows)."""
        source: tuple[str, float] | None = None
        if self.metrics.recorded:
            source = await self._recorded_source(
                rules.recorded_name(expr, metric), start, end, deadline
            )
        if source is None:
            source = expr, await self._series(metric, end, deadline)
        inner, series = source
        span_s = max(0.0, (end - start).total_seconds())
        step = bounded_step(span_s, series, self.config.sample_budget)
        _, last = aligned(start, end, step)
        window = max(step, int(last.timestamp() - start.timestamp()))
        self.last_steps[what] = step
        promql = shape.format(inner=inner, range=f"{window}s:{step}s")
        return await self.metrics.query(promql, at=last, deadline=deadline)

    async def _metric(
        self,
        metric: str,
        components: Sequence[str],
        start: datetime,
        end: datetime,
        deadline: Deadline,
    ) -> list[VersionSpan]:
        """The components one info metric carries (driver and VBIOS are both labels of every
        DCGM series): when each node showed each value first and last in the window."""
        infos = self.config.info_metrics()
        node_label = self.metrics.node_label
        # Every configured label of the metric, whatever is asked: the recorded rule's query.
        expr = rules.info_count_query(metric, rules.info_labels(self.config)[metric], node_label)
        # `* 1`: the value at each step, timestamped with the step (a bare selector's own
        # timestamps cost Prometheus ten times as much inside a subquery).
        shape = "min_over_time(timestamp(({inner}) * 1)[{range}])"
        rows = await self._over_window(metric, expr, metric, shape, start, end, deadline)
        step = self.last_steps[metric]
        return [
            span
            for component in components
            for span in spans_of(
                rows, component, infos[component].label, node_label, step_s=step, end=end
            )
        ]

    async def versions(
        self, components: Sequence[str], *, start: datetime, end: datetime
    ) -> list[VersionSpan]:
        infos = self.config.info_metrics()
        unknown = [c for c in components if c not in infos]
        if unknown:
            known = ", ".join(infos)
            raise ValueError(f"unknown component {unknown[0]!r} (known: {known})")
        by_metric: dict[str, list[str]] = {}
        for component in dict.fromkeys(components):
            by_metric.setdefault(infos[component].metric, []).append(component)
        deadline = Deadline(self.timeout_s)
        parts = await asyncio.gather(
            *(self._metric(mt, cs, start, end, deadline) for mt, cs in by_metric.items())
        )
        return [span for part in parts for span in part]

    async def _job_nodes(
        self, start: datetime, end: datetime, deadline: Deadline
    ) -> dict[str, dict[str, int]]:
        """Job -> node -> ranks (GPUs) it held there at most, over the window."""
        cfg = self.stragglers
        expr = rules.job_nodes_query(cfg)
        shape = "max_over_time(({inner})[{range}])"
        rows = await self._over_window("nodes", expr, cfg.step_metric, shape, start, end, deadline)
        out: dict[str, dict[str, int]] = {}
        for row in rows:
            labels = row.get("metric") or {}
            job = labels.get(cfg.job_label)
            node = labels.get(cfg.node_label) or node_name(labels, node_label=cfg.node_label)
            if not job or not node:
                continue
            try:
                held = int(float(row["value"][1]))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            nodes = out.setdefault(job, {})
            nodes[node] = max(nodes.get(node, 0), held)
        return out

    async def job_paces(self, *, start: datetime, end: datetime) -> list[JobPace]:
        deadline = Deadline(self.timeout_s)
        cfg = self.stragglers
        # The slowest rank a job: /job-slow's recorded pace, or the same query raw.
        pace = rules.pace_queries(cfg)[0]
        (paces, _), nodes = await asyncio.gather(
            self._read("pace", pace, cfg.step_metric, start, end, deadline),
            self._job_nodes(start, end, deadline),
        )
        out = []
        for row in paces:
            job = (row.get("metric") or {}).get(cfg.job_label)
            if not job:
                continue
            samples = []
            for t, v in _times(row):
                seconds = float(v)
                if seconds == seconds and seconds > 0:
                    samples.append(PaceSample(_at(t), seconds))
            if not samples:
                continue
            held = nodes.get(job, {})
            out.append(
                JobPace(
                    job_id=job,
                    nodes=tuple(sorted(held)),
                    samples=tuple(samples),
                    gpus=sum(held.values()),
                )
            )
        return sorted(out, key=lambda p: p.job_id)

    async def node_compute(self, *, start: datetime, end: datetime) -> list[NodeCompute]:
        deadline = Deadline(self.timeout_s)
        cfg = self.stragglers
        expr = rules.node_compute_query(cfg)
        rows, _ = await self._read("compute", expr, cfg.compute_metric, start, end, deadline)
        out = []
        for row in rows:
            labels = row.get("metric") or {}
            job = labels.get(cfg.job_label)
            node = labels.get(cfg.node_label) or node_name(labels, node_label=cfg.node_label)
            if not job or not node:
                continue
            samples = []
            for t, v in _times(row):
                seconds = float(v)
                if seconds == seconds and seconds > 0:
                    samples.append(PaceSample(_at(t), seconds))
            if samples:
                out.append(NodeCompute(job_id=job, node=node, samples=tuple(samples)))
        return sorted(out, key=lambda c: (c.job_id, c.node))
