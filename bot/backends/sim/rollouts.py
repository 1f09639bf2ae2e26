"""Rolling upgrades of the simulated fleet: a component moving from one value to another node
by node, and the true effect the new value has on the step time of the jobs that run on it.

A rollout reaches the nodes in an order drawn from its seed (one node after another, evenly
over its duration), as an operator's rolling upgrade drains and upgrades a few nodes at a time.
Synchronous training runs at the pace of its slowest rank, so a job's step time moves by the
rollout's effect from the moment the FIRST of its nodes runs the new value (the ground truth
the regression finder must recover). A second rollout can follow the very same order and times
(`like=`), as a new image shipped with a new kernel does: the two cannot be told apart.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from bot.models import FaultKind
from bot.triage.checks import DRIFT_OF

BUILT_IN_SLOTS: dict[str, int] = {"driver": 0, "kernel": 1, "firmware": 2}
"""Components every node exports (its slot in the fleet's (driver, kernel, firmware) versions);
any other component is a configured info metric, such as a container image."""
DRIFT_SLOTS: dict[FaultKind, int] = {DRIFT_OF[c]: slot for c, slot in BUILT_IN_SLOTS.items()}
"""The fault that moves one node off the fleet's value, and the slot it moves."""


@dataclass(frozen=True)
class SimRollout:
    component: str
    old: str
    new: str
    start_s: float
    duration_s: float
    effect: float
    """The true effect on a synchronous job's step time once any of its nodes runs `new`
    (0.02: 2 % slower; negative: faster)."""
    switch_s: tuple[float, ...]
    """Per node index: when it runs `new` (inf: never, outside the rollout's coverage)."""

    def switched(self, node: int, t_s: float) -> bool:
        return self.switch_s[node] <= t_s

    def value(self, node: int, t_s: float) -> str:
        return self.new if self.switched(node, t_s) else self.old

    def first_switch_s(self, nodes: tuple[int, ...]) -> float:
        """When the first of `nodes` ran `new` (inf if none ever does)."""
        return min((self.switch_s[n] for n in nodes), default=math.inf)


def rollout_times(
    n_nodes: int, *, start_s: float, duration_s: float, coverage: float, seed: str
) -> tuple[float, ...]:
    """Per node, when the rollout reaches it: a seeded order, evenly over the duration, the
    first `coverage` share of the order only (the rest never, within the fleet's time)."""
    if not 0.0 < coverage <= 1.0:
        raise ValueError("coverage must be above 0 and at most 1")
    if duration_s < 0:
        raise ValueError("duration must not be negative")
    order = list(range(n_nodes))
    random.Random(seed).shuffle(order)
    count = max(1, round(coverage * n_nodes))
    times = [math.inf] * n_nodes
    for k, node in enumerate(order[:count]):
        # Whole minutes, as the rest of the fleet's clock.
        times[node] = float(math.floor((start_s + duration_s * k / count) / 60) * 60)
    return tuple(times)
