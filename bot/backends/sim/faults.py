"""The faults the simulated fleet can inject, and what each does to the metrics.

Each injection is recorded as an ``InjectedFault``: the ground truth that tests and benchmarks
score diagnoses against. Each kind moves only the series that are its own evidence (an Xid does
not also bump the ECC counter), so that a check that finds the fault finds exactly that kind and
the scoring stays unambiguous. Counters only ever grow: a fault adds to a counter from its
``since`` on and freezes its contribution at ``until``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from bot import metric_names as m
from bot.models import FaultKind
from bot.triage.checks import (
    CHECKS,
    CLOCK_HELD,
    CLOCK_HELD_KINDS,
    Between,
    Device,
    Fixed,
    OneOf,
    Param,
    Sets,
)
from bot.triage.checks import (
    XID_CODES as XID_CODES,  # the Xid codes the simulator injects (the `xid` entry's)
)

DetailValue = str | int | float | bool
Scope = Literal["gpu", "nic", "netdev", "node", "job"]


@dataclass(frozen=True, slots=True)
class KindSpec:
    scope: Scope
    """What the fault sits on: one GPU, one IB port, one network interface, a node, or a job."""
    slowdown: float
    """Extra step time (0.1 = 10 % slower) of the ranks on the node while it runs a job; at
    least 6 % where not 0, so that ground truth stands clear of the +-1.5 % jitter."""
    detail: tuple[Param, ...] = ()
    """Its parameters where the caller gives none, in draw order (`default_detail`)."""


KIND_SPECS: dict[FaultKind, KindSpec] = {
    # A health check's kind: as its entry says (bot/triage/checks.py `injects`).
    **{c.kind: KindSpec(c.injects.on, c.injects.slowdown, c.injects.detail) for c in CHECKS},
    # The causes of a slow job that no health check finds.
    FaultKind.LOW_SM_CLOCK: KindSpec("gpu", 0.12, (OneOf("sm_clock_mhz", (1410, 1530, 1620)),)),
    FaultKind.NUMA_MISPLACEMENT: KindSpec(
        "gpu",
        0.07,
        (
            OneOf("misplaced", ("gpu", "nic")),
            Fixed("miss_pages_per_s", 25_000.0),
            Fixed("gpu_util_share", 0.85),
        ),
    ),
    FaultKind.CPU_CONTENTION: KindSpec(
        "node",
        0.10,
        (
            Between("load", 80.0, 160.0, 1),
            Between("psi_per_s", 0.4, 0.9, 2),
            Fixed("gpu_util_share", 0.8),
        ),
    ),
    FaultKind.PIPELINE_IMBALANCE: KindSpec("job", 0.12),
    FaultKind.GC_STALLS: KindSpec(
        "job", 0.8, (OneOf("period_min", (5, 10, 15)), Between("phase_min", 0, 4))
    ),
    FaultKind.JOB_SLOWDOWN: KindSpec("job", 0.15),
}

BUSY_SM_CLOCK_MHZ = 1965.0
"""A busy healthy GPU's usual SM clock (it moves between 1,935 and 1,980 MHz)."""
CLOCK_KINDS = CLOCK_HELD_KINDS | {FaultKind.LOW_SM_CLOCK}
"""Kinds that slow a GPU through its clock: their clock follows a given slowdown."""

