"""A simulated week of node metrics in which a fault kind may hide a precursor.

Every default candidate of /hw-faults why (bot/precursors/config.py) has a profile here: each
node's own level, a daily cycle, minute-to-minute noise, and benign excursions (a backup
saturating the NIC, a hot afternoon) that no fault follows. A `HiddenPrecursor` then puts one
candidate above (or below) its usual range for a few minutes before some of one kind's events,
and not before the others: the finder must find it among all that, and must find nothing where
no precursor is hidden.

Deterministic from the seed: a node's minute series of a candidate is drawn from a generator
seeded by (seed, candidate, node) over the whole world, so any read of any part of it returns
the same values. numpy draws a week of minutes in microseconds; nothing is kept per node.
"""

from __future__ import annotations

import bisect
import math
import random
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from bot import metric_names as m
from bot.backends.sim.fleet import SimFleet
from bot.precursors.models import Event

MINUTE = 60


@dataclass(frozen=True, slots=True)
class Profile:
    """How one candidate behaves on a healthy node: `base` is drawn per node in the range,
    `daily` the amplitude of its daily cycle (peaking mid-afternoon), `noise` the minute
    noise, `hot` a value that only benign excursions and the precursor reach, `floor` where it
    stops. `metric`, `scale` and `labels` say how it is exported: a counter of `value / scale`
    a second, or a gauge of `value / scale`."""

    part: str
    base: tuple[float, float]
    daily: float
    noise: float
    hot: float
    metric: str
    scale: float = 1.0
    counter: bool = False
    exporter: str = "node"  # "node": instance=<node>:9100; "dcgm": Hostname=<node>, gpu="0"
    labels: tuple[tuple[str, str], ...] = ()
    floor: float = 0.0
    below: bool = False


GBPS = 8 / 1e9
PROFILES: dict[str, Profile] = {
    "network transmit": Profile(
        "eth0",
        (2, 8),
        3,
        1.2,
        32,
        m.NODE_NETWORK_TRANSMIT_BYTES_TOTAL,
        GBPS,
        True,
        labels=(("device", "eth0"),),
    ),
    "network receive": Profile(
        "eth0",
        (2, 8),
        3,
        1.2,
        32,
        m.NODE_NETWORK_RECEIVE_BYTES_TOTAL,
        GBPS,
        True,
        labels=(("device", "eth0"),),
    ),
    "InfiniBand transmit": Profile(
        "mlx5_0",
        (100, 250),
        60,
        15,
        420,
        m.NODE_INFINIBAND_PORT_DATA_TRANSMITTED_BYTES_TOTAL,
        GBPS,
        True,
        labels=(("device", "mlx5_0"), ("port", "1")),
    ),
    "InfiniBand receive": Profile(
        "mlx5_0",
        (100, 250),
        60,
        15,
        420,
        m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL,
        GBPS,
        True,
        labels=(("device", "mlx5_0"), ("port", "1")),
    ),
    "InfiniBand symbol errors": Profile(
        "",
        (0, 0.2),
        0,
        0.3,
        8,
        m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL,
        60.0,
        True,
        labels=(("device", "mlx5_0"), ("port", "1")),
    ),
    "GPU power": Profile("", (300, 450), 120, 25, 760, m.DCGM_FI_DEV_POWER_USAGE, exporter="dcgm"),
    "GPU temperature": Profile("", (45, 60), 8, 1.5, 86, m.DCGM_FI_DEV_GPU_TEMP, exporter="dcgm"),
    "SM clock": Profile(
        "",
        (1950, 1980),
        0,
        12,
        1400,
        m.DCGM_FI_DEV_SM_CLOCK,
        exporter="dcgm",
        below=True,
    ),
    "PCIe replays": Profile(
        "", (0, 0.1), 0, 0.2, 20, m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, 60.0, True, "dcgm"
    ),
    "CPU pressure": Profile(
        "", (0.01, 0.08), 0.04, 0.02, 0.6, m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL, 1.0, True
    ),
    "memory pressure": Profile(
        "", (0.0, 0.03), 0.01, 0.01, 0.4, m.NODE_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL, 1.0, True
    ),
    "load": Profile("", (10, 50), 15, 4, 160, m.NODE_LOAD1),
}
"""The twelve default candidates, by name."""

KIND_METRIC = {
    "unexpected_reboot": m.NODE_BOOT_TIME_SECONDS,
    "xid": m.DCGM_EXP_XID_ERRORS_TOTAL,
    "ib_link_down": m.NODE_INFINIBAND_LINK_DOWNED_TOTAL,
}
"""The fault kinds whose events the world places, and what shows each."""


