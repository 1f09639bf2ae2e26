"""What the health checks read: one column of values per metric, however it was fetched.

A fleet of 50,000 nodes has 400,000 GPUs; the checks must not build an object per series.
So each metric arrives as a `Column`: parallel sequences of values and rows, with the node of
a row and its labels looked up only for the few rows a check flags. The Prometheus adapter
builds columns from query results; the simulated fleet from its own arrays. Both resolve the
node name at the edge (`node_name`), so the checks never see exporter label spellings.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from bot import metric_names as m


class Reading(StrEnum):
    """How a metric is read: its current value, or how much a counter grew in the window."""

    VALUE = "value"
    INCREASE = "increase"
    # Where a gauge moved in the window, its value now, else 0: a boot time that moved is the
    # reboot and says when it was (a count of the moves would lose the instant). For gauges
    # that never move to 0 or below, as a boot time never does.
    CHANGES = "changes"
    # A gauge's median over the window: a busy GPU's clock or utilisation read between two
    # steps dips for an instant, and one such sample must not make a healthy node lag.
    MEDIAN = "median"
    # How many events a counter counted in the window, where the counter starts with its
    # exporter and a series appears only with its first event (DCGM_EXP_XID_ERRORS_TOTAL
    # starts at 1): a series born in the window counts whole, where increase() would read a
    # lone first sample as no growth and miss the first Xid, often the only one.
    EVENTS = "events"


@dataclass(frozen=True)
class MetricRequest:
    name: str
    reading: Reading = Reading.VALUE
    # A PromQL comparison the backend may apply before answering ("> 0", "!= 4"), so that a
    # fleet of healthy GPUs is not shipped over the wire to be judged healthy here. Checks
    # apply their exact test again, so a backend that ignores it (the simulation) stays right.
    # `{field}` names a HealthConfig field, filled in by `requests_for`.
    keep: str = ""
    # The backend may answer one row per node (and per value of `by`) instead of a row per
    # series: what version a node runs needs one row a node, not eight.
    per_node: bool = False
    by: tuple[str, ...] = ()
    # The backend may answer only the series of nodes with fewer series than this (`{field}`
    # allowed, as for `keep`): the GPU count needs the rows of short nodes only.
    fewer_per_node: str = ""
    # The backend may answer one row a node, its lowest value (a job's slowest GPU clock):
    # readers take the minimum per node of whatever rows come.
    lowest_per_node: bool = False

    @property
    def key(self) -> str:
        """The column's name in the `Table`: a metric read two ways gives two columns."""
        if self.per_node:
            return f"{self.name} per node" + (f" by {','.join(self.by)}" if self.by else "")
        if self.fewer_per_node:
            return f"{self.name} on short nodes"  # the count is config: not in the key
        if self.lowest_per_node:
            return f"{self.name} lowest per node"
        return self.name


@dataclass(frozen=True)
class Column:
    """One metric: `values[i]` belongs to node `node(i)` with labels `labels(i)`."""

    name: str
    values: Sequence[float]
    node: Callable[[int], str]
    labels: Callable[[int], Mapping[str, str]]
    # Where known, one row per node (the first of each): per-node facts such as versions
    # then cost one label lookup a node instead of one a series.
    node_rows: Sequence[int] | None = None
    # Where known, one label of a row without building all its labels (the versions).
    label_of: Callable[[int, str], str | None] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def label(self, i: int, key: str) -> str | None:
        if self.label_of is not None:
            return self.label_of(i, key)
        return self.labels(i).get(key)


@dataclass(frozen=True)
class Table:
    """The metrics of one read: the present metrics' columns by request key (empty when the
    backend's `keep` left no row: present and healthy), and the metric names that were absent."""

    at: datetime
    window_s: float
    columns: Mapping[str, Column]
    absent: frozenset[str] = field(default_factory=frozenset)
    # Nodes per version across the whole fleet, by label (driver, kernel, firmware), when the
    # table itself holds only some nodes: drift is judged against the fleet, not the subset.
    fleet_versions: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def merged(self, other: Table) -> Table:
        """This read and another of the same instant: their columns side by side."""
        return Table(
            self.at,
            self.window_s,
            {**self.columns, **other.columns},
            self.absent | other.absent,
            self.fleet_versions or other.fleet_versions,
        )

    def get(self, *names: str) -> Column | None:
        """The first present of several names (a metric renamed between exporter versions)."""
        for name in names:
            col = self.columns.get(name)
            if col is not None:
                return col  # present, though maybe with no row left after the backend's filter
        return None


# (metric, label) pairs whose fleet-wide majority the drift checks compare against.
VERSION_LABELS: tuple[tuple[str, str], ...] = (
    (m.DCGM_FI_DEV_GPU_TEMP, m.LABEL_DRIVER_VERSION),
    (m.DCGM_FI_DEV_GPU_TEMP, m.LABEL_VBIOS_VERSION),
    (m.NODE_UNAME_INFO, m.LABEL_RELEASE),
)


def node_name(labels: Mapping[str, str], *, node_label: str = "node") -> str | None:
    """The node a series belongs to: DCGM's Hostname/hostname, instance, or a node label."""
    for key in m.HOST_LABELS:
        value = labels.get(key)
        if value:
            return value
    # instance before a `node` label: node_exporter's NUMA series use `node` for the domain.
    instance = labels.get(m.LABEL_INSTANCE)
    if instance:
        host, sep, port = instance.rpartition(":")
        return host if sep and port.isdigit() else instance
    return labels.get(node_label) or None


def node_in(
    labels: Mapping[str, str], nodes: Collection[str], *, node_label: str = "node"
) -> str | None:
    """The node of `nodes` a series belongs to, whichever of its host labels names it.

    On Kubernetes, dcgm-exporter in a pod off the host's network takes the pod's name for its
    Hostname, and `instance` is that pod's address; the node is then only in a label
    the scrape config copies from `__meta_kubernetes_pod_node_name` (`node_label`). A read of
    chosen nodes matched the series by any of these, so the row is the chosen node one of
    them names; `node_name`'s pick when none does."""
    first = node_name(labels, node_label=node_label)
    if first is None or first in nodes:
        return first
    for key in (*m.HOST_LABELS, node_label):
        value = labels.get(key)
        if value and value in nodes:
            return value
    instance = labels.get(m.LABEL_INSTANCE) or ""
    host, sep, port = instance.rpartition(":")
    if sep and port.isdigit() and host in nodes:
        return host
    return first
