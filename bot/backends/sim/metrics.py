"""The metrics port over the simulated fleet: the same `Table` the Prometheus adapter builds.

Counters are read as Prometheus would: `increase` is the growth between `at - window` and `at`,
`changes` a gauge's value where it moved in between (0 where not). Columns are the snapshot's
own arrays (a GPU absent from the bus is NaN, as a missing series would be), so 400,000 GPUs
cost a list each.
"""

from __future__ import annotations

import statistics
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from bot import metric_names as m
from bot.backends.sim.exposition import FAMILY_BY_NAME
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.snapshot import RANK_METRICS, FleetSnapshot
from bot.give_way import give_way, in_slices
from bot.models import Node
from bot.offload import Offload
from bot.triage.stragglers import PacePoint, RankTime, StragglerConfig
from bot.triage.table import VERSION_LABELS, Column, MetricRequest, Reading, Table, node_name

PACE_BUDGET = 400_000
"""Rank values a pace series may cost the simulation; a larger job gets a coarser step (a job
of more than 139 ranks over 48 h loses the minute step: a 172-node job's is 10 minutes)."""


class SimMetrics:
    name = "the simulated fleet"

    def __init__(self, fleet: SimFleet, *, live: bool = False, cpu: Offload | None = None) -> None:
        self.fleet = fleet
        # The simulation stands in for Prometheus, whose work is in another process: here it
        # runs on a worker thread, so that the bot's event loop does only what it would with
        # a real backend (a 50,000-node read costs 0.1-0.4 s of CPU).
        self.cpu = cpu or Offload()
        # Live (the bot on the simulated fleet), a read is of the wall-clock minute, as a
        # Prometheus read is of its time: else an answer at 22:43 says "Checked 22:00". Tests
        # keep the fleet's own instant, so that what they inject is where they read.
        self.live = live
        self.queries = 0  # reads of one metric, comparable with Prometheus' query count

    def clock(self) -> datetime:
        """When a read without `at` reads: the fleet's instant, or now when live."""
        if not self.live:
            return self.fleet.now
        return max(self.fleet.now, datetime.now(UTC).replace(second=0, microsecond=0))

    async def read(
        self,
        requests: Sequence[MetricRequest],
        *,
        nodes: Sequence[str] | None,
        window_s: float,
        at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> Table:
        return await self.cpu.run(self.read_now, requests, nodes=nodes, window_s=window_s, at=at)

    def read_now(
        self,
        requests: Sequence[MetricRequest],
        *,
        nodes: Sequence[str] | None,
        window_s: float,
        at: datetime | None = None,
    ) -> Table:
        at = at or self.clock()
        known = set(self.fleet.nodes) if nodes is not None else None
        scope = [n for n in nodes if n in known] if nodes is not None and known else None
        if nodes is not None and not scope:
            return Table(
                at=at, window_s=window_s, columns={}, absent=frozenset(r.name for r in requests)
            )
        now = self.fleet.snapshot(at, scope)
        before = None
        columns: dict[str, Column] = {}
        absent: set[str] = set()
        for request in requests:
            give_way()  # between metrics, the acks of a burst go first (bot/give_way.py)
            self.queries += 1
            family = FAMILY_BY_NAME.get(request.name)
            if family is not None and family.entity in ("xid", "health", "clock"):
                # Sparse (a row per GPU and code seen, or per GPU and health watch): read as
                # rows, as Prometheus would.
                sparse = _sparse_column(self.fleet, request, now, at, window_s, scope)
                if sparse is None:
                    absent.add(request.name)
                else:
                    columns[request.key] = sparse
                continue
            values = now.values(request.name) if family is not None else None
            if values is None:
                absent.add(request.name)
                continue
            if request.reading is Reading.MEDIAN:
                values = _median_over(self.fleet, request.name, values, at, window_s, scope)
            elif request.reading is not Reading.VALUE:
                if before is None:
                    before = self.fleet.snapshot(at - timedelta(seconds=window_s), scope)
                old = before.values(request.name) or values
                if len(old) != len(values):
                    raise ValueError("columns of different lengths")
                # Lazily, a slice at a time: a worker stands aside between two.
                pairs = (
                    zip(values[part], old[part], strict=True)
                    for part in in_slices(len(values), STEP_ROWS)
                )
                if request.reading in (Reading.INCREASE, Reading.EVENTS):
                    # Counters here never reset, so growth is the plain difference.
                    values = [v - o for pair in pairs for v, o in pair]
                else:
                    values = [0.0 if v == o else v for pair in pairs for v, o in pair]
            # Per-node and short-node reads are only what the backend may leave out: the
            # whole column answers them too, and the checks apply their exact tests.
            columns[request.key] = _column(now, request.name, values)
        return Table(
            at=at.astimezone(UTC),
            window_s=window_s,
            columns=columns,
            absent=frozenset(absent),
            fleet_versions=self._version_counts(at) if nodes is not None else {},
        )

    def _version_counts(self, at: datetime) -> dict[str, dict[str, int]]:
        """Nodes per version fleet-wide, as Prometheus' `count by` answers it."""
        snap = self.fleet.snapshot(at)
        out: dict[str, dict[str, int]] = {}
        for metric, label in VERSION_LABELS:
            values = snap.values(metric)
            if values is None:
                continue
            column = _column(snap, metric, values)
            counts: Counter[str] = Counter()
            for i in column.node_rows or ():
                if not i & 4095:
                    give_way()  # 50,000 nodes' labels are tens of ms: the acks go first
                version = column.label(i, label)
                if version:
                    counts[version] += 1
            out[label] = dict(counts)
        return out

    async def step_times(
        self,
        job_id: str,
        cfg: StragglerConfig,
        *,
        at: datetime | None = None,
        timeout_s: float | None = None,
        metric: str | None = None,
    ) -> list[RankTime]:
        """Each rank's step time (or `metric`'s value: the compute time or collective wait)
        averaged over three instants of `cfg.average_s`."""
        self.queries += 1
        return await self.cpu.run(self._step_times, job_id, cfg, at, metric)

    def _step_times(
        self, job_id: str, cfg: StragglerConfig, at: datetime | None, metric: str | None
    ) -> list[RankTime]:
        index = self._job_index(job_id)
        if index is None:
            return []
        at = at or self.clock()
        spec = self.fleet.job_specs[index]
        # The fleet exports the three under their default names; the config may rename them.
        configured = (cfg.step_metric, cfg.compute_metric, cfg.wait_metric)
        wanted = metric or cfg.step_metric
        if wanted not in configured:
            return []
        pick = configured.index(wanted)
        if RANK_METRICS[pick] not in self.fleet.exported:
            return []
        if pick and not spec.exports_compute_time:
            return []
        names = [self.fleet.topology.names[n] for n in spec.nodes]
        sums: dict[tuple[int, int], list[float]] = {}
        stages: dict[int, int] = {}
        for k in range(3):
            t = at - timedelta(seconds=cfg.average_s * k / 2)
            snap = self.fleet.snapshot(t, names)
            for _, n, rank, stage, *values in snap.rank_times(index):
                sums.setdefault((n, rank), []).append(values[pick])
                stages[rank] = stage
        topo = self.fleet.topology.names
        staged = spec.pipeline_stages > 1
        return [
            RankTime(topo[n], rank, stages[rank] if staged else None, sum(v) / len(v))
            for (n, rank), v in sorted(sums.items(), key=lambda kv: kv[0][1])
        ]

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
        """The job's slowest and median rank over time. The step is widened so that a huge
        job costs at most ~PACE_BUDGET rank values (Prometheus does this server-side)."""
        self.queries += 2
        return await self.cpu.run(self._pace, job_id, start, end, step_s)

    def _pace(self, job_id: str, start: datetime, end: datetime, step_s: int) -> list[PacePoint]:
        index = self._job_index(job_id)
        if index is None:
            return []
        spec = self.fleet.job_specs[index]
        ranks = max(1, len(spec.nodes) * self.fleet.gpus_per_node)
        span = max(0.0, (end - start).total_seconds())
        step = max(step_s, 60, int(span * ranks / PACE_BUDGET) // 60 * 60)
        names = [self.fleet.topology.names[n] for n in spec.nodes]
        out = []
        t = start
        while t <= end:
            values = [v for *_, v in self.fleet.snapshot(t, names).step_times(index)]
            if values:
                out.append(PacePoint(t, max(values), statistics.median(values)))
            t += timedelta(seconds=step)
        return out

    def _job_index(self, job_id: str) -> int | None:
        return self.fleet.job_position(job_id)

    async def close(self) -> None:
        return None


MEDIAN_SAMPLES = 10
"""Instants a median over the window reads besides ``at`` (the fleet's noise moves each minute,
so a 10-minute window holds about this many distinct values, as Prometheus' samples do)."""


STEP_ROWS = 65_536
"""Rows of a column computed between two stand-asides (bot/give_way.py: in_slices)."""


def _median_over(
    fleet: SimFleet,
    metric: str,
    now: Sequence[float],
    at: datetime,
    window_s: float,
    scope: Sequence[str] | None,
) -> list[float]:
    """Each series' median over the window, as `quantile_over_time(0.5, ...)` gives it."""
    columns = [now]
    for k in range(1, MEDIAN_SAMPLES + 1):
        values = fleet.snapshot(at - timedelta(seconds=window_s * k / MEDIAN_SAMPLES), scope)
        col = values.values(metric)
        if col is not None and len(col) == len(now):
            columns.append(col)
    # An odd count (``at`` and MEDIAN_SAMPLES more): the median is the middle value.
    middle = len(columns) // 2
    if len(columns) % 2:
        return [sorted(v)[middle] for v in zip(*columns, strict=True)]
    return [statistics.median(v) for v in zip(*columns, strict=True)]


def _sparse_column(
    fleet: SimFleet,
    request: MetricRequest,
    now: FleetSnapshot,
    at: datetime,
    window_s: float,
    scope: Sequence[str] | None,
) -> Column | None:
    family = FAMILY_BY_NAME[request.name]
    if family.name not in fleet.exported:
        return None
    rows = list(now.rows(family))
    if request.reading in (Reading.INCREASE, Reading.EVENTS):
        # A row the window's start did not have (a code's first Xid) counts whole.
        before = fleet.snapshot(at - timedelta(seconds=window_s), scope)
        old = dict(before.rows(family))
        rows = [(labels, value - old.get(labels, 0.0)) for labels, value in rows]
    label_maps = [dict(labels) for labels, _ in rows]
    nodes = [node_name(lm) or "" for lm in label_maps]
    return Column(
        name=request.name,
        values=[value for _, value in rows],
        node=nodes.__getitem__,
        labels=label_maps.__getitem__,
    )


def _column(snap: FleetSnapshot, name: str, values: Sequence[float]) -> Column:
    """A column straight off the snapshot's arrays: labels only for rows a check looks at."""
    mult = (
        snap.gpus_per_node
        if FAMILY_BY_NAME[name].entity == "gpu"
        else snap.scope.mult[FAMILY_BY_NAME[name].entity]
    )
    names = snap.nodes

    def node(i: int) -> str:
        return names[i // mult]

    cache: dict[int, Mapping[str, str]] = {}

    def labels(i: int) -> Mapping[str, str]:
        found = cache.get(i)
        if found is None:
            found = cache[i] = snap.labels_at(name, i)
        return found

    def label_of(i: int, key: str) -> str | None:
        slot = _VERSION_SLOT.get(key)
        if slot is None:
            return labels(i).get(key)
        return snap.versions(i // mult)[slot]

    return Column(
        name=name,
        # Doubles the collector does not walk (see FleetSnapshot.values).
        values=values if isinstance(values, array) else array("d", values),
        node=node,
        labels=labels,
        node_rows=range(0, len(values), mult),
        label_of=label_of,
    )


# Where each version label sits in FleetSnapshot.versions(): (driver, kernel, firmware).
_VERSION_SLOT = {m.LABEL_DRIVER_VERSION: 0, m.LABEL_RELEASE: 1, m.LABEL_VBIOS_VERSION: 2}


class SimInventory:
    """The simulated fleet's own inventory: every node, with topology and versions."""

    def __init__(self, fleet: SimFleet) -> None:
        self.fleet = fleet

    async def load(self) -> None:
        return None

    def names(self) -> Sequence[str]:
        return self.fleet.nodes

    def node(self, name: str) -> Node | None:
        try:
            return self.fleet.node(name)
        except (KeyError, ValueError):
            return None

    def place(self, name: str) -> Node | None:
        return self.node(name)

    def leaf_switch(self, name: str) -> str | None:
        return str(self.fleet.topology.leaf_switch(name))
