"""The simulated fleet: meowbot's embedded default cluster, and the test bed of every check.

``SimFleet`` is deterministic from its seed and its ``now``: the same pair gives the same nodes,
jobs, faults and byte-identical exposition. It knows its ground truth (``fleet.injected``), so
tests and benchmarks can score what the health checks and the straggler finder say.

Scale: 50,000 nodes x 8 GPUs construct in well under the 3 s budget because nothing is made per
GPU up front; metrics come from ``snapshot()``, which computes columns on demand (see
snapshot.py), and node models are built when asked for.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Literal

from bot import metric_names as m
from bot.backends.sim.exposition import (
    FAMILIES,
    FAMILY_BY_NAME,
    Family,
    LabelRenderer,
    Labels,
    Sample,
    openmetrics_series,
    text_exposition,
)
from bot.backends.sim.faults import (
    ALL_NICS,
    KIND_SPECS,
    DetailValue,
    InjectedFault,
    NodeShape,
    default_detail,
)
from bot.backends.sim.inventory import (
    DRIVER_VERSION,
    GPU_MODEL,
    KERNEL_VERSION,
    RACK_SIZE,
    VBIOS_VERSION,
    Hardware,
    Topology,
)
from bot.backends.sim.rollouts import BUILT_IN_SLOTS, DRIFT_SLOTS, SimRollout, rollout_times
from bot.backends.sim.snapshot import NOISE_BITS, FleetSnapshot, GpuBases, Placed, Scope
from bot.backends.sim.wander import PaceWander
from bot.backends.sim.workload import JobSpec, build_run, generate_jobs, make_spec
from bot.models import JOB_LEVEL_KINDS, FaultKind, Gpu, Job, JobState, Nic, Node, TrainingRun
from bot.triage.checks import CHECK_OF

MAX_NODES = 50_000
ORIGIN_AGE_S = 30 * 86400
"""Counters start this long before ``now`` (the fleet's last maintenance): boot times sit there."""

HostLabel = Literal["Hostname", "hostname", "mixed"]
DRIFT_KINDS = tuple(sorted(DRIFT_SLOTS, key=DRIFT_SLOTS.__getitem__))
"""The fault that moves one node off the fleet's value, per slot of (driver, kernel, firmware)."""

NODE_KINDS: tuple[FaultKind, ...] = tuple(k for k in FaultKind if k not in JOB_LEVEL_KINDS)
# What random faults are drawn from: the kinds whose check entry allows it (a DCGM
# health-watch fault shows only where the newer exporter runs, and a kind added later keeps
# every seeded fleet what it was before it existed), and the causes of a slow job.
RANDOM_NODE_KINDS: tuple[FaultKind, ...] = tuple(
    k for k in NODE_KINDS if k not in CHECK_OF or CHECK_OF[k].injects.at_random
)
# Families only the newer dcgm-exporter exports (its rack under host_label="mixed", every node
# under "hostname", none under "Hostname"): the cumulative Xid and clock-event counters and
# DCGM's health watches are newer collectors, and that rack's counters CSV also enables the
# violation counters (commented out in dcgm-exporter's default-counters.csv). So one fleet
# shows each family present on some nodes and absent on the others, as one mid-upgrade does.
NEWER_EXPORTER_FAMILIES: frozenset[str] = frozenset(
    {
        m.DCGM_EXP_XID_ERRORS_TOTAL,
        m.DCGM_EXP_CLOCK_EVENTS_TOTAL,
        m.DCGM_EXP_GPU_HEALTH_STATUS,
        m.DCGM_FI_DEV_THERMAL_VIOLATION,
        m.DCGM_FI_DEV_POWER_VIOLATION,
    }
)
STRAGGLER_NODE_KINDS: tuple[FaultKind, ...] = tuple(
    k for k in NODE_KINDS if KIND_SPECS[k].slowdown > 0
)
"""Node faults that slow the ranks of a synchronous job: the causes the straggler finder names."""


def _aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be a timezone-aware datetime")
    return value.astimezone(UTC)


def _floor_minute(t_s: float) -> int:
    return int(t_s // 60) * 60


class SimFleet:
    """A deterministic simulated GPU cluster.

    ``now`` (aware; floored to the minute) is the instant the fleet's world is built around: jobs
    started before it, faults have their ``since`` before it. Without it the wall clock floored
    to the hour is used, so a fleet made twice in the same hour is identical; pass ``now`` for
    output that is byte-identical whenever it is made. The world goes on after ``now``: jobs
    keep running and counters keep counting, so ``snapshot(at)`` accepts any instant.

    ``fault_rate`` is the share of nodes given one random node fault at construction (0 gives a
    fleet with only ordinary noise). ``host_label`` is the DCGM host label: ``Hostname`` as
    released dcgm-exporters write it, ``hostname`` as newer ones do, or ``mixed`` (every fourth
    rack runs the newer exporter). ``disabled_metrics`` are not exported at all, as with
    dcgm-exporter's default counter set, which leaves out ECC and NVLink error counters.
    ``clock_reasons_metric`` picks the new or the old name of the clock-event bitmask.
    """

    def __init__(
        self,
        n_nodes: int = 512,
        seed: int = 0,
        gpus_per_node: int = 8,
        now: datetime | None = None,
        fault_rate: float = 0.02,
        *,
        host_label: HostLabel = "Hostname",
        disabled_metrics: Iterable[str] = (),
        clock_reasons_metric: str = m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    ) -> None:
        if not 1 <= n_nodes <= MAX_NODES:
            raise ValueError(f"n_nodes must be between 1 and {MAX_NODES}, got {n_nodes}")
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError("fault_rate must be between 0 and 1")
        if host_label not in ("Hostname", "hostname", "mixed"):
            raise ValueError("host_label must be 'Hostname', 'hostname' or 'mixed'")
        clock_names = (m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS)
        if clock_reasons_metric not in clock_names:
            raise ValueError(f"clock_reasons_metric must be one of {clock_names}")
        disabled = frozenset(disabled_metrics)
        unknown = disabled - set(FAMILY_BY_NAME)
        if unknown:
            raise ValueError(f"unknown metrics to disable: {sorted(unknown)}")
        if now is None:
            wall = datetime.now(UTC)
            now = wall.replace(minute=0, second=0, microsecond=0)
        now = _aware(now, "now")
        self.seed = seed
        self.n_nodes = n_nodes
        self.now_s = _floor_minute(now.timestamp())
        self.now = datetime.fromtimestamp(self.now_s, UTC)
        self.origin_s = self.now_s - ORIGIN_AGE_S
        self.host_label = host_label
        self.topology = Topology(n_nodes)
        self.hardware = Hardware(seed, gpus_per_node)
        self.default_versions = (DRIVER_VERSION, KERNEL_VERSION, VBIOS_VERSION)
        other_clock = next(c for c in clock_names if c != clock_reasons_metric)
        self.exported: frozenset[str] = frozenset(FAMILY_BY_NAME) - disabled - {other_clock}
        if host_label == m.LABEL_HOSTNAME:
            self.exported -= NEWER_EXPORTER_FAMILIES  # no node runs the newer exporter
        self.job_specs: list[JobSpec] = generate_jobs(
            self.topology.names, gpus_per_node, seed, self.now_s
        )
        self.node_jobs: list[list[int]] = [[] for _ in range(n_nodes)]
        for j, spec in enumerate(self.job_specs):
            for n in spec.nodes:
                self.node_jobs[n].append(j)
        self._job_index = {spec.job.job_id: j for j, spec in enumerate(self.job_specs)}
        self.placed: list[Placed] = []
        self._placed_on: dict[int, list[Placed]] | None = None
        self.rollouts: list[SimRollout] = []
        self.wander = PaceWander(seed)
        """Every job's own pace over hours: its slow wander, the daily cycle, checkpoints."""
        rng = random.Random(f"meowbot-sim-noise:{seed}")
        self.noise: list[float] = [rng.uniform(-1.0, 1.0) for _ in range(1 << NOISE_BITS)]
        self.noise2: list[float] = self.noise + self.noise
        self._full_scope: Scope | None = None
        self._snapshots: dict[float, FleetSnapshot] = {}
        self._runs: tuple[TrainingRun, ...] | None = None
        if fault_rate > 0:
            self._inject_random(fault_rate)

    # --- lookups -----------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        """Node names, in order."""
        return self.topology.names

    @property
    def gpus_per_node(self) -> int:
        return self.hardware.gpus_per_node

    @property
    def injected(self) -> tuple[InjectedFault, ...]:
        """Ground truth: every fault injected so far, in injection order."""
        return tuple(p.fault for p in self.placed)

    @property
    def jobs(self) -> tuple[Job, ...]:
        """Every job the fleet knows, running and finished, by job id."""
        return tuple(spec.job for spec in self.job_specs)

    def job(self, job_id: str) -> Job:
        return self.job_specs[self._job_index[job_id]].job

    def job_position(self, job_id: str) -> int | None:
        """Where the job sits in ``job_specs`` (snapshots take it), None when unknown."""
        return self._job_index.get(job_id)

    def job_spec(self, job_id: str) -> JobSpec:
        """The simulator's view of a job: base step time, pipeline stages, checkpoint cadence."""
        return self.job_specs[self._job_index[job_id]]

    def running_job(self, node: str, at: datetime | None = None) -> Job | None:
        t = self._time(at)
        for j in self.node_jobs[self.topology.index(node)]:
            if self.job_specs[j].running(t):
                return self.job_specs[j].job
        return None

    @property
    def runs(self) -> tuple[TrainingRun, ...]:
        """In-training runs (each running training job with its requeue chain) and checkpoints."""
        if self._runs is None:
            runs = []
            for spec in self.job_specs:
                if spec.job.state is not JobState.RUNNING or not spec.exports_step_time:
                    continue
                chain = [spec]
                while chain[0].job.prev_job_id is not None:
                    chain.insert(0, self.job_spec(chain[0].job.prev_job_id))
                runs.append(build_run(chain, self.now_s))
            self._runs = tuple(runs)
        return self._runs

    def node(self, name: str, at: datetime | None = None) -> Node:
        """The node as inventory would show it at ``at`` (default ``now``): GPUs on the bus,
        NUMA placement, versions."""
        n = self.topology.index(name)
        t = self._time(at)
        hw = self.hardware
        gpu_numa = [hw.gpu_numa(g) for g in range(hw.gpus_per_node)]
        nic_numa = [hw.nic_numa(k) for k in range(hw.nics_per_node)]
        missing: set[int] = set()
        versions = list(self.rolled_versions(n, t))
        slots = DRIFT_SLOTS
        for placed in self.placed_on(n):
            fault = placed.fault
            if not fault.active(t):
                continue
            if fault.kind is FaultKind.GPU_MISSING:
                missing.add(placed.gpu)
            elif fault.kind in slots:
                versions[slots[fault.kind]] = fault.text("version")
            elif fault.kind is FaultKind.NUMA_MISPLACEMENT and hw.numa_nodes > 1:
                if fault.text("misplaced") == "nic":
                    nic_numa[placed.gpu] = (nic_numa[placed.gpu] + 1) % hw.numa_nodes
                else:
                    gpu_numa[placed.gpu] = (gpu_numa[placed.gpu] + 1) % hw.numa_nodes
        topo = self.topology
        return Node(
            name=name,
            rack=topo.rack(name),
            leaf_switch=topo.leaf_switch(name),
            spine=topo.spine(name),
            gpus=tuple(
                Gpu(
                    index=g,
                    uuid=hw.uuid(n, g),
                    model_name=GPU_MODEL,
                    pci_bus_id=hw.pci_bus_ids[g],
                    numa_node=gpu_numa[g],
                    nic=hw.nics[g],
                )
                for g in range(hw.gpus_per_node)
                if g not in missing
            ),
            nics=tuple(
                Nic(name=hw.nics[k], netdev=hw.ib_netdevs[k], numa_node=nic_numa[k])
                for k in range(hw.nics_per_node)
            ),
            numa_nodes=hw.numa_nodes,
            driver_version=versions[0],
            kernel_version=versions[1],
            firmware_version=versions[2],
            expected_gpus=hw.gpus_per_node,
        )

    def rolled_versions(self, node_index: int, t_s: float) -> tuple[str, str, str]:
        """(driver, kernel, firmware) of the node at ``t_s`` as the rollouts left it (a drift
        fault, a deviation of one node, is applied on top by the callers)."""
        versions = list(self.default_versions)
        for rollout in self.rollouts:
            slot = BUILT_IN_SLOTS.get(rollout.component)
            if slot is not None and rollout.switched(node_index, t_s):
                versions[slot] = rollout.new
        return versions[0], versions[1], versions[2]

    def version_at(self, node_index: int, component: str, t_s: float) -> str | None:
        """The node's value of ``component`` at ``t_s``, as its exporters show it: rollouts,
        then drift faults for the built-in components; None for a component it never had."""
        slot = BUILT_IN_SLOTS.get(component)
        if slot is None:
            value = None
            for rollout in self.rollouts:
                if rollout.component == component:
                    value = rollout.value(node_index, t_s)
            return value
        value = self.rolled_versions(node_index, t_s)[slot]
        kind = DRIFT_KINDS[slot]
        for placed in self.placed_on(node_index):
            fault = placed.fault
            if fault.kind is kind and fault.active(t_s):
                value = fault.text("version")
        return value

    def add_rollout(
        self,
        component: str,
        new: str,
        *,
        start: datetime,
        duration: timedelta,
        effect: float = 0.0,
        old: str | None = None,
        coverage: float = 1.0,
        like: SimRollout | None = None,
    ) -> SimRollout:
        """Roll ``component`` out to ``new`` node by node from ``start`` over ``duration``
        (nodes in an order drawn from the seed; only the first ``coverage`` share of them).

        ``effect`` is the true effect on the step time of a synchronous job from the moment
        any of its nodes runs ``new`` (0.01: 1 % slower). ``like`` makes the rollout reach
        every node at the same minute as another (a new image shipped with a new kernel: a
        confounded pair); its start, duration and coverage are then that rollout's. A built-in
        component (driver, kernel, firmware) starts from the fleet's value and shows in the
        exported metrics; any other (an image) needs ``old`` and is known to the fleet's
        history only (``SimFleetHistory``), as a configured info metric would be.
        """
        if not component or not new:
            raise ValueError("a rollout needs a component and a new value")
        if effect <= -1:
            raise ValueError("effect must be above -1 (a step cannot take no time)")
        slot = BUILT_IN_SLOTS.get(component)
        if old is None:
            if slot is None:
                raise ValueError(f"{component} is not built in: give its old value")
            old = self.default_versions[slot]
        start = _aware(start, "start")
        if like is not None:
            times = like.switch_s
            start_s, duration_s = like.start_s, like.duration_s
        else:
            start_s = float(_floor_minute(start.timestamp()))
            duration_s = duration.total_seconds()
            seed = f"meowbot-sim-rollout:{self.seed}:{len(self.rollouts)}:{component}:{new}"
            times = rollout_times(
                self.n_nodes, start_s=start_s, duration_s=duration_s, coverage=coverage, seed=seed
            )
        rollout = SimRollout(component, old, new, start_s, duration_s, effect, times)
        self.rollouts.append(rollout)
        self._changed()
        return rollout

    def host_label_of(self, node_index: int) -> str:
        """The DCGM host label this node's exporter writes."""
        if self.host_label == "mixed":
            newer = (node_index // RACK_SIZE) % 4 == 3
            return m.LABEL_HOSTNAME_NEW if newer else m.LABEL_HOSTNAME
        return self.host_label

    def runs_newer_exporter(self, node_index: int) -> bool:
        """Whether the node's dcgm-exporter is the newer one, with NEWER_EXPORTER_FAMILIES."""
        return self.host_label_of(node_index) == m.LABEL_HOSTNAME_NEW

    def exports(self, metric: str, node_index: int) -> bool:
        """Whether this node exports ``metric`` (the fleet may, and this node not)."""
        if metric not in self.exported:
            return False
        return metric not in NEWER_EXPORTER_FAMILIES or self.runs_newer_exporter(node_index)

    @cached_property
    def power_cap_noise(self) -> dict[int, float]:
        """GPU -> share of the time it touches its power cap: GPU Boost runs up to the cap,
        so a third of busy GPUs spend 0.1-1.5 % of their time held there (under a minute an
        hour). Ordinary, never a fault, and what DCGM's power watch warns about all the same
        (DCGM #285)."""
        rng = self._rng("power-cap-share")
        return {
            i: round(rng.uniform(0.001, 0.015), 4)
            for i in self._sparse_noise("power-cap", self._n_gpus, 0.33)
        }

    def families(self, metrics: Sequence[str] | None = None) -> list[Family]:
        """Exported families in exposition order, optionally only the named ones."""
        if metrics is None:
            return [f for f in FAMILIES if f.name in self.exported]
        unknown = set(metrics) - set(FAMILY_BY_NAME)
        if unknown:
            raise ValueError(f"unknown metrics: {sorted(unknown)}")
        wanted = set(metrics)
        return [f for f in FAMILIES if f.name in wanted and f.name in self.exported]

    # --- lazily made per-entity noise (cached: the first snapshot pays, the rest reuse) -------
    def _rng(self, purpose: str) -> random.Random:
        return random.Random(f"meowbot-sim-{purpose}:{self.seed}")

    @cached_property
    def _n_gpus(self) -> int:
        return self.n_nodes * self.hardware.gpus_per_node

    def gpu_bases(self) -> GpuBases:
        return self._gpu_bases

    @cached_property
    def _gpu_bases(self) -> GpuBases:
        rnd = self._rng("gpu-bases").random
        u = [rnd() for _ in range(self._n_gpus)]
        v = [rnd() for _ in range(self._n_gpus)]
        return GpuBases(
            temp_busy=[55.0 + 14.0 * x for x in u],
            temp_idle=[29.0 + 6.0 * x for x in u],
            power_busy=[430.0 + 160.0 * x for x in v],
            power_idle=[62.0 + 12.0 * x for x in v],
        )

    def _sparse_noise(self, purpose: str, total: int, share: float) -> list[int]:
        rng = self._rng(purpose)
        return sorted(rng.sample(range(total), int(total * share)))

    @cached_property
    def sbe_noise(self) -> dict[int, tuple[int, float]]:
        """GPU -> (corrected single-bit errors at origin, new ones per second): about 3 % of GPUs,
        some still counting slowly. Ordinary, never a fault."""
        rng = self._rng("sbe-values")
        out = {}
        for i in self._sparse_noise("sbe", self._n_gpus, 0.03):
            rate = 1.0 / rng.uniform(86400, 5 * 86400) if rng.random() < 0.4 else 0.0
            out[i] = (rng.randint(1, 40), rate)
        return out

    @cached_property
    def remapped_rows_noise(self) -> dict[int, float]:
        """A row or two remapped long ago on 0.5 % of GPUs: repaired memory, not a fault."""
        rng = self._rng("remap-values")
        return {
            i: float(rng.randint(1, 2)) for i in self._sparse_noise("remap", self._n_gpus, 0.005)
        }

    @cached_property
    def link_downed_noise(self) -> dict[int, float]:
        """Old link-down counts from past maintenance on 4 % of ports: they never grow."""
        total = self.n_nodes * self.hardware.nics_per_node
        rng = self._rng("downed-values")
        return {i: float(rng.randint(1, 2)) for i in self._sparse_noise("downed", total, 0.04)}

    @cached_property
    def symbol_error_noise(self) -> dict[int, float]:
        total = self.n_nodes * self.hardware.nics_per_node
        rng = self._rng("symbol-values")
        return {i: float(rng.randint(1, 20)) for i in self._sparse_noise("symbol", total, 0.03)}

    @cached_property
    def eth_errors_noise(self) -> dict[int, float]:
        """A few old receive errors on the Ethernet port of 5 % of nodes."""
        per_node = len(self.hardware.netdevs)
        eth = per_node - 1
        rng = self._rng("eth-values")
        nodes = self._sparse_noise("eth", self.n_nodes, 0.05)
        return {n * per_node + eth: float(rng.randint(1, 50)) for n in nodes}

    def boot_times(self) -> list[float]:
        return self._boot_times

    @cached_property
    def _boot_times(self) -> list[float]:
        # Rolling maintenance: nodes came up over six hours after the origin.
        rnd = self._rng("boot").random
        return [float(self.origin_s + int(rnd() * 21600)) for _ in range(self.n_nodes)]

    def ib_rx_rates(self) -> list[float]:
        return self._ib_rx_rates

    @cached_property
    def _ib_rx_rates(self) -> list[float]:
        rnd = self._rng("ib-rx").random
        return [
            9.0e9 * (0.9 + 0.2 * rnd()) for _ in range(self.n_nodes * self.hardware.nics_per_node)
        ]

    def psi_rates(self) -> list[float]:
        return self._psi_rates

    @cached_property
    def _psi_rates(self) -> list[float]:
        rnd = self._rng("psi").random
        return [0.015 + 0.01 * rnd() for _ in range(self.n_nodes)]

    def numa_miss_rates(self) -> list[float]:
        return self._numa_miss_rates

    @cached_property
    def _numa_miss_rates(self) -> list[float]:
        rnd = self._rng("numa").random
        return [30.0 + 20.0 * rnd() for _ in range(self.n_nodes * self.hardware.numa_nodes)]

    def busy_seconds(self, node_index: int, t_s: float) -> float:
        """Seconds of job time on a node from the origin to ``t_s``."""
        total = 0.0
        for j in self.node_jobs[node_index]:
            spec = self.job_specs[j]
            done = min(t_s, spec.end_s) - spec.start_s
            if done > 0:
                total += done
        return total

    # --- metrics -----------------------------------------------------------------------------
    def _time(self, at: datetime | None) -> float:
        return float(self.now_s) if at is None else _aware(at, "at").timestamp()

    def _scope(self, nodes: Iterable[str] | None) -> Scope:
        if nodes is None:
            if self._full_scope is None:
                self._full_scope = Scope(self, None)
            return self._full_scope
        return Scope(self, [self.topology.index(n) for n in nodes])

    def snapshot(
        self, at: datetime | None = None, nodes: Iterable[str] | None = None
    ) -> FleetSnapshot:
        """Every metric at ``at`` (default ``now``) as columns; see ``FleetSnapshot``.

        Whole-fleet snapshots are cached per instant, so several checks over one snapshot pay
        for each column once.
        """
        t = self._time(at)
        if nodes is not None:
            return FleetSnapshot(self, t, self._scope(nodes))
        snap = self._snapshots.get(t)
        if snap is None:
            if len(self._snapshots) >= 2:  # a full snapshot can hold ~150 MB at 50k nodes
                # Reads run on worker threads (bot/offload.py): two may evict the same one.
                self._snapshots.pop(next(iter(self._snapshots)), None)
            snap = FleetSnapshot(self, t, self._scope(None))
            self._snapshots[t] = snap
        return snap

    def samples(
        self,
        at: datetime | None = None,
        nodes: Iterable[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> Iterator[Sample]:
        """Every exported series at ``at`` as ``Sample(name, labels, value)``.

        One object per series: fine for hundreds of nodes; for the whole of a large fleet read
        ``snapshot()`` columns instead.
        """
        return self.snapshot(at, nodes).samples(metrics)

    def exposition(
        self,
        at: datetime | None = None,
        nodes: Iterable[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> str:
        """Prometheus text exposition 0.0.4 of the fleet at ``at``.

        Series carry their own ``instance`` and ``job`` labels (``gpu-0001:9400`` for DCGM,
        ``gpu-0001:9100`` for node_exporter), so a Prometheus scraping this from one address
        must use ``honor_labels: true``.
        """
        snap = self.snapshot(at, nodes)
        return text_exposition((f, snap.rows(f)) for f in self.families(metrics))

    def _times(self, start_s: float, end_s: float, step_s: int) -> list[int]:
        if step_s <= 0:
            raise ValueError("step_s must be positive")
        if end_s < start_s:
            raise ValueError("history ends before it starts")
        count = int((end_s - start_s) // step_s)
        return [int(end_s) - (count - k) * step_s for k in range(count + 1)]

    def series_history(
        self,
        metric: str,
        start: datetime,
        end: datetime | None = None,
        step_s: int = 60,
        nodes: Iterable[str] | None = None,
    ) -> dict[Labels, list[tuple[int, float]]]:
        """One metric's series from ``start`` to ``end`` (default ``now``) every ``step_s``:
        what a Prometheus range query would return, for in-process adapters."""
        family = self.families([metric])
        if not family:
            return {}
        scope = self._scope(nodes)
        series: dict[Labels, list[tuple[int, float]]] = {}
        for t in self._times(self._time(start), self._time(end), step_s):
            snap = FleetSnapshot(self, t, scope)
            for labels, value in snap.rows(family[0]):
                series.setdefault(labels, []).append((t, value))
        return series

    def openmetrics_history(
        self,
        hours: float = 48,
        step_s: int = 60,
        nodes: Iterable[str] | None = None,
        metrics: Sequence[str] | None = None,
        end: datetime | None = None,
        max_series: int = 5_000,
    ) -> Iterator[str]:
        """History as OpenMetrics text in chunks, ending with ``# EOF``, for
        ``promtool tsdb create-blocks-from openmetrics``.

        Timestamps are in seconds; counters only grow; a fault shows from its ``since`` on.
        Backfill costs about 7 s per 200 series of 48 h, so ask for the nodes and metrics a test
        needs: more than ``max_series`` series (estimated before any work) is a ValueError.
        """
        end_s = self._time(end)
        times = self._times(end_s - hours * 3600.0, end_s, step_s)
        scope = self._scope(nodes)
        families = self.families(metrics)
        estimate = sum(
            scope.size(scope.mult[f.entity])
            for f in families
            if f.entity not in ("xid", "health", "clock", "step")
        )
        steps = sum(1 for f in families if f.entity == "step")
        if steps:
            estimate += steps * self._ranks_in(scope, times[0], times[-1])
        if estimate > max_series:
            raise ValueError(
                f"history of about {estimate} series asked for (limit {max_series}): "
                "pass fewer nodes or metrics, or raise max_series"
            )
        return self._history(scope, families, times)

    def _ranks_in(self, scope: Scope, start_s: float, end_s: float) -> int:
        ranks = 0
        for n in scope.nodes:
            for j in self.node_jobs[n]:
                spec = self.job_specs[j]
                if spec.exports_step_time and spec.start_s <= end_s and spec.end_s > start_s:
                    ranks += self.hardware.gpus_per_node
        return ranks

    def _history(self, scope: Scope, families: list[Family], times: list[int]) -> Iterator[str]:
        render = LabelRenderer()
        for family in families:
            series: dict[Labels, list[tuple[int, float]]] = {}
            for t in times:
                snap = FleetSnapshot(self, t, scope)
                for labels, value in snap.rows(family):
                    series.setdefault(labels, []).append((t, value))
            yield from openmetrics_series(family, series.items(), render)
        yield "# EOF\n"

    # --- injection ---------------------------------------------------------------------------
    def placed_on(self, node_index: int) -> Sequence[Placed]:
        """The faults placed on one node, oldest first: an index kept until the next change,
        since a node's inventory (asked on the loop for each command) scanned every fault."""
        if self._placed_on is None:
            by_node: dict[int, list[Placed]] = defaultdict(list)
            for placed in sorted(self.placed, key=lambda p: p.fault.since_s):
                by_node[placed.node].append(placed)
            self._placed_on = dict(by_node)
        return self._placed_on.get(node_index, ())

    def _changed(self) -> None:
        self._full_scope = None
        self._placed_on = None
        self._snapshots.clear()
        self._runs = None

    def inject(
        self,
        kind: FaultKind | str,
        node: str | None = None,
        gpu: int | None = None,
        since: datetime | None = None,
        *,
        until: datetime | None = None,
        job_id: str | None = None,
        **detail: DetailValue,
    ) -> InjectedFault:
        """Make the fleet show one fault, deterministically; returns the ground-truth record.

        GPU kinds take ``gpu`` (drawn from the seed when omitted); IB kinds take ``nic=`` (a
        name such as ``mlx5_3``, or ``"all"``), ``nic_errors`` takes ``device=``; job-level
        kinds (pipeline imbalance, GC stalls, whole-job slowdown) take ``job_id`` and no node.
        Omitted parameters (Xid code, rates, versions, ``since``) are drawn from the seed; any
        can be given as keyword detail, ``slowdown=`` included. Faults may overlap in time.
        """
        return self._inject(FaultKind(kind), node, gpu, since, until, job_id, dict(detail))

    def _inject(
        self,
        kind: FaultKind,
        node: str | None,
        gpu: int | None,
        since: datetime | None,
        until: datetime | None,
        job_id: str | None,
        detail: dict[str, DetailValue],
    ) -> InjectedFault:
        spec = KIND_SPECS[kind]
        rng = random.Random(f"meowbot-sim-inject:{self.seed}:{len(self.placed)}:{kind}:{node}")
        if since is None:
            since_s = _floor_minute(self.now_s - rng.uniform(600, 20 * 3600))
            since = datetime.fromtimestamp(since_s, UTC)
        since = _aware(since, "since")
        if until is not None:
            until = _aware(until, "until")
            if until <= since:
                raise ValueError("until must be after since")
        hw = self.hardware
        job_index = -1
        if job_id is not None:
            if job_id not in self._job_index:
                raise KeyError(f"unknown job {job_id!r}")
            job_index = self._job_index[job_id]
        if spec.scope == "job":
            if node is not None or gpu is not None:
                raise ValueError(f"{kind} belongs to a job: give job_id, not a node or GPU")
            if job_index < 0:
                raise ValueError(f"{kind} needs job_id")
            jspec = self.job_specs[job_index]
            if not jspec.exports_step_time:
                raise ValueError(f"job {job_id} exports no step time: {kind} would not show")
            if kind is FaultKind.PIPELINE_IMBALANCE:
                if jspec.pipeline_stages < 2:
                    raise ValueError(f"job {job_id} has a single pipeline stage")
                detail.setdefault("stage", rng.randrange(jspec.pipeline_stages))
                if not 0 <= int(detail["stage"]) < jspec.pipeline_stages:
                    raise ValueError(f"job {job_id} has {jspec.pipeline_stages} pipeline stages")
            node_index = -1
        else:
            if node is None:
                raise ValueError(f"{kind} needs a node")
            node_index = self.topology.index(node)
            if spec.scope == "gpu":
                if gpu is None:
                    gpu = rng.randrange(hw.gpus_per_node)
                if not 0 <= gpu < hw.gpus_per_node:
                    raise ValueError(f"gpu must be between 0 and {hw.gpus_per_node - 1}")
            elif gpu is not None:
                raise ValueError(f"{kind} is a {spec.scope} fault: it takes no GPU")
        shape = NodeShape(hw.gpus_per_node, hw.nics, hw.netdevs)
        full = default_detail(kind, rng, shape, detail)
        nic = netdev = numa = -1
        if spec.scope == "nic":
            name = str(full["nic"])
            if name != ALL_NICS and name not in hw.nics:
                raise ValueError(f"unknown NIC {name!r}; the node has {hw.nics}")
            nic = -1 if name == ALL_NICS else hw.nics.index(name)
        if spec.scope == "netdev":
            name = str(full["device"])
            if name not in hw.netdevs:
                raise ValueError(f"unknown interface {name!r}; the node has {hw.netdevs}")
            netdev = hw.netdevs.index(name)
        if gpu is not None:
            numa = hw.gpu_numa(gpu)
        if job_id is None and node_index >= 0 and float(full.get("slowdown", 0.0)) > 0:
            # Name the training job the fault slows, so straggler diagnoses can be scored.
            t = max(since.timestamp(), float(self.now_s))
            for j in self.node_jobs[node_index]:
                jspec = self.job_specs[j]
                if jspec.running(t) and jspec.exports_step_time:
                    job_id = jspec.job.job_id
        fault = InjectedFault(
            kind=kind,
            node=node,
            gpu=gpu,
            since=since,
            detail=full,
            until=until,
            job_id=job_id,
        )
        self.placed.append(
            Placed(
                fault=fault,
                node=node_index,
                gpu=-1 if gpu is None else gpu,
                nic=nic,
                netdev=netdev,
                numa=numa,
                job=job_index if spec.scope == "job" else -1,
            )
        )
        self._changed()
        return fault

    def inject_leaf_outage(
        self, leaf_switch: str, since: datetime | None = None
    ) -> tuple[InjectedFault, ...]:
        """Every node under one leaf switch loses every InfiniBand port at the same minute."""
        nodes = self.topology.nodes_on_leaf(leaf_switch)
        if since is None:
            rng = random.Random(f"meowbot-sim-leaf:{self.seed}:{leaf_switch}")
            since = datetime.fromtimestamp(
                _floor_minute(self.now_s - rng.uniform(600, 20 * 3600)), UTC
            )
        return tuple(
            self.inject(
                FaultKind.IB_LINK_DOWN, n, since=since, nic=ALL_NICS, leaf_switch=leaf_switch
            )
            for n in nodes
        )

    def heal(self, node: str, kind: FaultKind | str | None = None) -> tuple[InjectedFault, ...]:
        """Repair ``node``: its injected faults (only those of ``kind``, when given) are gone, as
        after a part swap or a reboot that mended it. The fleet then shows no trace of them,
        counter history included, so the next health read finds the node clean. Returns what was
        removed (empty when there was nothing); KeyError for a node the fleet does not have."""
        index = self.topology.index(node)
        wanted = None if kind is None else FaultKind(kind)
        kept: list[Placed] = []
        gone: list[Placed] = []
        for placed in self.placed:
            hit = placed.node == index and wanted in (None, placed.fault.kind)
            (gone if hit else kept).append(placed)
        if gone:
            self.placed = kept
            self._changed()
        return tuple(p.fault for p in gone)

    def inject_straggler(
        self,
        job_id: str,
        cause: FaultKind | str,
        node: str | None = None,
        since: datetime | None = None,
        **detail: DetailValue,
    ) -> InjectedFault:
        """Slow a running training job down by ``cause``: on one of its nodes (drawn from the
        seed when omitted) for a node cause, on the job itself for a job-level one."""
        cause = FaultKind(cause)
        spec = self.job_spec(job_id)
        if not spec.running(self.now_s) or not spec.exports_step_time:
            raise ValueError(f"job {job_id} is not a running training job")
        if KIND_SPECS[cause].slowdown <= 0 and "slowdown" not in detail:
            raise ValueError(f"{cause} does not slow a job down; give slowdown= to make it")
        if cause in JOB_LEVEL_KINDS:
            return self._inject(cause, None, None, since, None, job_id, dict(detail))
        names = self.topology.names
        if node is None:
            rng = random.Random(f"meowbot-sim-straggler:{self.seed}:{job_id}:{len(self.placed)}")
            node = names[rng.choice(spec.nodes)]
        elif self.topology.index(node) not in spec.nodes:
            raise ValueError(f"{node} is not in job {job_id}")
        return self._inject(cause, node, None, since, None, job_id, dict(detail))

    def add_job(
        self,
        nodes: Sequence[str],
        *,
        name: str | None = None,
        user: str = "alice",
        start: datetime | None = None,
        step_time_s: float = 1.27,
        pipeline_stages: int = 1,
        exports_step_time: bool = True,
        job_id: str | None = None,
        exports_compute_time: bool = False,
        synchronous: bool = True,
    ) -> Job:
        """Start a job on ``nodes`` (default start: three days before ``now``, so that
        yesterday's comparison is there). Jobs running there then are cancelled at its start,
        as a preemption would. ``exports_compute_time`` adds each rank's compute time and
        collective wait to its iteration time; ``synchronous=False`` makes a job of independent
        workers. ``job_id`` (default: the next free number) lets a test give the
        job the id a real scheduler holds it under."""
        if not nodes:
            raise ValueError("a job needs nodes")
        if job_id is not None and (not job_id.isdigit() or job_id in self._job_index):
            raise ValueError(f"job id {job_id!r} is not a number or is taken")
        start = self.now - timedelta(days=3) if start is None else _aware(start, "start")
        start_s = float(_floor_minute(start.timestamp()))
        indices = tuple(dict.fromkeys(self.topology.index(n) for n in nodes))
        for j in sorted({j for n in indices for j in self.node_jobs[n]}):
            old = self.job_specs[j]
            if old.end_s > start_s:
                end_s = max(old.start_s, start_s)
                job = old.job.model_copy(
                    update={
                        "end": datetime.fromtimestamp(end_s, UTC),
                        "state": JobState.CANCELLED,
                    }
                )
                self.job_specs[j] = replace(old, job=job, end_s=end_s)
        if job_id is None:
            job_id = str(max((int(s.job.job_id) for s in self.job_specs), default=0) + 1)
        spec = make_spec(
            name=name or f"train-{job_id}",
            user=user,
            nodes=indices,
            node_names=self.topology.names,
            start_s=start_s,
            end_s=math.inf,
            state=JobState.RUNNING,
            gpus_per_node=self.hardware.gpus_per_node,
            base_step_s=step_time_s,
            pipeline_stages=pipeline_stages,
            exports_step_time=exports_step_time,
            job_id=job_id,
            exports_compute_time=exports_compute_time,
            synchronous=synchronous,
        )
        self.job_specs.append(spec)
        self._job_index[job_id] = len(self.job_specs) - 1
        for n in indices:
            self.node_jobs[n].append(len(self.job_specs) - 1)
        self._changed()
        return spec.job

    def _inject_random(self, rate: float) -> None:
        rng = self._rng("random-faults")
        count = max(1, round(rate * self.n_nodes))
        for n in rng.sample(range(self.n_nodes), min(count, self.n_nodes)):
            self.inject(rng.choice(RANDOM_NODE_KINDS), self.topology.names[n])

    # --- scenarios ---------------------------------------------------------------------------
    @classmethod
    def scenario(
        cls,
        seed: int,
        n_nodes: int = 512,
        *,
        now: datetime | None = None,
        gpus_per_node: int = 8,
        host_label: HostLabel = "Hostname",
    ) -> SimFleet:
        """A fleet with a random mix of every fault kind, on top of ordinary noise.

        Each faulty node gets exactly one fault and each slowed job exactly one cause, so that a
        diagnosis can be scored without ambiguity: a leaf switch outage (32 nodes, when the
        fleet has 64 or more), one straggler per training job for as many node causes as there
        are such jobs, the three job-level causes on jobs with no faulty node, every node kind
        at least once, and more random node faults up to about 3 % of nodes. Small fleets get
        what fits.
        """
        fleet = cls(n_nodes, seed, gpus_per_node, now, fault_rate=0.0, host_label=host_label)
        rng = random.Random(f"meowbot-sim-scenario:{seed}")
        names = fleet.topology.names
        used: set[int] = set()
        if n_nodes >= 64:
            leaves = fleet.topology.leaf_switches[: n_nodes // 32]
            leaf = rng.choice(leaves)
            fleet.inject_leaf_outage(leaf)
            used.update(fleet.topology.index(n) for n in fleet.topology.nodes_on_leaf(leaf))
        training = [
            s
            for s in fleet.job_specs
            if s.running(fleet.now_s)
            and s.exports_step_time
            and len(s.nodes) >= 4
            and not used.intersection(s.nodes)
        ]
        rng.shuffle(training)
        job_kinds = [FaultKind.PIPELINE_IMBALANCE, FaultKind.GC_STALLS, FaultKind.JOB_SLOWDOWN]
        for kind in job_kinds:
            for s in training:
                if kind is FaultKind.PIPELINE_IMBALANCE and s.pipeline_stages < 2:
                    continue
                fleet.inject(kind, job_id=s.job.job_id)
                used.update(s.nodes)
                training.remove(s)
                break
        causes = list(STRAGGLER_NODE_KINDS)
        rng.shuffle(causes)
        for kind, s in zip(causes, training, strict=False):
            fault = fleet.inject_straggler(s.job.job_id, kind)
            assert fault.node is not None
            used.update(s.nodes)  # one cause per job, and the other nodes of the job stay clean
        free = [n for n in range(n_nodes) if n not in used]
        rng.shuffle(free)
        seen = {f.kind for f in fleet.injected}
        kinds = [k for k in RANDOM_NODE_KINDS if k not in seen]
        extra = max(0, round(0.03 * n_nodes) - len(kinds))
        kinds += [rng.choice(RANDOM_NODE_KINDS) for _ in range(extra)]
        for kind, n in zip(kinds, free, strict=False):
            fleet.inject(kind, names[n])
        return fleet
