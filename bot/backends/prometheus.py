"""The metrics port over Prometheus' HTTP API.

A fleet is read with one query per metric, whatever its size: nodes are chosen with one regex
matcher, never a query per node, so the count of queries is fixed (tested). The queries are
written by bot/backends/promql.py, which validates node names and escapes every value before it
reaches PromQL.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import aiohttp

from bot import metric_names as m
from bot import ticks
from bot.backends import prometheus_rules as rules
from bot.backends.http import Deadline, request_json
from bot.backends.promql import METRIC_NAME_RE, nodes_regex, promql_string, query_for, selector
from bot.errors import BackendError
from bot.triage.job_ids import BadJobId, check_job_id
from bot.triage.stragglers import PacePoint, RankTime, StragglerConfig
from bot.triage.table import (
    VERSION_LABELS,
    Column,
    MetricRequest,
    Reading,
    Table,
    node_in,
    node_name,
)
from bot.triage.topology import Place, Topology

BACKEND = "Prometheus"

RAW_PACE_SAMPLES = 20_000_000
"""Samples a raw pace query may load (steps x ranks): Prometheus refuses past 50M."""


REACH_METRIC = m.NODE_BOOT_TIME_SECONDS
"""What every node exports (node_exporter) and reboots are read from: where its samples begin
is where the metrics' history does."""
REACH_LOOKBACK_S = 600
"""A probe sees data at an instant where a sample is this close before it: a missed scrape or
a short restart is no gap, and 50,000 nodes' ten minutes are a light read."""
REACH_PROBES = 6
"""Probes narrowing where the data begins, after the one at the window's start."""
REACH_FINEST_S = 60.0


def reach_query() -> str:
    """Whether any node's boot time has a sample shortly before the query's time: one row (how
    many) or none."""
    return f"count(last_over_time({selector(REACH_METRIC, None, 'node')}[{REACH_LOOKBACK_S}s]))"


JOB_ID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.+-]{0,63}$")


def _is_job_id(job_id: str) -> bool:
    """A scheduler's id as it writes it: Slurm's (or a site's own word), or Kubernetes'
    `namespace/kind/name` exactly as the adapter writes it."""
    if JOB_ID_RE.fullmatch(job_id):
        return True
    try:
        return check_job_id(job_id) == job_id
    except BadJobId:
        return False


def step_selector(job_id: str, cfg: StragglerConfig, metric: str | None = None) -> str:
    """The job's step-time series (or another per-rank metric's), by its `job_id` label: a
    Kubernetes job's exporter writes `namespace/kind/name` there (docs/schedulers.md). The id
    is checked and escaped: it comes from the user."""
    metric = metric or cfg.step_metric
    if not _is_job_id(job_id):
        raise ValueError(f"{job_id!r} is not a job id")
    if not METRIC_NAME_RE.fullmatch(metric):
        raise ValueError(f"{metric!r} is not a metric name")
    if not METRIC_NAME_RE.fullmatch(cfg.job_label):
        raise ValueError(f"{cfg.job_label!r} is not a label name")
    return f"{metric}{{{cfg.job_label}={promql_string(job_id)}}}"