ALL_NICS = "all"
"""``detail["nic"]`` of an IB fault that takes every port of the node (a leaf switch outage)."""


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """Ground truth: one fault the fleet was told to show.

    ``node`` is None only for job-level kinds, which name ``job_id`` instead. ``detail`` holds the
    kind's parameters (the Xid code, the NIC, the rate of a counter, the drifted version, the
    step-time slowdown...), all filled in at injection so that the record says exactly what the
    metrics show.
    """

    kind: FaultKind
    node: str | None
    gpu: int | None
    since: datetime
    detail: Mapping[str, DetailValue] = field(default_factory=dict, hash=False, compare=True)
    until: datetime | None = None
    job_id: str | None = None
    since_s: float = field(init=False, repr=False, compare=False, hash=False)
    until_s: float = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Cached because the metric engine asks for them once per sample.
        object.__setattr__(self, "since_s", self.since.timestamp())
        object.__setattr__(
            self, "until_s", math.inf if self.until is None else self.until.timestamp()
        )

    @property
    def scope(self) -> Scope:
        return KIND_SPECS[self.kind].scope

    def active(self, t_s: float) -> bool:
        return self.since_s <= t_s < self.until_s

    def elapsed_s(self, t_s: float) -> float:
        """Seconds the fault has been acting by ``t_s`` (frozen after ``until``)."""
        return max(0.0, min(t_s, self.until_s) - self.since_s)

    def number(self, key: str) -> float:
        value = self.detail[key]
        if isinstance(value, str):
            raise TypeError(f"detail {key!r} of {self.kind} is not a number")
        return float(value)

    def text(self, key: str) -> str:
        return str(self.detail[key])


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What default details are drawn from: the node's devices."""

    gpus: int
    nics: tuple[str, ...]
    netdevs: tuple[str, ...]


def default_detail(
    kind: FaultKind, rng: random.Random, shape: NodeShape, detail: Mapping[str, DetailValue]
) -> dict[str, DetailValue]:
    """Fill in the parameters of ``kind`` that the caller left out, deterministically from ``rng``.

    Values are chosen to be unmistakable for a check with sane thresholds and far from the noise
    the fleet makes on healthy nodes.
    """
    out: dict[str, DetailValue] = {"slowdown": KIND_SPECS[kind].slowdown}
    _draw(KIND_SPECS[kind].detail, rng, shape, out)
    if kind in CLOCK_KINDS and "slowdown" in detail and "sm_clock_mhz" not in detail:
        # A GPU that computes `slowdown` slower on clock alone runs at 1/(1 + slowdown) of its
        # busy clock (in the 15 MHz steps GPUs clock in): a 3 % straggler is a 3 % clock.
        clock = BUSY_SM_CLOCK_MHZ / (1.0 + float(detail["slowdown"]))
        out["sm_clock_mhz"] = float(int(clock / 15.0) * 15)
    out.update(detail)
    return out


def _draw(
    params: tuple[Param, ...], rng: random.Random, shape: NodeShape, out: dict[str, DetailValue]
) -> None:
    """Each parameter in turn (the words above `Fixed` in bot/triage/checks.py)."""
    for p in params:
        if isinstance(p, Fixed):
            out[p.key] = p.value
        elif isinstance(p, OneOf):
            out[p.key] = rng.choice(p.values)
        elif isinstance(p, Between):
            out[p.key] = (
                rng.randint(int(p.low), int(p.high))
                if p.digits is None
                else round(rng.uniform(p.low, p.high), p.digits)
            )
        elif isinstance(p, Device):
            out[p.key] = rng.choice(shape.nics if p.of == "nics" else shape.netdevs)
        else:
            _draw(p.first if rng.random() < 0.5 else p.second, rng, shape, out)


# --- what a fault does to a metric's value ------------------------------------------------------
Effect = Callable[[float, InjectedFault, float], float]
"""(value without the fault, the fault, time in epoch seconds) -> value with it."""


def _counter(per_min_key: str, scale: float = 1.0) -> Effect:
    """A counter that ticks once at ``since`` and then at ``per_min`` a minute."""

    def effect(value: float, fault: InjectedFault, t_s: float) -> float:
        rate = fault.number(per_min_key) * scale / 60.0
        return value + 1.0 + math.floor(rate * fault.elapsed_s(t_s))

    return effect


def _set(key: str) -> Effect:
    return lambda value, fault, t_s: fault.number(key)


def _const(new: float) -> Effect:
    return lambda value, fault, t_s: new


def _at_most(key: str) -> Effect:
    return lambda value, fault, t_s: min(value, fault.number(key))


def _at_least(key: str) -> Effect:
    return lambda value, fault, t_s: max(value, fault.number(key))


def _times(key: str) -> Effect:
    return lambda value, fault, t_s: value * fault.number(key)