@dataclass(frozen=True, slots=True)
class HiddenPrecursor:
    """`candidate` goes past its `hot` value (times 1.0-1.15) for `lead_s` (a range) before
    each of `kind`'s events with chance `share`."""

    kind: str = "unexpected_reboot"
    candidate: str = "network transmit"
    share: float = 0.8
    lead_s: tuple[float, float] = (120.0, 540.0)


@dataclass(frozen=True, slots=True)
class _Span:
    start: float
    end: float
    value: float


def _seed(*parts: object) -> int:
    return zlib.crc32(":".join(str(p) for p in parts).encode())


@dataclass
class PrecursorWorld:
    """`days` of the nodes' metrics ending at `end`, with `events[kind]` events of each kind
    and at most one hidden precursor. `spikes_per_day` benign excursions a node a day, of
    every candidate."""

    names: Sequence[str]
    seed: int
    end: datetime
    days: float = 7.0
    events_per_kind: dict[str, int] = field(default_factory=dict)
    hidden: HiddenPrecursor | None = None
    spikes_per_day: float = 0.15
    extra_events: Sequence[Event] = ()

    def __post_init__(self) -> None:
        self.end_s = math.floor(self.end.timestamp() / MINUTE) * MINUTE
        # A day before the window too: ordinary windows and rate() need what came before.
        self.t0 = self.end_s - int((self.days + 1) * 86400)
        self.minutes = (self.end_s - self.t0) // MINUTE + 1
        self.index = {n: i for i, n in enumerate(self.names)}
        rng = random.Random(_seed("precursor-events", self.seed))
        start = self.end_s - self.days * 86400
        events: list[Event] = list(self.extra_events)
        for kind, n in sorted(self.events_per_kind.items()):
            for _ in range(n):
                node = self.names[rng.randrange(len(self.names))]
                at = rng.uniform(start + 3600, self.end_s - 600)
                events.append(Event(kind, node, datetime.fromtimestamp(int(at), UTC)))
        self.events = sorted(events, key=lambda e: (e.at, e.node))
        self._leads: dict[str, list[_Span]] = {}
        h = self.hidden
        if h is not None:
            prof = PROFILES[h.candidate]
            for e in self.events:
                if e.kind != h.kind or rng.random() >= h.share:
                    continue
                at = e.at.timestamp()
                lead = rng.uniform(*h.lead_s)
                push = rng.uniform(1.0, 1.15)
                value = prof.hot / push if prof.below else prof.hot * push
                self._leads.setdefault(e.node, []).append(_Span(at - lead, at, value))

    @property
    def start(self) -> datetime:
        return datetime.fromtimestamp(self.end_s - self.days * 86400, UTC)

    def kinds(self) -> tuple[str, ...]:
        return tuple(KIND_METRIC)

    def minute_of(self, t: float) -> int:
        return int((t - self.t0) // MINUTE)

    def time_of(self, i: int) -> float:
        return float(self.t0 + i * MINUTE)

    def series(self, candidate: str, node: str) -> np.ndarray | None:
        """The node's value of the candidate at every minute of the world (None: unknown)."""
        prof = PROFILES.get(candidate)
        if prof is None or node not in self.index:
            return None
        rng = np.random.default_rng(_seed("precursor-series", self.seed, candidate, node))
        base = rng.uniform(*prof.base)
        t = self.t0 + MINUTE * np.arange(self.minutes, dtype=np.float64)
        # The daily cycle peaks at 15:00 UTC, with a node's own phase within an hour.
        phase = rng.uniform(-1800, 1800)
        values = base + prof.daily * np.sin(2 * np.pi * (t - 9 * 3600 - phase) / 86400)
        values += prof.noise * rng.standard_normal(self.minutes)
        n_spikes = rng.poisson(self.spikes_per_day * (self.days + 1))
        for _ in range(int(n_spikes)):
            at = int(rng.integers(0, self.minutes))
            length = int(rng.integers(5, 21))
            level = prof.hot * rng.uniform(0.8, 1.2)
            if prof.below:
                level = prof.hot / rng.uniform(0.8, 1.2)
            values[at : at + length] = level + prof.noise * rng.standard_normal(
                len(values[at : at + length])
            )
        h = self.hidden
        if h is not None and h.candidate == candidate:
            for span in self._leads.get(node, ()):
                a, b = self.minute_of(span.start), self.minute_of(span.end)
                a, b = max(0, a), max(0, b)
                values[a:b] = span.value + prof.noise * rng.standard_normal(b - a)
        if prof.below:
            return np.asarray(values)
        return np.maximum(values, prof.floor)

    def part(self, candidate: str) -> str:
        return PROFILES[candidate].part

    def events_of(
        self, kind: str, nodes: Sequence[str] | None, start: datetime, end: datetime
    ) -> list[Event]:
        keep = None if nodes is None else set(nodes)
        return [
            e
            for e in self.events
            if e.kind == kind and start <= e.at <= end and (keep is None or e.node in keep)
        ]

    # --- exposition, for a Prometheus backfill ---------------------------------------------
    def openmetrics(
        self,
        candidates: Sequence[str],
        nodes: Sequence[str],
        step_s: int = 60,
        *,
        event_nodes: Sequence[str] | None = None,
        event_step_s: int | None = None,
    ) -> Iterator[str]:
        """The candidates on `nodes` and the events' own metrics on `event_nodes` (the same
        by default) as OpenMetrics samples over the world, one family after the other
        (without the final `# EOF`): what the exporters would have shown, for promtool."""
        every = max(1, step_s // MINUTE)
        for name in candidates:
            prof = PROFILES[name]
            # Typed gauges: PromQL's rate() reads any series, and OpenMetrics would want a
            # counter's samples named `_total`, which DCGM's counters are not.
            yield f"# TYPE {prof.metric} gauge\n"
            for node in nodes:
                values = self.series(name, node)
                assert values is not None
                per_s = values / prof.scale
                # A counter holds the sum of each minute's rate times a minute.
                shown = np.cumsum(per_s * MINUTE) + 1e6 if prof.counter else per_s
                labels = _labels(prof, node)
                yield "".join(
                    f"{prof.metric}{{{labels}}} {shown[i]:.15g} {int(self.time_of(i))}\n"
                    for i in range(0, self.minutes, every)
                )
        yield from self._event_families(
            nodes if event_nodes is None else event_nodes, event_step_s or step_s
        )

    def _event_families(self, nodes: Sequence[str], step_s: int) -> Iterator[str]:
        every = max(1, step_s // MINUTE)
        grid = [self.time_of(i) for i in range(0, self.minutes, every)]
        origin = float(self.t0 - 30 * 86400)
        for kind, metric in KIND_METRIC.items():
            own: dict[str, list[float]] = {}
            for e in self.events:
                if e.kind == kind:
                    own.setdefault(e.node, []).append(e.at.timestamp())
            yield f"# TYPE {metric} gauge\n"
            for node in nodes:
                times = sorted(own.get(node, ()))
                if metric == m.NODE_BOOT_TIME_SECONDS:
                    labels = f'instance="{node}:{m.NODE_EXPORTER_PORT}",job="{m.SCRAPE_JOB_NODE}"'
                elif metric == m.DCGM_EXP_XID_ERRORS_TOTAL:
                    if not times:
                        continue  # the series appears with its first Xid
                    labels = f'{m.LABEL_HOSTNAME}="{node}",gpu="0",xid="79"'
                else:
                    labels = (
                        f'instance="{node}:{m.NODE_EXPORTER_PORT}",job="{m.SCRAPE_JOB_NODE}",'
                        'device="mlx5_0",port="1"'
                    )
                out = []
                for t in grid:
                    k = bisect.bisect_right(times, t)
                    if metric == m.NODE_BOOT_TIME_SECONDS:
                        value = times[k - 1] if k else origin
                    elif metric == m.DCGM_EXP_XID_ERRORS_TOTAL and k == 0:
                        continue
                    else:
                        value = float(k)
                    out.append(f"{metric}{{{labels}}} {value:.10g} {int(t)}\n")
                yield "".join(out)


def _labels(prof: Profile, node: str) -> str:
    if prof.exporter == "dcgm":
        base = [(m.LABEL_HOSTNAME, node), (m.LABEL_GPU, "0")]
    else:
        base = [(m.LABEL_INSTANCE, f"{node}:{m.NODE_EXPORTER_PORT}"), (m.LABEL_JOB, "node")]
    return ",".join(f'{k}="{v}"' for k, v in (*base, *prof.labels))


def fleet_world(fleet: SimFleet) -> PrecursorWorld:
    """The simulated fleet's own week: nine unexpected reboots, most of them after the
    Ethernet NIC ran past 30 Gbps for a few minutes, and Xids and link downs with nothing
    before them; the faults of those kinds the fleet shows now are among the events."""
    names = fleet.topology.names
    shown = [
        Event(p.fault.kind.value, names[p.node], p.fault.since)
        for p in fleet.placed
        if p.node >= 0 and p.fault.kind.value in KIND_METRIC
    ]
    return PrecursorWorld(
        names,
        fleet.seed,
        fleet.now,
        events_per_kind={"unexpected_reboot": 9, "xid": 6, "ib_link_down": 5},
        hidden=HiddenPrecursor(),
        extra_events=shown,
    )
