"""The metric engine: every value of the simulated fleet at one instant, as columns.

A 50,000-node fleet has 400,000 GPUs; making a Python object per GPU and metric would take many
seconds, so a snapshot computes one flat list per metric on demand ("columnar"): position
``p`` of a GPU column is GPU ``p % gpus_per_node`` of the ``p // gpus_per_node``-th node of the
snapshot, and likewise for IB ports, network interfaces, NUMA domains and nodes. Healthy values
come from per-GPU bases plus a noise table indexed by (GPU, minute), so they are cheap list
operations; injected faults are sparse and patched in afterwards. Exposition, ``samples()`` and
the OpenMetrics history are all read off snapshots, so they cannot disagree with the columns.

A snapshot can also cover a subset of nodes (the history does that per timestamp); a subset
computes exactly the same values as the whole fleet for its nodes.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from bot import metric_names as m
from bot.backends.sim.exposition import FAMILY_BY_NAME, Entity, Family, Labels, Sample
from bot.backends.sim.faults import EFFECTS, Effect, InjectedFault
from bot.backends.sim.inventory import GPU_MODEL, Hardware, Topology
from bot.backends.sim.rollouts import DRIFT_SLOTS, SimRollout
from bot.backends.sim.wander import PaceWander
from bot.backends.sim.workload import COMM_SHARE, REPORT_JITTER, STEP_JITTER, JobSpec
from bot.give_way import give_way
from bot.models import FaultKind
from bot.triage.checks import CHECKS, Exported

NOISE_BITS = 17
NOISE_MASK = (1 << NOISE_BITS) - 1

# Noise channels: each metric reads the noise table at its own offset.
(
    _CH_TEMP,
    _CH_POWER,
    _CH_CLOCK,
    _CH_UTIL,
    _CH_NVLINK,
    _CH_LOAD,
    _CH_STEP,
    _CH_TIMER,
    _CH_CLOCK_DIP,
    _CH_UTIL_DIP,
) = range(1, 11)

IB_RX_IDLE_BYTES_PER_S = 2.0e4
# A busy GPU sampled between two steps (a data-loader wait, a checkpoint write) reads a lower
# clock and utilisation for that sample: one 5-second slot in about 130 of each GPU. A reader
# of one instant would see a few healthy nodes lag at any moment of a big job.
IDLE_DIP_NOISE = 0.985
IDLE_DIP_SLOT_S = 5
IDLE_DIP_SM_CLOCK = 1410.0
IDLE_DIP_GPU_UTIL = 61.0
STICKY_GAUGES = frozenset({m.DCGM_FI_DEV_XID_ERRORS})
POWER_CAP_BURST_EVERY_S = 600.0  # how often a GPU that touches its power cap comes on it
# The clock-event reason each throttle kind turns on (its bit of the bitmask), from its entry.
CLOCK_EVENT_OF: dict[FaultKind, int] = {
    c.kind: int(s.arg)
    for c in CHECKS
    for s in c.injects.sets
    if s.how == "bits" and s.metric == m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS
}

# DCGM's health watches as dcgm-exporter lists them (gpu_health_collector.go, gpuHealthChecks),
# in its order: one DCGM_EXP_GPU_HEALTH_STATUS series per GPU and watch.
HEALTH_WATCHES = (
    "PCIE",
    "NVLINK",
    "PMU",
    "MCU",
    "MEM",
    "SM",
    "INFOROM",
    "THERMAL",
    "POWER",
    "DRIVER",
    "ALL",
)
# Families a check entry adds to the simulated exporters, with their healthy value.
EXPORTED: dict[str, Exported] = {e.metric: e for c in CHECKS for e in c.injects.exports}
# What each fault kind makes DCGM's watches report: (watch, result, DCGM_FR_ error code).
HEALTH_EFFECTS: dict[FaultKind, tuple[str, int, str]] = {
    c.kind: c.injects.health for c in CHECKS if c.injects.health is not None
}

Formula = Callable[[list[float], list[float]], list[float]]
DEFAULT_VERSIONS_INDEX = -1


@dataclass(frozen=True, slots=True)
class Placed:
    """An injected fault resolved to indices: node, GPU, port, interface, NUMA domain, job."""

    fault: InjectedFault
    node: int  # -1 for job-level kinds
    gpu: int
    nic: int  # -1 = every port of the node
    netdev: int
    numa: int
    job: int  # index into the fleet's job specs, -1 when not job-level

    def position(self, entity: Entity, ports: int) -> Sequence[int]:
        """Which entity of the node the fault sits on (several for an all-ports IB fault)."""
        if entity in ("gpu", "xid", "health", "clock"):
            # A fault of the whole node (CPU contention) is on every GPU of it.
            return range(ports) if self.gpu < 0 else (self.gpu,)
        if entity == "nic":
            return range(ports) if self.nic < 0 else (self.nic,)
        if entity == "netdev":
            return (self.netdev,)
        if entity == "numa":
            return (self.numa,)
        return (0,)


@dataclass(frozen=True, slots=True)
class GpuBases:
    """Per-GPU healthy levels: every GPU runs a little warmer or hungrier than its neighbour."""

    temp_busy: list[float]
    temp_idle: list[float]
    power_busy: list[float]
    power_idle: list[float]


class Fleet(Protocol):
    """What a snapshot reads of the fleet it is taken of: `SimFleet` (fleet.py) is the one.

    Named here by what is read, not imported: the fleet makes its snapshots, so it imports this
    module."""

    @property
    def n_nodes(self) -> int: ...
    @property
    def now_s(self) -> int: ...
    @property
    def origin_s(self) -> int: ...
    @property
    def topology(self) -> Topology: ...
    @property
    def hardware(self) -> Hardware: ...
    @property
    def default_versions(self) -> tuple[str, str, str]: ...
    @property
    def exported(self) -> frozenset[str]: ...
    @property
    def job_specs(self) -> list[JobSpec]: ...
    @property
    def node_jobs(self) -> list[list[int]]: ...
    @property
    def placed(self) -> list[Placed]: ...
    @property
    def rollouts(self) -> list[SimRollout]: ...
    @property
    def wander(self) -> PaceWander: ...
    @property
    def noise(self) -> list[float]: ...
    @property
    def noise2(self) -> list[float]: ...
    @property
    def power_cap_noise(self) -> dict[int, float]: ...
    @property
    def sbe_noise(self) -> dict[int, tuple[int, float]]: ...
    @property
    def remapped_rows_noise(self) -> dict[int, float]: ...
    @property
    def link_downed_noise(self) -> dict[int, float]: ...
    @property
    def symbol_error_noise(self) -> dict[int, float]: ...
    @property
    def eth_errors_noise(self) -> dict[int, float]: ...
    def gpu_bases(self) -> GpuBases: ...
    def boot_times(self) -> list[float]: ...
    def ib_rx_rates(self) -> list[float]: ...
    def psi_rates(self) -> list[float]: ...
    def numa_miss_rates(self) -> list[float]: ...
    def busy_seconds(self, node_index: int, t_s: float) -> float: ...
    def host_label_of(self, node_index: int) -> str: ...
    def exports(self, metric: str, node_index: int) -> bool: ...
    def families(self, metrics: Sequence[str] | None = None) -> list[Family]: ...
    def rolled_versions(self, node_index: int, t_s: float) -> tuple[str, str, str]: ...


def cyclic(table2: list[float], offset: int, n: int) -> list[float]:
    """``n`` values of a cyclic table starting at ``offset``; ``table2`` is the table twice."""
    size = len(table2) // 2
    if n <= size:
        return table2[offset : offset + n]
    turn = table2[offset : offset + size]
    return turn * (n // size) + table2[offset : offset + n % size]


# The per-rank training metrics, in the order of `rank_times` values (iteration, compute, wait).
RANK_METRICS = (
    m.TRAINING_STEP_TIME_SECONDS,
    m.TRAINING_COMPUTE_TIME_SECONDS,
    m.TRAINING_COLLECTIVE_WAIT_SECONDS,
)


class Scope:
    """The nodes a snapshot covers (all of them, or a subset in a fixed order) and per-scope
    caches that many snapshots of the same nodes share (the history makes one per minute)."""

    def __init__(self, fleet: Fleet, nodes: Sequence[int] | None) -> None:
        self.fleet = fleet
        self.full = nodes is None
        if nodes is None:
            self.nodes: Sequence[int] = range(fleet.n_nodes)
        else:
            self.nodes = list(dict.fromkeys(nodes))
        self.pos_of: dict[int, int] = {n: p for p, n in enumerate(self.nodes)}
        hw = fleet.hardware
        self.mult: dict[Entity, int] = {
            "gpu": hw.gpus_per_node,
            "xid": hw.gpus_per_node,
            "health": hw.gpus_per_node,
            "clock": hw.gpus_per_node,
            "nic": hw.nics_per_node,
            "netdev": len(hw.netdevs),
            "node": 1,
            "uname": 1,
            "numa": hw.numa_nodes,
            "step": hw.gpus_per_node,
        }
        self._indices: dict[int, list[int]] = {}
        in_scope = set(self.nodes)
        jobs_here = {j for n in self.nodes for j in fleet.node_jobs[n]}
        self.faults: list[Placed] = sorted(
            (
                p
                for p in fleet.placed
                if (p.node >= 0 and p.node in in_scope) or (p.node < 0 and p.job in jobs_here)
            ),
            key=lambda p: p.fault.since_s,
        )
        self.gpu_label_cache: dict[tuple[int, str, str], Labels] = {}
        self.other_label_cache: dict[tuple[str, int, int, str], Labels] = {}

    def indices(self, mult: int) -> list[int]:
        """Global entity indices of the scope, for entities with ``mult`` per node."""
        out = self._indices.get(mult)
        if out is None:
            out = [n * mult + j for n in self.nodes for j in range(mult)]
            self._indices[mult] = out
        return out

    def size(self, mult: int) -> int:
        return len(self.nodes) * mult


class FleetSnapshot:
    """All metrics of the fleet (or of a subset of its nodes) at one instant.

    Columns are computed on first use and cached, so a check that reads five metrics pays for
    five. ``values(name)`` is None for a metric the fleet does not export (disabled, like the
    ECC counters in dcgm-exporter's default set), so a check can say it could not run.
    Positions: ``gpu_position(node, gpu)``; a GPU that fell off the bus is NaN in every GPU
    column and False in ``gpu_present()``.
    """

    def __init__(self, fleet: Fleet, t_s: float, scope: Scope) -> None:
        self.fleet = fleet
        self.t_s = float(t_s)
        self.scope = scope
        self.at = datetime.fromtimestamp(self.t_s, UTC)
        self._minute = (int(self.t_s) - fleet.now_s) // 60
        self._columns: dict[str, array[float]] = {}
        self._running: list[int] | None = None
        self._by_metric: dict[str, list[Placed]] | None = None
        self._missing: set[int] | None = None
        self._versions: dict[int, tuple[str, str, str]] | None = None
        self._busy_s: list[float] | None = None

    # --- where things are ---------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        names = self.fleet.topology.names
        if self.scope.full:
            return names
        return tuple(names[n] for n in self.scope.nodes)

    @property
    def gpus_per_node(self) -> int:
        return self.fleet.hardware.gpus_per_node

    def node_position(self, node: str) -> int:
        return self.scope.pos_of[self.fleet.topology.index(node)]

    def gpu_position(self, node: str, gpu: int) -> int:
        return self.node_position(node) * self.gpus_per_node + gpu

    def exports(self, metric: str) -> bool:
        return metric in self.fleet.exported

    # --- state shared by the columns ----------------------------------------------------------
    def running(self) -> list[int]:
        """Per node position: index of the job running there (into ``fleet.job_specs``), or -1."""
        if self._running is None:
            specs = self.fleet.job_specs
            t = self.t_s
            if self.scope.full:
                run = [-1] * self.fleet.n_nodes
                for j, spec in enumerate(specs):
                    if spec.running(t):
                        for n in spec.nodes:
                            run[n] = j
            else:
                run = []
                for n in self.scope.nodes:
                    here = -1
                    for j in self.fleet.node_jobs[n]:
                        if specs[j].running(t):
                            here = j
                            break
                    run.append(here)
            self._running = run
        return self._running

    def busy(self) -> list[bool]:
        return [j >= 0 for j in self.running()]

    def _placed_by_metric(self) -> dict[str, list[Placed]]:
        if self._by_metric is None:
            out: dict[str, list[Placed]] = {}
            t = self.t_s
            for placed in self.scope.faults:
                fault = placed.fault
                if fault.since_s > t:
                    continue
                still = t < fault.until_s
                for metric in EFFECTS[fault.kind]:
                    # A counter keeps what a fault added after the fault ends; a gauge does not,
                    # but for the last-Xid gauge, which stays set after the GPU is reset
                    # (dcgm-exporter #500): an Xid fault's ``until`` is that reset.
                    if still or metric in m.COUNTERS or metric in STICKY_GAUGES:
                        out.setdefault(metric, []).append(placed)
            self._by_metric = out
        return self._by_metric

    def _active(self, kind: FaultKind) -> Iterator[Placed]:
        t = self.t_s
        for placed in self.scope.faults:
            if placed.fault.kind is kind and placed.fault.active(t):
                yield placed

    def missing_gpus(self) -> set[int]:
        """GPU positions that are not on the bus at this instant."""
        if self._missing is None:
            g = self.gpus_per_node
            self._missing = {
                self.scope.pos_of[p.node] * g + p.gpu for p in self._active(FaultKind.GPU_MISSING)
            }
        return self._missing

    def gpu_present(self) -> list[bool]:
        present = [True] * self.scope.size(self.gpus_per_node)
        for p in self.missing_gpus():
            present[p] = False
        return present

    def drifted_versions(self) -> dict[int, tuple[str, str, str]]:
        """(driver, kernel, firmware) per node position, only for nodes that drifted."""
        if self._versions is None:
            out: dict[int, tuple[str, str, str]] = {}
            default = self.fleet.default_versions
            slot = DRIFT_SLOTS
            fleet = self.fleet
            if fleet.rollouts:
                # A rolled-out node differs from the fleet's defaults like a drifted one.
                for pos, n in enumerate(self.scope.nodes):
                    rolled = fleet.rolled_versions(n, self.t_s)
                    if rolled != default:
                        out[pos] = rolled
            for placed in self.scope.faults:
                i = slot.get(placed.fault.kind)
                if i is None or not placed.fault.active(self.t_s):
                    continue
                pos = self.scope.pos_of[placed.node]
                current = list(out.get(pos, default))
                current[i] = placed.fault.text("version")
                out[pos] = (current[0], current[1], current[2])
            self._versions = out
        return self._versions

    def versions(self, pos: int) -> tuple[str, str, str]:
        return self.drifted_versions().get(pos, self.fleet.default_versions)

    # --- column building blocks ---------------------------------------------------------------
    def _gather(self, mult: int, table: list[float]) -> list[float]:
        if self.scope.full:
            return list(table)
        return [table[i] for i in self.scope.indices(mult)]

    def _noise(self, mult: int, channel: int, slot: int | None = None) -> list[float]:
        """Noise per entity for this minute (or another time slot, as for the dips)."""
        when = self._minute if slot is None else slot
        offset = (when * 7919 + channel * 104729) & NOISE_MASK
        if self.scope.full:
            return cyclic(self.fleet.noise2, offset, self.fleet.n_nodes * mult)
        table = self.fleet.noise
        return [table[(i + offset) & NOISE_MASK] for i in self.scope.indices(mult)]

    def _by_busy(
        self, mult: int, busy: float | list[float], idle: float | list[float]
    ) -> list[float]:
        """Per entity, the busy value where a job runs on its node and the idle value elsewhere;
        a list argument is indexed by global entity index."""
        run = self.running()
        if self.scope.full:
            out = list(busy) if isinstance(busy, list) else [busy] * (self.fleet.n_nodes * mult)
            for n, j in enumerate(run):
                if j < 0:
                    a = n * mult
                    out[a : a + mult] = (
                        idle[a : a + mult] if isinstance(idle, list) else [idle] * mult
                    )
            return out
        out = []
        for p, n in enumerate(self.scope.nodes):
            src = busy if run[p] >= 0 else idle
            a = n * mult
            out.extend(src[a : a + mult] if isinstance(src, list) else [src] * mult)
        return out

    def _two_state(
        self,
        mult: int,
        channel: int,
        busy: Formula,
        idle: Formula,
        busy_base: list[float] | None = None,
        idle_base: list[float] | None = None,
    ) -> list[float]:
        """A noisy gauge with one formula on nodes that run a job and another on idle ones.

        A formula maps (per-entity bases, noise) to values; it runs over the whole column at
        once where it can (the fast path) and per node elsewhere, with the same arithmetic per
        element, so a subset snapshot gets exactly the values of the whole-fleet one.
        """
        run = self.running()
        w = self._noise(mult, channel)
        empty: list[float] = []
        if self.scope.full:
            out = busy(empty if busy_base is None else busy_base, w)
            for n, j in enumerate(run):
                if j < 0:
                    a = n * mult
                    base = empty if idle_base is None else idle_base[a : a + mult]
                    out[a : a + mult] = idle(base, w[a : a + mult])
            return out
        out = []
        for p, n in enumerate(self.scope.nodes):
            a, q = n * mult, p * mult
            fn, table = (busy, busy_base) if run[p] >= 0 else (idle, idle_base)
            out.extend(fn(empty if table is None else table[a : a + mult], w[q : q + mult]))
        return out

    def _with_dips(self, col: list[float], channel: int, low: float) -> list[float]:
        """Busy GPUs sampled between two steps read ``low`` for one slot of a few seconds."""
        g = self.fleet.hardware.gpus_per_node
        noise = self._noise(g, channel, int(self.t_s // IDLE_DIP_SLOT_S))
        busy = self._by_busy(g, 1.0, 0.0)
        return [
            low if x > IDLE_DIP_NOISE and b else v for v, x, b in zip(col, noise, busy, strict=True)
        ]

    def _sparse(self, mult: int, table: dict[int, float], default: float = 0.0) -> list[float]:
        if self.scope.full:
            out = [default] * (self.fleet.n_nodes * mult)
            for i, v in table.items():
                out[i] = v
            return out
        return [table.get(i, default) for i in self.scope.indices(mult)]

    def _sparse_gpu(self, table: dict[int, float]) -> list[float]:
        """A GPU column of zeros but ``table`` (fleet-wide GPU index -> value), in scope order."""
        g = self.gpus_per_node
        out = [0.0] * self.scope.size(g)
        for i, v in table.items():
            out[self.scope.pos_of[i // g] * g + i % g] = v
        return out

    def busy_seconds(self) -> list[float]:
        """Per node position: seconds of job time on the node from the fleet's origin to now."""
        if self._busy_s is None:
            if self.scope.full:
                out = [0.0] * self.fleet.n_nodes
                for spec in self.fleet.job_specs:
                    done = min(self.t_s, spec.end_s) - spec.start_s
                    if done > 0:
                        for n in spec.nodes:
                            out[n] += done
            else:
                out = [self.fleet.busy_seconds(n, self.t_s) for n in self.scope.nodes]
            self._busy_s = out
        return self._busy_s

    # --- baselines, one per metric ------------------------------------------------------------
    def _baseline(self, metric: str) -> list[float]:
        f = self.fleet
        g = f.hardware.gpus_per_node
        k = f.hardware.nics_per_node
        t = self.t_s
        age = t - f.origin_s
        if metric in (m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS):
            return self._by_busy(g, 0.0, float(m.CLOCK_EVENT_GPU_IDLE))
        if metric == m.DCGM_FI_DEV_GPU_TEMP:
            bases = f.gpu_bases()
            return self._two_state(
                g,
                _CH_TEMP,
                lambda b, w: [float(int(y + 2.0 * x + 0.5)) for y, x in zip(b, w, strict=True)],
                lambda b, w: [float(int(y + 0.8 * x + 0.5)) for y, x in zip(b, w, strict=True)],
                bases.temp_busy,
                bases.temp_idle,
            )
        if metric == m.DCGM_FI_DEV_POWER_USAGE:
            bases = f.gpu_bases()
            return self._two_state(
                g,
                _CH_POWER,
                lambda b, w: [int((y + 30.0 * x) * 10.0) / 10.0 for y, x in zip(b, w, strict=True)],
                lambda b, w: [int((y + 2.0 * x) * 10.0) / 10.0 for y, x in zip(b, w, strict=True)],
                bases.power_busy,
                bases.power_idle,
            )
        if metric == m.DCGM_FI_DEV_SM_CLOCK:
            clocks = self._two_state(
                g,
                _CH_CLOCK,
                lambda b, w: [1980.0 - 15.0 * int((x + 1.0) * 1.5) for x in w],
                lambda b, w: [345.0] * len(w),
            )
            return self._with_dips(clocks, _CH_CLOCK_DIP, IDLE_DIP_SM_CLOCK)
        if metric == m.DCGM_FI_DEV_GPU_UTIL:
            util = self._two_state(
                g,
                _CH_UTIL,
                lambda b, w: [float(min(100, int(96.0 + 2.0 * (x + 1.0)))) for x in w],
                lambda b, w: [0.0] * len(w),
            )
            return self._with_dips(util, _CH_UTIL_DIP, IDLE_DIP_GPU_UTIL)
        if metric == m.DCGM_FI_PROF_NVLINK_TX_BYTES:
            return self._two_state(
                g,
                _CH_NVLINK,
                lambda b, w: [float(int(1.1e11 + 8.0e9 * x)) for x in w],
                lambda b, w: [float(int(2.0e5 + 5.0e4 * x)) for x in w],
            )
        if metric == m.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL:
            # A few GPUs correct single-bit errors now and then: normal, never a fault.
            table = {
                i: float(base + math.floor(rate * age)) for i, (base, rate) in f.sbe_noise.items()
            }
            return self._sparse(g, table)
        if metric == m.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS:
            return self._sparse(g, f.remapped_rows_noise)
        if metric == m.DCGM_FI_DEV_PCIE_LINK_GEN:
            return [5.0] * self.scope.size(g)
        if metric == m.DCGM_FI_DEV_PCIE_LINK_WIDTH:
            return [16.0] * self.scope.size(g)
        if metric == m.DCGM_FI_DEV_POWER_VIOLATION:
            # Nanoseconds at the power cap: the GPUs that touch it now and then, while busy.
            busy_s = self.busy_seconds()
            table = {
                i: float(int(share * busy_s[self.scope.pos_of[i // g]] * 1e9))
                for i, share in f.power_cap_noise.items()
                if i // g in self.scope.pos_of
            }
            return self._sparse_gpu(table)
        if metric in (
            m.DCGM_FI_DEV_XID_ERRORS,
            m.DCGM_FI_DEV_THERMAL_VIOLATION,
            m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
            m.DCGM_FI_DEV_ROW_REMAP_FAILURE,
            m.DCGM_FI_DEV_ROW_REMAP_PENDING,
            m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
            m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
            m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
        ):
            return [0.0] * self.scope.size(g)
        if metric == m.NODE_INFINIBAND_STATE_ID:
            return [float(m.IB_STATE_ACTIVE)] * self.scope.size(k)
        if metric == m.NODE_INFINIBAND_PHYSICAL_STATE_ID:
            return [float(m.IB_PHYSICAL_STATE_LINK_UP)] * self.scope.size(k)
        if metric == m.NODE_INFINIBAND_LINK_DOWNED_TOTAL:
            return self._sparse(k, f.link_downed_noise)  # old maintenance, constant
        if metric == m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL:
            return self._sparse(k, f.symbol_error_noise)  # old and constant
        if metric == m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL:
            rates = self._gather(k, f.ib_rx_rates())
            busy = self.busy_seconds()
            idle = IB_RX_IDLE_BYTES_PER_S * age
            per_port = [b for b in busy for _ in range(k)]
            return [float(int(idle + r * b)) for r, b in zip(rates, per_port, strict=True)]
        if metric == m.NODE_NETWORK_RECEIVE_ERRS_TOTAL:
            return self._sparse(len(f.hardware.netdevs), f.eth_errors_noise)
        if metric == m.NODE_NETWORK_TRANSMIT_ERRS_TOTAL:
            return [0.0] * self.scope.size(len(f.hardware.netdevs))
        if metric == m.NODE_BOOT_TIME_SECONDS:
            return self._gather(1, f.boot_times())
        if metric == m.NODE_LOAD1:
            return self._two_state(
                1,
                _CH_LOAD,
                lambda b, w: [int((9.0 + 3.0 * (x + 1.0)) * 100.0) / 100.0 for x in w],
                lambda b, w: [int((0.2 + 0.15 * (x + 1.0)) * 100.0) / 100.0 for x in w],
            )
        if metric == m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL:
            rates = self._gather(1, f.psi_rates())
            return [int(r * age * 1000.0) / 1000.0 for r in rates]
        if metric == m.NODE_UNAME_INFO:
            return [1.0] * self.scope.size(1)
        if metric == m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL:
            rates = self._gather(f.hardware.numa_nodes, f.numa_miss_rates())
            return [float(int(r * age)) for r in rates]
        exported = EXPORTED.get(metric)
        if exported is not None:
            return [exported.healthy] * self.scope.size(self.scope.mult[exported.per])
        raise KeyError(f"no column for {metric!r}")

    def _ib_rx_lost(self, value: float, placed: Placed, nic: int) -> float:
        """A port that went down stops counting received bytes from ``since`` to ``until``;
        one that flaps or resends loses a share of them (``rx_loss``)."""
        f = self.fleet
        fault = placed.fault
        rate = f.ib_rx_rates()[placed.node * f.hardware.nics_per_node + nic]

        def at(t: float) -> float:
            busy = f.busy_seconds(placed.node, t)
            return float(int(IB_RX_IDLE_BYTES_PER_S * (t - f.origin_s) + rate * busy))

        lost = at(min(self.t_s, fault.until_s)) - at(fault.since_s)
        return value - int(lost * fault.number("rx_loss"))

    def values(self, metric: str) -> Sequence[float] | None:
        """The column of ``metric`` (None when the fleet does not export it)."""
        if metric not in self.fleet.exported:
            return None
        cached = self._columns.get(metric)
        if cached is not None:
            return cached
        family = FAMILY_BY_NAME[metric]
        if family.entity in ("xid", "health", "clock", "step"):
            raise KeyError(f"{metric} is sparse: use xid_counts(), health_rows(), step_times()")
        col = self._baseline(metric)
        # A column of 400,000 rows at 50,000 nodes is tens of ms of Python: made in steps, and
        # a worker stands aside between them while the loop has acks to send (bot/give_way.py).
        give_way()
        mult = self.scope.mult[family.entity]
        pos_of = self.scope.pos_of
        for placed in self._placed_by_metric().get(metric, ()):
            effect: Effect = EFFECTS[placed.fault.kind][metric]
            base = pos_of[placed.node] * mult
            for j in placed.position(family.entity, mult):
                col[base + j] = effect(col[base + j], placed.fault, self.t_s)
        if metric == m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL:
            for placed in self.scope.faults:
                if "rx_loss" in placed.fault.detail and placed.fault.since_s <= self.t_s:
                    base = pos_of[placed.node] * mult
                    for j in placed.position("nic", mult):
                        col[base + j] = self._ib_rx_lost(col[base + j], placed, j)
        if family.entity == "gpu":
            for p in self.missing_gpus():
                col[p] = math.nan
            give_way()
            for p in self._older_exporter_rows(metric, mult):
                col[p] = math.nan  # the older exporter does not export it: no series
        give_way()
        # Kept as an array of doubles, which the garbage collector does not walk: a column is
        # 400,000 floats at 50,000 nodes, and the collector's full passes over the lists of a
        # cached snapshot stopped every thread, the event loop's included, for 0.1-0.3 s.
        kept = self._columns[metric] = array("d", col)
        return kept

    def _older_exporter_rows(self, metric: str, mult: int) -> Iterator[int]:
        """Column positions of the nodes whose exporter does not export ``metric``."""
        f = self.fleet
        for pos, n in enumerate(self.scope.nodes):
            if not f.exports(metric, n):
                yield from range(pos * mult, (pos + 1) * mult)

    def xid_counts(self, metric: str = m.DCGM_EXP_XID_ERRORS_COUNT) -> dict[int, dict[int, float]]:
        """GPU position -> {Xid code: count} for ``DCGM_EXP_XID_ERRORS_COUNT`` or ``_TOTAL``
        (sparse: a row per GPU and code seen). Both count since the fleet's origin here."""
        out: dict[int, dict[int, float]] = {}
        if metric not in self.fleet.exported:
            return out
        g = self.gpus_per_node
        missing = self.missing_gpus()
        for placed in self.scope.faults:
            fault = placed.fault
            if fault.kind is not FaultKind.XID or fault.since_s > self.t_s:
                continue
            if not self.fleet.exports(metric, placed.node):
                continue
            pos = self.scope.pos_of[placed.node] * g + placed.gpu
            if pos in missing:
                continue
            codes = out.setdefault(pos, {})
            code = int(fault.number("xid"))
            codes[code] = codes.get(code, 0.0) + fault.number("count")
        return out

    def clock_event_counts(self) -> dict[int, dict[str, float]]:
        """GPU position -> {reason: times it came on} for ``DCGM_EXP_CLOCK_EVENTS_TOTAL``, since
        the exporter started (the fleet's origin), edge-counted as dcgm-exporter does: a fault
        that holds the clocks back comes on once; GPUs that touch the power cap, every ten
        minutes of job time. A series exists once its reason came on (sparse)."""
        f = self.fleet
        metric = m.DCGM_EXP_CLOCK_EVENTS_TOTAL
        out: dict[int, dict[str, float]] = {}
        if metric not in f.exported:
            return out
        g = self.gpus_per_node
        missing = self.missing_gpus()
        busy_s = self.busy_seconds()
        power_cap = m.CLOCK_EVENT_NAMES[m.CLOCK_EVENT_SW_POWER_CAP]
        for pos, n in enumerate(self.scope.nodes):
            if not f.exports(metric, n):
                continue
            bursts = float(int(busy_s[pos] // POWER_CAP_BURST_EVERY_S))
            for gpu in range(g):
                if n * g + gpu in f.power_cap_noise and bursts > 0:
                    out.setdefault(pos * g + gpu, {})[power_cap] = bursts
        for placed in self.scope.faults:
            fault = placed.fault
            bit = CLOCK_EVENT_OF.get(fault.kind)
            if bit is None or placed.node < 0 or fault.since_s > self.t_s:
                continue
            if not f.exports(metric, placed.node):
                continue
            pos = self.scope.pos_of[placed.node] * g + placed.gpu
            if pos in missing:
                continue
            events = out.setdefault(pos, {})
            name = m.CLOCK_EVENT_NAMES[bit]
            events[name] = events.get(name, 0.0) + 1.0
        return out

    def health_rows(self) -> Iterator[tuple[int, str, float, str]]:
        """(GPU position, watch, result, error code) for ``DCGM_EXP_GPU_HEALTH_STATUS``: every
        watch of every GPU of a node with the newer exporter, PASS unless a fault says not.
        GPUs that touch their power cap warn on the POWER watch, as DCGM's does under any load
        (DCGM #285: any violation time warns)."""
        f = self.fleet
        metric = m.DCGM_EXP_GPU_HEALTH_STATUS
        if metric not in f.exported:
            return
        g = self.gpus_per_node
        missing = self.missing_gpus()
        incidents: dict[tuple[int, str], tuple[float, str]] = {}
        noise = f.power_cap_noise
        busy = self.busy()
        for pos, n in enumerate(self.scope.nodes):
            if busy[pos]:
                for gpu in range(g):
                    if n * g + gpu in noise:
                        incidents[(pos * g + gpu, "POWER")] = (
                            float(m.HEALTH_WARN),
                            "DCGM_FR_CLOCK_THROTTLE_POWER",
                        )
        for placed in self.scope.faults:
            fault = placed.fault
            if placed.node < 0 or not fault.active(self.t_s) or placed.gpu < 0:
                continue
            pos = self.scope.pos_of[placed.node] * g + placed.gpu
            if fault.kind is FaultKind.DCGM_HEALTH:
                incidents[(pos, fault.text("watch"))] = (fault.number("result"), fault.text("code"))
            elif fault.kind in HEALTH_EFFECTS:
                watch, level, reason = HEALTH_EFFECTS[fault.kind]
                incidents[(pos, watch)] = (float(level), reason)
        for pos, n in enumerate(self.scope.nodes):
            if not f.exports(metric, n):
                continue
            for gpu in range(g):
                p = pos * g + gpu
                if p in missing:
                    continue
                for watch in HEALTH_WATCHES:
                    result, code = incidents.get(
                        (p, watch), (float(m.HEALTH_PASS), m.HEALTH_OK_CODE)
                    )
                    yield p, watch, result, code

    # --- training step times ------------------------------------------------------------------
    def _node_slowdowns(self) -> dict[int, float]:
        """Node index -> how much longer its ranks compute. Every node of the fleet, not only
        the scope's: a straggler outside a subset still sets the pace of its job."""
        out: dict[int, float] = {}
        for placed in self.fleet.placed:
            fault = placed.fault
            if placed.node < 0 or not fault.active(self.t_s):
                continue
            slow = float(fault.detail.get("slowdown", 0.0))
            if slow:
                out[placed.node] = out.get(placed.node, 1.0) * (1.0 + slow)
        return out

    def _rollout_factors(self, nodes: tuple[int, ...]) -> tuple[float, dict[int, float]]:
        """A synchronous job's step-time factor from the rollouts any of its nodes went
        through by now, and each upgraded node's own factor."""
        job = 1.0
        per_node: dict[int, float] = {}
        t = self.t_s
        for rollout in self.fleet.rollouts:
            if not rollout.effect or rollout.first_switch_s(nodes) > t:
                continue
            job *= 1.0 + rollout.effect
            for n in nodes:
                if rollout.switched(n, t):
                    per_node[n] = per_node.get(n, 1.0) * (1.0 + rollout.effect)
        return job, per_node

    def step_times(self, job_index: int | None = None) -> list[tuple[int, int, int, int, float]]:
        """Per rank of running jobs that export step times (one job if given):
        (job index, node index, rank, pipeline stage, iteration seconds)."""
        return [(j, n, r, st, it) for j, n, r, st, it, _, _ in self.rank_times(job_index)]

    def rank_times(
        self, job_index: int | None = None
    ) -> list[tuple[int, int, int, int, float, float, float]]:
        """Per rank of running jobs that export step times (one job if given): (job index,
        node index, rank, pipeline stage, iteration, compute, collective wait), in seconds.

        A synchronous iteration is the slowest rank's compute plus the collective itself, and
        every rank reports it (within timer noise): the ranks that finished computing early
        wait in the collective for the slowest. So a slow node shows in its own compute time
        (longest) and wait (shortest), never in its iteration time. Independent workers (no
        collective) each report their own compute plus a fixed communication share."""
        f = self.fleet
        g = f.hardware.gpus_per_node
        if m.TRAINING_STEP_TIME_SECONDS not in f.exported:
            return []
        run = self.running()
        offset = (self._minute * 7919 + _CH_STEP * 104729) & NOISE_MASK
        timer = (self._minute * 7919 + _CH_TIMER * 104729) & NOISE_MASK
        table = f.noise
        slow_nodes = self._node_slowdowns()
        if job_index is None:
            jobs = sorted({j for j in run if j >= 0})
        else:
            jobs = [job_index] if f.job_specs[job_index].running(self.t_s) else []
        out: list[tuple[int, int, int, int, float, float, float]] = []
        for j in jobs:
            spec = f.job_specs[j]
            if not spec.exports_step_time:
                continue
            stage_factor = [1.0] * spec.pipeline_stages
            job_factor = 1.0
            for placed in self.scope.faults:
                fault = placed.fault
                if placed.job != j or not fault.active(self.t_s):
                    continue
                slow = fault.number("slowdown")
                if fault.kind is FaultKind.PIPELINE_IMBALANCE:
                    stage_factor[int(fault.number("stage"))] *= 1.0 + slow
                elif fault.kind is FaultKind.GC_STALLS:
                    since_min = (int(fault.since_s) - f.now_s) // 60
                    period = int(fault.number("period_min"))
                    phase = int(fault.number("phase_min"))
                    if (self._minute - since_min - phase) % period == 0:
                        job_factor *= 1.0 + slow
                elif fault.kind is FaultKind.JOB_SLOWDOWN:
                    job_factor *= 1.0 + slow
            # A pause of the job itself (GC, data loading) lengthens every rank's compute.
            # Its pace's own wander (data, the shared filesystem's day, checkpoints) moves
            # every rank alike: the whole step.
            wander = f.wander.factor(spec, self.t_s)
            compute_base = spec.base_step_s * (1.0 - COMM_SHARE) * job_factor * wander
            comm = spec.base_step_s * COMM_SHARE * wander
            rolled, node_rolled = self._rollout_factors(spec.nodes)
            # Every rank of the job, whatever the snapshot's scope: the slowest sets the pace.
            computes: list[float] = []
            for position, n in enumerate(spec.nodes):
                node_base = (
                    compute_base * stage_factor[spec.stage_of(position)] * slow_nodes.get(n, 1.0)
                )
                a = n * g + offset
                computes.extend(
                    node_base * (1.0 + STEP_JITTER * table[(a + local) & NOISE_MASK])
                    for local in range(g)
                )
            # A rollout's effect on the whole step, from its first node on (the true effect the
            # regression finder must recover, exact whatever the jitter of the slowest rank).
            iteration = (max(computes) + comm) * rolled
            pos_of = self.scope.pos_of
            for position, n in enumerate(spec.nodes):
                if n not in pos_of:
                    continue
                stage = spec.stage_of(position)
                for local in range(g):
                    rank = position * g + local
                    # The upgraded nodes are the ones that compute longer (per-node signals).
                    compute = computes[rank] * node_rolled.get(n, 1.0)
                    if spec.synchronous:
                        w = table[(n * g + rank + timer) & NOISE_MASK]
                        it = iteration * (1.0 + REPORT_JITTER * w)
                    else:
                        it = compute + comm * node_rolled.get(n, 1.0)
                    it = int(it * 10000.0) / 10000.0
                    compute = int(compute * 10000.0) / 10000.0
                    wait = int(max(0.0, it - compute) * 10000.0) / 10000.0
                    out.append((j, n, rank, stage, it, compute, wait))
        return out

    # --- series with labels -------------------------------------------------------------------
    def _gpu_labels(self, pos: int) -> Labels:
        f = self.fleet
        g = self.gpus_per_node
        node_pos, gpu = divmod(pos, g)
        n = self.scope.nodes[node_pos]
        driver, _, firmware = self.versions(node_pos)
        key = (n * g + gpu, driver, firmware)
        labels = self.scope.gpu_label_cache.get(key)
        if labels is None:
            name = f.topology.names[n]
            labels = (
                (m.LABEL_GPU, str(gpu)),
                (m.LABEL_UUID, f.hardware.uuid(n, gpu)),
                (m.LABEL_PCI_BUS_ID, f.hardware.pci_bus_ids[gpu]),
                (m.LABEL_DCGM_DEVICE, f"nvidia{gpu}"),
                (m.LABEL_MODEL_NAME, GPU_MODEL),
                (f.host_label_of(n), name),
                (m.LABEL_DRIVER_VERSION, driver),
                (m.LABEL_VBIOS_VERSION, firmware),
                (m.LABEL_INSTANCE, f"{name}:{m.DCGM_EXPORTER_PORT}"),
                (m.LABEL_JOB, m.SCRAPE_JOB_DCGM),
            )
            self.scope.gpu_label_cache[key] = labels
        return labels

    def _node_labels(self, entity: Entity, node_pos: int, j: int) -> Labels:
        f = self.fleet
        n = self.scope.nodes[node_pos]
        kernel = self.versions(node_pos)[1] if entity == "uname" else ""
        key = (entity, n, j, kernel)
        labels = self.scope.other_label_cache.get(key)
        if labels is not None:
            return labels
        name = f.topology.names[n]
        target = (
            (m.LABEL_INSTANCE, f"{name}:{m.NODE_EXPORTER_PORT}"),
            (m.LABEL_JOB, m.SCRAPE_JOB_NODE),
        )
        if entity == "nic":
            labels = ((m.LABEL_IB_DEVICE, f.hardware.nics[j]), (m.LABEL_IB_PORT, "1"), *target)
        elif entity == "netdev":
            labels = ((m.LABEL_NET_DEVICE, f.hardware.netdevs[j]), *target)
        elif entity == "numa":
            labels = ((m.LABEL_NUMA_NODE, str(j)), *target)
        elif entity == "uname":
            labels = (
                ("domainname", "(none)"),
                ("machine", "x86_64"),
                ("nodename", name),
                (m.LABEL_RELEASE, kernel),
                ("sysname", "Linux"),
                ("version", "#115-Ubuntu SMP"),
                *target,
            )
        else:
            labels = target
        self.scope.other_label_cache[key] = labels
        return labels

    def labels_at(self, metric: str, pos: int) -> dict[str, str]:
        """The labels of the series at column position ``pos`` of ``metric``, as exported
        (for a check's evidence)."""
        family = FAMILY_BY_NAME[metric]
        if family.entity in ("gpu", "xid", "health", "clock"):
            return dict(self._gpu_labels(pos))
        if family.entity == "step":
            raise KeyError(f"{metric} has no column: use step_times()")
        mult = self.scope.mult[family.entity]
        return dict(self._node_labels(family.entity, pos // mult, pos % mult))

    def rows(self, family: Family) -> Iterator[tuple[Labels, float]]:
        """Every series of one family with its labels, in a fixed order (absent ones skipped)."""
        if family.name not in self.fleet.exported:
            return
        entity = family.entity
        if entity == "xid":
            for pos, codes in sorted(self.xid_counts(family.name).items()):
                labels = self._gpu_labels(pos)
                for code in sorted(codes):
                    yield (*labels, (m.LABEL_XID, str(code))), codes[code]
            return
        if entity == "clock":
            for pos, events in sorted(self.clock_event_counts().items()):
                labels = self._gpu_labels(pos)
                for name in sorted(events):
                    yield (*labels, (m.LABEL_CLOCK_EVENT, name)), events[name]
            return
        if entity == "health":
            for pos, watch, result, reason in self.health_rows():
                labels = self._gpu_labels(pos)
                extra = ((m.LABEL_HEALTH_WATCH, watch), (m.LABEL_HEALTH_ERROR_CODE, reason))
                yield (*labels, *extra), result
            return
        if entity == "step":
            names = self.fleet.topology.names
            specs = self.fleet.job_specs
            pick = RANK_METRICS.index(family.name)
            for j, n, rank, stage, *values in self.rank_times():
                if pick and not specs[j].exports_compute_time:
                    continue
                value = values[pick]
                name = names[n]
                yield (
                    (
                        (m.LABEL_JOB_ID, specs[j].job.job_id),
                        (m.LABEL_NODE, name),
                        (m.LABEL_RANK, str(rank)),
                        (m.LABEL_PIPELINE_STAGE, str(stage)),
                        (m.LABEL_INSTANCE, f"{name}:{m.TRAINING_EXPORTER_PORT}"),
                        (m.LABEL_JOB, m.SCRAPE_JOB_TRAINING),
                    ),
                    value,
                )
            return
        col = self.values(family.name)
        assert col is not None
        if entity == "gpu":
            missing = self.missing_gpus()
            for pos, value in enumerate(col):
                if pos not in missing and value == value:  # NaN: not exported by this node
                    yield self._gpu_labels(pos), value
            return
        mult = self.scope.mult[entity]
        label_of: Callable[[int], Labels] = lambda pos: self._node_labels(  # noqa: E731
            entity, pos // mult, pos % mult
        )
        for pos, value in enumerate(col):
            yield label_of(pos), value

    def samples(self, metrics: Sequence[str] | None = None) -> Iterator[Sample]:
        for family in self.fleet.families(metrics):
            name = family.name
            for labels, value in self.rows(family):
                yield Sample(name, labels, value)