class PrometheusMetrics:
    name = BACKEND

    def __init__(
        self,
        base_url: str,
        *,
        session: aiohttp.ClientSession | None = None,
        timeout_s: float = 5.0,
        node_label: str = "node",
        recorded: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = session
        self._own_session = session is None
        self.timeout_s = timeout_s
        self.node_label = node_label
        # Read the series of meowbot's recording rules where Prometheus keeps them up
        # (bot/backends/prometheus_rules.py); off, every read is raw.
        self.recorded = recorded
        self.queries = 0  # PromQL queries sent, for the tests and the benchmark
        self.recorded_reads = 0  # of those, reads of recorded series
        self.fresh_reads = 0  # of those, raw re-reads of what moved since a rule ran
        # A recorded series holds the few rows that may be faults (or one a node): for a big
        # selection (a 4,096-node job) reading all of it and keeping the selection's rows
        # here is cheaper than matching a 4,096-name regex against every host label value.
        self.select_in_process_above = 256

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use, inside the running loop.
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()

    async def _api(self, path: str, form: dict[str, str], deadline: Deadline) -> dict[str, Any]:
        """POST to the query API (long node regexes fit); the `data` of a successful answer."""
        self.queries += 1
        _, body = await request_json(
            self._http(),
            "POST",
            f"{self.base_url}/api/v1/{path}",
            backend=BACKEND,
            deadline=deadline,
            data=form,
            ok_statuses=frozenset({200}),
        )
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise BackendError(BACKEND, f"refused the query: {error or 'no reason given'}.")
        data = body.get("data") or {}
        return data if isinstance(data, dict) else {}

    async def query(
        self, promql: str, *, at: datetime | None, deadline: Deadline
    ) -> list[dict[str, Any]]:
        """An instant query; the result vector."""
        form = {"query": promql}
        if at is not None:
            form["time"] = f"{at.timestamp():.3f}"
        data = await self._api("query", form, deadline)
        if data.get("resultType") != "vector":
            raise BackendError(BACKEND, f"answered a {data.get('resultType')}, not a vector.")
        result = data.get("result") or []
        return [r for r in result if isinstance(r, dict)]

    async def data_since(
        self, start: datetime, end: datetime, *, timeout_s: float | None = None
    ) -> datetime | None:
        """Where Prometheus' data begins, when after `start` (started an hour ago, or keeping
        less than asked); None where it reaches back to `start`, or where nothing says (no
        node's boot time at `end`).

        Bounded: one instant query at `start`, which is all when the data reaches back; else
        one at `end` and REACH_PROBES more narrowing the gap on a log scale of the age (the
        answer matters most when the data is young). The latest instant found with data is
        said: the data is there from it, at most a sixth of its age after the first sample.
        A gap (Prometheus down for longer than REACH_LOOKBACK_S) may be taken for the start.
        """
        deadline = Deadline(timeout_s or self.timeout_s)
        promql = reach_query()

        async def there(t: datetime) -> bool:
            return bool(await self.query(promql, at=t, deadline=deadline))

        if await there(start) or not await there(end):
            return None
        near, far = 0.0, (end - start).total_seconds()  # there `near` before end, not `far`
        for _ in range(REACH_PROBES):
            mid = math.sqrt(max(near, REACH_FINEST_S) * far)
            if not near < mid < far:
                break
            if await there(end - timedelta(seconds=mid)):
                near = mid
            else:
                far = mid
        return end - timedelta(seconds=near)

    async def query_range(
        self, promql: str, *, start: datetime, end: datetime, step_s: int, deadline: Deadline
    ) -> list[dict[str, Any]]:
        """A range query; the result matrix."""
        form = {
            "query": promql,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": str(max(1, step_s)),
        }
        result = (await self._api("query_range", form, deadline)).get("result") or []
        return [r for r in result if isinstance(r, dict)]

    async def step_times(
        self,
        job_id: str,
        cfg: StragglerConfig,
        *,
        at: datetime | None = None,
        timeout_s: float | None = None,
        metric: str | None = None,
    ) -> list[RankTime]:
        """Each rank's step time of the job (or `metric`'s value), averaged over
        `cfg.average_s`: one query."""
        sel = step_selector(job_id, cfg, metric)
        rows = await self.query(
            f"avg_over_time({sel}[{cfg.average_s}s])",
            at=at,
            deadline=Deadline(timeout_s or self.timeout_s),
        )
        out = []
        for row in rows:
            labels = row.get("metric") or {}
            node = labels.get(cfg.node_label) or node_name(labels, node_label=self.node_label)
            try:
                seconds = float(row["value"][1])
                rank = int(labels.get(cfg.rank_label, "-1"))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            stage = labels.get(cfg.stage_label, "")
            if node and seconds == seconds:
                out.append(RankTime(node, rank, int(stage) if stage.isdigit() else None, seconds))
        return out

    async def pace(
        self,
        job_id: str,
        cfg: StragglerConfig,
        *,
        start: datetime,
        end: datetime,
        step_s: int,
        timeout_s: float | None = None,
    ) -> list[PacePoint]:
        """The job's slowest and median rank over time: two range queries, any job size.

        Where meowbot's rules record every job's pace (prometheus_rules.pace_queries) and
        have done so over the whole range, the job's rows of those: a point a step, where
        the raw queries read every rank at every step (32k ranks x 2,880 steps is past
        Prometheus' default 50M-sample limit). A recorded point is the pace at the rule's
        last evaluation before the step: at most its interval (a minute) older.
        """
        sel = step_selector(job_id, cfg)
        deadline = Deadline(timeout_s or self.timeout_s)
        if self.recorded:
            recorded = await self._recorded_pace(job_id, cfg, start, end, step_s, deadline)
            if recorded is not None:
                return recorded
        # Raw, each step reads every rank: widen the step so that a big job stays within
        # Prometheus' sample limit (a 4,096-node job: 5-minute points over 48 h).
        ranks = await self.query(f"count({sel})", at=end, deadline=deadline)
        count = float(ranks[0]["value"][1]) if ranks else 0.0
        span_s = max(0.0, (end - start).total_seconds())
        needed_s = span_s * count / RAW_PACE_SAMPLES  # the step that loads that many
        if needed_s > step_s:
            step_s = math.ceil(needed_s / 60) * 60
        slowest, median = await asyncio.gather(
            *(
                self.query_range(q, start=start, end=end, step_s=step_s, deadline=deadline)
                for q in (f"max({sel})", f"quantile(0.5, {sel})")
            )
        )
        return _pace_points(slowest, median)

    async def _recorded_pace(
        self,
        job_id: str,
        cfg: StragglerConfig,
        start: datetime,
        end: datetime,
        step_s: int,
        deadline: Deadline,
    ) -> list[PacePoint] | None:
        """The job's recorded pace, or None when the rules did not cover the whole range."""
        job = promql_string(job_id)
        names = [rules.recorded_name(q, cfg.step_metric) for q in rules.pace_queries(cfg)]
        # The rule's sentinel comes in the same answer: has it run all along, and lately?
        queries = [
            f'{name}{{{cfg.job_label}={job}}} or {name}{{{rules.SENTINEL_LABEL}!=""}}'
            for name in names
        ]
        results = await asyncio.gather(
            *(
                self.query_range(q, start=start, end=end, step_s=step_s, deadline=deadline)
                for q in queries
            )
        )
        series: list[list[dict[str, Any]]] = []
        for result in results:
            sentinel = [r for r in result if rules.SENTINEL_LABEL in (r.get("metric") or {})]
            if not _covers(sentinel, start, end, step_s):
                return None
            series.append([r for r in result if r not in sentinel])
        self.recorded_reads += len(series)
        return _pace_points(series[0], series[1])

    async def _present(self, names: Sequence[str], deadline: Deadline) -> set[str]:
        """Which of the metrics exist, from the label index (no series are read)."""
        self.queries += 1
        _, body = await request_json(
            self._http(),
            "GET",
            f"{self.base_url}/api/v1/label/__name__/values",
            backend=BACKEND,
            deadline=deadline,
        )
        known = set(body.get("data") or []) if isinstance(body, dict) else set()
        return {n for n in names if n in known}

    async def recorded_rules(self, deadline: Deadline) -> dict[str, float]:
        """The recorded series Prometheus keeps up now and how old each is (seconds since
        its rule ran), from their sentinel rows: one small query. A rule that failed or fell
        behind (sentinel too old) is not used."""
        if not self.recorded:
            return {}
        rows = await self.query(SENTINELS, at=None, deadline=deadline)
        return fresh_rules(rows)

    def plan(
        self,
        request: MetricRequest,
        nodes: Sequence[str] | None,
        window_s: float,
        recorded: Collection[str],
    ) -> Plan:
        """The query for `request`, the recorded series it reads (None: read raw), and
        whether `read` keeps the selection's rows itself.

        A recording rule is used only when it records exactly the fleet-wide query this
        adapter would send (its name hashes that query): other windows or thresholds are raw.
        """
        if recorded and rules.worth_recording(request):
            fleet = query_for(request, None, window_s, self.node_label)
            name = rules.recorded_name(fleet, request.name)
            if name in recorded:
                if nodes is not None and len(nodes) > self.select_in_process_above:
                    return Plan(name, name, True)
                return Plan(selector(name, nodes, self.node_label), name, False)
        query = query_for(request, nodes, window_s, self.node_label)
        if nodes is not None and len(query) > MAX_QUERY_CHARS:
            # VictoriaMetrics refuses a query above 16 KB (-search.maxQueryLen): a selection
            # that long is read fleet-wide and its rows kept here.
            return Plan(query_for(request, None, window_s, self.node_label), None, True)
        return Plan(query, None, False)

    async def _moved(
        self, name: str, nodes: Sequence[str] | None, age_s: float, deadline: Deadline
    ) -> set[str]:
        """The nodes whose series of counter `name` moved since its rule ran, `age_s` ago:
        one read of two instants a series, whatever the counter's window."""
        since_s = max(1, math.ceil(age_s + FRESH_MARGIN_S))
        wide = nodes is not None and len(nodes) > self.select_in_process_above
        query = moved_query(name, None if wide else nodes, since_s, self.node_label)
        if len(query) > MAX_QUERY_CHARS:  # as `plan`: VictoriaMetrics refuses it
            query = moved_query(name, None, since_s, self.node_label)
        chosen = frozenset(nodes) if nodes is not None else None
        rows = await self.query(query, at=None, deadline=deadline)
        return {n for n in (self._node(r, chosen) for r in rows) if n is not None}

    async def _freshen(
        self,
        request: MetricRequest,
        result: list[dict[str, Any]],
        nodes: Sequence[str] | None,
        window_s: float,
        moved: set[str],
        deadline: Deadline,
    ) -> None:
        """A counter's recorded rows made as fresh as a raw read: the `moved` nodes' series are
        read raw over the window and their rows replace the recorded ones. A rule runs every
        minute or more, a sweep every few seconds: without this a new fault waited for it."""
        if not moved:
            return
        self.fresh_reads += 1
        chosen = frozenset(nodes) if nodes is not None else None
        if len(moved) > FRESH_NODES_AT_MOST:
            # Much moved (a noisy counter on a big fleet): the whole read raw, as without rules.
            rows = await self.query(
                self.plan(request, nodes, window_s, ()).query, at=None, deadline=deadline
            )
            _named_as_promql(rows, request)
            result[:] = [r for r in rows if chosen is None or _selected(r, chosen, self.node_label)]
            return
        again = sorted(moved)
        rows = await self.query(
            self.plan(request, again, window_s, ()).query, at=None, deadline=deadline
        )
        _named_as_promql(rows, request)
        kept = frozenset(again)
        result[:] = [
            *(r for r in result if self._node(r, chosen) not in moved),
            *(r for r in rows if _selected(r, kept, self.node_label)),
        ]

    def _node(self, row: Mapping[str, Any], chosen: frozenset[str] | None) -> str | None:
        labels = row.get("metric") or {}
        if chosen is None:
            return node_name(labels, node_label=self.node_label)
        return node_in(labels, chosen, node_label=self.node_label)

    async def read(
        self,
        requests: Sequence[MetricRequest],
        *,
        nodes: Sequence[str] | None,
        window_s: float,
        at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> Table:
        """Every requested metric, concurrently, one query each (recorded where kept up)."""
        deadline = Deadline(timeout_s or self.timeout_s)
        if nodes is not None:
            nodes_regex(nodes)  # a bad node name is refused before any query is sent
        recorded = await self.recorded_rules(deadline)
        plans = [self.plan(r, nodes, window_s, recorded) for r in requests]
        self.recorded_reads += sum(1 for p in plans if p.recorded is not None)
        # A filtered answer may be empty because all is well: ask once which metrics exist.
        filtered = [r.name for r in requests if r.keep or r.fewer_per_node]
        reads = asyncio.gather(*(self.query(p.query, at=at, deadline=deadline) for p in plans))
        # A counter read through its rule: which series moved since the rule ran, asked beside.
        fresh = [
            i
            for i, (r, p) in enumerate(zip(requests, plans, strict=True))
            if p.recorded is not None and at is None and counts_events(r)
        ]
        movements = asyncio.gather(
            *(
                self._moved(requests[i].name, nodes, recorded[plans[i].recorded or ""], deadline)
                for i in fresh
            )
        )
        # Drift over a selection is judged against the whole fleet: its version counts, when
        # a per-node version read is asked for (the drift checks'; not /job-slow's proxies).
        drift = any(r.per_node and r.by for r in requests)
        versions = (
            _version_counts(self, deadline, recorded)
            if nodes is not None and drift
            else _no_versions()
        )
        exists = self._present(filtered, deadline) if filtered else _nothing()
        results, moved, fleet_versions, present = await asyncio.gather(
            reads, movements, versions, exists
        )
        columns: dict[str, Column] = {}
        absent: set[str] = set()
        chosen = frozenset(nodes) if nodes is not None else None
        for request, plan, result in zip(requests, plans, results, strict=True):
            if plan.recorded is not None:
                _as_raw(result, request)
            else:
                _named_as_promql(result, request)
            if plan.select_here and chosen is not None:
                result[:] = [r for r in result if _selected(r, chosen, self.node_label)]
        await asyncio.gather(
            *(
                self._freshen(requests[i], results[i], nodes, window_s, nodes_moved, deadline)
                for i, nodes_moved in zip(fresh, moved, strict=True)
            )
        )
        for request, result in zip(requests, results, strict=True):
            column = _column(request.name, result, self.node_label, chosen)
            if len(column) or request.name in present:
                columns[request.key] = column
            else:
                absent.add(request.name)
        return Table(
            at=at or datetime.now(UTC),
            window_s=window_s,
            columns=columns,
            absent=frozenset(absent),
            fleet_versions=fleet_versions,
        )


MAX_QUERY_CHARS = 16_000
"""Below VictoriaMetrics' default -search.maxQueryLen (16 KiB): a longer query it refuses."""

FRESH_MARGIN_S = 30
"""Read what moved this much before a rule's run too: a scrape's samples carry its start's
time and may be stored after a rule evaluated at a later instant."""
FRESH_NODES_AT_MOST = 256
"""Past this many nodes moved, a counter is read raw whole rather than node by node."""


def counts_events(request: MetricRequest) -> bool:
    """A counter whose every increment is a fault (Xids, NVLink, PCIe, InfiniBand and NIC
    errors, reboots): the one kind a rule's lag holds back. A counter judged past a threshold
    (seconds at the power cap) builds up over the window, and on a busy fleet moves on most
    GPUs all the time: re-read raw each sweep it would cost as much as having no rule."""
    return request.reading is not Reading.VALUE and request.keep in ("", "> 0")


def moved_query(metric: str, nodes: Sequence[str] | None, since_s: int, node_label: str) -> str:
    """The series of `metric` (on `nodes`) whose value changed in the last `since_s` seconds
    or that appeared in them: two instants a series, whatever the counter's window."""
    parts = selector(metric, nodes, node_label).split(" or ")
    before = [f"{p} offset {since_s}s" for p in parts]
    return " or ".join(
        f"({p} != {b}) or ({p} unless {b})" for p, b in zip(parts, before, strict=True)
    )


class Plan(NamedTuple):
    query: str
    recorded: str | None  # the recorded series it reads; None: raw
    select_here: bool  # read wider than the selection: `read` keeps the selection's rows


def _selected(row: Mapping[str, Any], nodes: frozenset[str], node_label: str) -> bool:
    """Whether `selector(..., nodes, node_label)` would have matched the row's series: a
    host label naming one of the nodes, or `instance` naming one with or without a port."""
    labels = row.get("metric") or {}
    for label in (*m.HOST_LABELS, node_label):
        if labels.get(label) in nodes:
            return True
    instance = labels.get(m.LABEL_INSTANCE)
    if not instance:
        return False
    host, sep, port = instance.rpartition(":")
    return instance in nodes or (bool(sep) and port.isdigit() and host in nodes)


def _pace_points(slowest: list[dict[str, Any]], median: list[dict[str, Any]]) -> list[PacePoint]:
    def points(result: list[dict[str, Any]]) -> dict[float, float]:
        values = result[0].get("values") if result else None
        out = {}
        for t, v in values or ():
            value = float(v)
            if value == value:
                out[float(t)] = value
        return out

    top, mid = points(slowest), points(median)
    return [
        PacePoint(datetime.fromtimestamp(t, UTC), top[t], mid[t])
        for t in sorted(top.keys() & mid.keys())
    ]


def _covers(sentinel: list[dict[str, Any]], start: datetime, end: datetime, step_s: int) -> bool:
    """Whether a rule's sentinel series (value: when it ran) shows it running from the
    range's first step to its last, fresh at the end."""
    values = sentinel[0].get("values") if len(sentinel) == 1 else None
    if not values:
        return False
    try:
        first_t = float(values[0][0])
        last_t, last_made = (float(v) for v in values[-1])
        interval = float(sentinel[0]["metric"][rules.SENTINEL_LABEL])
    except (KeyError, IndexError, TypeError, ValueError):
        return False
    return (
        first_t <= start.timestamp() + step_s
        and last_t >= end.timestamp() - step_s
        and last_t - last_made <= rules.max_age_s(interval)
    )


SENTINELS = f'{{{rules.SENTINEL_LABEL}!=""}} or vector(time())'
"""The sentinel rows, and the engine's clock as a row without labels (see `fresh_rules`)."""


def fresh_rules(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The recorded series whose sentinel row (value: when its rule last ran; label: the
    group's interval) is recent enough, from an instant query's rows, and each one's age.

    The age is counted on the engine's clock, `time()` (asked beside: a row without labels),
    not on the answer's stamp: VictoriaMetrics answers an instant of its newest 30 s
    (-search.latencyOffset) as of 30 s before, yet stamps the instant asked, so against the
    stamp each rule looked 30 s further behind a raw read than it is."""
    clock = next((r["value"][-1] for r in rows if not r.get("metric") and r.get("value")), None)
    fresh: dict[str, float] = {}
    for row in rows:
        labels = row.get("metric") or {}
        try:
            now, made = (float(v) for v in row["value"])
            now = now if clock is None else float(clock)
            interval = float(labels[rules.SENTINEL_LABEL])
        except (KeyError, TypeError, ValueError):
            continue
        if now - made <= rules.max_age_s(interval) and labels.get("__name__"):
            fresh[labels["__name__"]] = max(0.0, now - made)
    return fresh


async def _no_versions() -> dict[str, dict[str, int]]:
    return {}


async def _nothing() -> set[str]:
    return set()


def _as_raw(result: list[dict[str, Any]], request: MetricRequest) -> None:
    """Recorded rows as the raw query's rows: no sentinel, and the labels the raw rows have
    (the rule named them after itself; the raw query keeps the metric's name or drops it)."""
    result[:] = [r for r in result if rules.SENTINEL_LABEL not in (r.get("metric") or {})]
    _named_as_promql(result, request)


def _named_as_promql(result: list[dict[str, Any]], request: MetricRequest) -> None:
    """Each row named as PromQL names a row of the raw query: MetricsQL (VictoriaMetrics)
    keeps `__name__` through functions that drop it in PromQL, so a row of one engine would
    be another series than the same row of the other."""
    for row in result:
        labels = row.get("metric")
        if isinstance(labels, dict):
            if rules.keeps_name(request):
                labels["__name__"] = request.name
            else:
                labels.pop("__name__", None)


async def _version_counts(
    metrics: PrometheusMetrics, deadline: Deadline, recorded: Collection[str]
) -> dict[str, dict[str, int]]:
    """Nodes per version for each version label, fleet-wide, in one aggregation each."""

    async def one(metric: str, label: str) -> tuple[str, dict[str, int]]:
        q = rules.version_count_query(metric, label, metrics.node_label)
        name = rules.recorded_name(q, metric)
        rows = await metrics.query(name if name in recorded else q, at=None, deadline=deadline)
        if name in recorded:
            metrics.recorded_reads += 1
        counts = {}
        for row in rows:
            value = (row.get("metric") or {}).get(label)
            if value:
                counts[value] = int(float(row["value"][1]))
        return label, counts

    pairs = await asyncio.gather(*(one(mt, lb) for mt, lb in VERSION_LABELS))
    return dict(pairs)


def _column(
    name: str,
    result: list[dict[str, Any]],
    node_label: str,
    chosen: frozenset[str] | None = None,
) -> Column:
    """The rows as a column; for a read of `chosen` nodes, each row is the chosen node one of
    its host labels names (on Kubernetes, dcgm-exporter's Hostname may be its own pod's name
    and the node only in a relabelled `node`)."""
    labels: list[Mapping[str, str]] = []
    nodes: list[str] = []
    values: list[float] = []
    for row in result:
        metric = row.get("metric") or {}
        node = (
            node_name(metric, node_label=node_label)
            if chosen is None
            else node_in(metric, chosen, node_label=node_label)
        )
        try:
            value = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if node is None or math.isnan(value):
            continue
        labels.append(metric)
        nodes.append(node)
        values.append(value)
    return Column(name=name, values=values, node=nodes.__getitem__, labels=labels.__getitem__)


class PrometheusInventory:
    """Nodes as Prometheus sees them: every host exporting DCGM or node_exporter series.

    Topology is not in the metrics: it comes from MEOWBOT_CONFIG's `topology:` (hostlists per
    leaf switch and rack); without it, grouping by switch is not possible.
    """

    REFRESH_S = 60.0

    def __init__(self, metrics: PrometheusMetrics, topology: Topology | None = None) -> None:
        self.metrics = metrics
        self.topology = topology
        self._names: tuple[str, ...] = ()
        self._loaded_at: float | None = None  # never loaded yet

    async def load(self) -> None:
        if ticks.since(self._loaded_at) < self.REFRESH_S:
            return
        table = await self.metrics.read(
            [
                MetricRequest(m.DCGM_FI_DEV_GPU_TEMP, per_node=True),
                MetricRequest(m.NODE_UNAME_INFO, per_node=True),
            ],
            nodes=None,
            window_s=60,
        )
        names = {col.node(i) for col in table.columns.values() for i in range(len(col))}
        self._names = tuple(sorted(names))
        self._loaded_at = ticks.now()

    def names(self) -> Sequence[str]:
        return self._names

    def node(self, name: str) -> None:
        return None

    def leaf_switch(self, name: str) -> str | None:
        return self.topology.leaf_switch(name) if self.topology is not None else None

    def place(self, name: str) -> Place | None:
        return self.topology.place(name) if self.topology is not None else None