def _bits(bit: int) -> Effect:
    return lambda value, fault, t_s: float(int(value) | bit)


def _add(key: str) -> Effect:
    return lambda value, fault, t_s: value + fault.number(key)


def _plus(count_key: str) -> Effect:
    return lambda value, fault, t_s: value + fault.number(count_key)


def _flap_count(value: float, fault: InjectedFault, t_s: float) -> float:
    return value + 1.0 + math.floor(fault.elapsed_s(t_s) / fault.number("period_s"))


def _flap_state(down: float) -> Effect:
    def effect(value: float, fault: InjectedFault, t_s: float) -> float:
        # Down for the minute at each flap, up in between: a one-minute scrape sees both.
        return down if (t_s - fault.since_s) % fault.number("period_s") < 60.0 else value

    return effect


def _pcie(key: str) -> Effect:
    def effect(value: float, fault: InjectedFault, t_s: float) -> float:
        return fault.number(key) if key in fault.detail else value

    return effect


def _rate_counter(key: str) -> Effect:
    return lambda value, fault, t_s: value + math.floor(fault.number(key) * fault.elapsed_s(t_s))


def _rate_counter_frac(key: str) -> Effect:
    def effect(value: float, fault: InjectedFault, t_s: float) -> float:
        return value + round(fault.number(key) * fault.elapsed_s(t_s), 3)

    return effect


def _held(value: float, fault: InjectedFault, t_s: float) -> float:
    """A violation counter (ns) growing all the time the fault holds the clocks back."""
    return value + float(int(fault.elapsed_s(t_s) * 1e9))


def _since(value: float, fault: InjectedFault, t_s: float) -> float:
    return fault.since_s


def _key(s: Sets) -> str:
    return str(s.arg)


def _number(s: Sets) -> float:
    return float(s.arg)


# The words of a check entry's `Sets.how` (bot/triage/checks.py), each the effect it names.
EFFECT_OF: dict[str, Callable[[Sets], Effect]] = {
    "set": lambda s: _set(_key(s)),
    "const": lambda s: _const(_number(s)),
    "at_least": lambda s: _at_least(_key(s)),
    "at_most": lambda s: _at_most(_key(s)),
    "times": lambda s: _times(_key(s)),
    "plus": lambda s: _plus(_key(s)),
    "counter": lambda s: _counter(_key(s), s.scale),
    "bits": lambda s: _bits(int(_number(s))),
    "held": lambda s: _held,
    "flap_count": lambda s: _flap_count,
    "flap_state": lambda s: _flap_state(_number(s)),
    "if_given": lambda s: _pcie(_key(s)),
    "bump": lambda s: _add_const(_number(s)),
    "since": lambda s: _since,
}


def _add_const(n: float) -> Effect:
    return lambda value, fault, t_s: value + n


EFFECTS: dict[FaultKind, dict[str, Effect]] = {
    **{c.kind: {s.metric: EFFECT_OF[s.how](s) for s in c.injects.sets} for c in CHECKS},
    FaultKind.LOW_SM_CLOCK: {CLOCK_HELD.metric: EFFECT_OF[CLOCK_HELD.how](CLOCK_HELD)},
    # The host feeds the GPU late: it idles between kernels.
    FaultKind.NUMA_MISPLACEMENT: {
        m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL: _rate_counter("miss_pages_per_s"),
        m.DCGM_FI_DEV_GPU_UTIL: _times("gpu_util_share"),
    },
    FaultKind.CPU_CONTENTION: {
        m.NODE_LOAD1: _add("load"),
        m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL: _rate_counter_frac("psi_per_s"),
        m.DCGM_FI_DEV_GPU_UTIL: _times("gpu_util_share"),  # every GPU of the node
    },
    # Topology (numa) and step times (job kinds and slowdowns) are not a value transform: the
    # engine applies them.
    FaultKind.PIPELINE_IMBALANCE: {},
    FaultKind.GC_STALLS: {},
    FaultKind.JOB_SLOWDOWN: {},
}

assert set(EFFECTS) == set(FaultKind) == set(KIND_SPECS), "every kind needs a spec and effects"
