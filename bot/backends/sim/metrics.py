"""The metrics port over the simulated fleet: the same `Table` the Prometheus adapter builds.

Counters are read as Prometheus would: `increase` is the growth between `at - window` and `at`,
`changes` whether a gauge moved in between. Node names come from the series' own labels
through `node_name`, exactly as for Prometheus results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from bot.backends.sim.exposition import Labels
from bot.backends.sim.fleet import SimFleet
from bot.models import Node
from bot.triage.table import Column, MetricRequest, Reading, Table, node_name


class SimMetrics:
    name = "the simulated fleet"

    def __init__(self, fleet: SimFleet) -> None:
        self.fleet = fleet
        self.queries = 0  # reads of one metric, comparable with Prometheus' query count

    async def read(
        self,
        requests: Sequence[MetricRequest],
        *,
        nodes: Sequence[str] | None,
        window_s: float,
        at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> Table:
        return self.read_now(requests, nodes=nodes, window_s=window_s, at=at)

    def read_now(
        self,
        requests: Sequence[MetricRequest],
        *,
        nodes: Sequence[str] | None,
        window_s: float,
        at: datetime | None = None,
    ) -> Table:
        at = at or self.fleet.now
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
            self.queries += 1
            families = [f for f in self.fleet.families() if f.name == request.name]
            if not families:
                absent.add(request.name)
                continue
            rows = list(now.rows(families[0]))
            if request.reading is not Reading.VALUE:
                if before is None:
                    before = self.fleet.snapshot(at - timedelta(seconds=window_s), scope)
                old = dict(before.rows(families[0]))
                if request.reading is Reading.INCREASE:
                    rows = [(lb, max(0.0, v - old.get(lb, v))) for lb, v in rows]
                else:
                    rows = [(lb, 1.0 if lb in old and old[lb] != v else 0.0) for lb, v in rows]
            column = _column(request.name, rows)
            if len(column) == 0:
                absent.add(request.name)
            else:
                columns[request.name] = column
        return Table(
            at=at.astimezone(UTC), window_s=window_s, columns=columns, absent=frozenset(absent)
        )

    async def close(self) -> None:
        return None


def _column(name: str, rows: list[tuple[Labels, float]]) -> Column:
    label_maps: list[Mapping[str, str]] = []
    node_names: list[str] = []
    values: list[float] = []
    for labels, value in rows:
        as_map = dict(labels)
        node = node_name(as_map)
        if node is None:
            continue
        label_maps.append(as_map)
        node_names.append(node)
        values.append(value)
    return Column(
        name=name, values=values, node=node_names.__getitem__, labels=label_maps.__getitem__
    )


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
