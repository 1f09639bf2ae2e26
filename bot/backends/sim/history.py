"""The regression finder's FleetHistory over the simulated fleet: what its exporters showed.

Versions come from the fleet's own timeline (its rollouts and drift faults: the values the
exported `node_uname_info{release}` and DCGM labels carry at each minute), as spans between the
minutes they changed at. Job paces are the recorded pace Prometheus would keep: each running
training job's slowest rank at each sample, from the same snapshots the step-time series are
made of, so the sim's history and its exposition agree to the sample.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import UTC, datetime

from bot.backends.sim.fleet import DRIFT_KINDS, SimFleet
from bot.backends.sim.rollouts import BUILT_IN_SLOTS
from bot.backends.sim.snapshot import FleetSnapshot, Scope
from bot.regressions.models import JobPace, PaceSample, VersionSpan

MAX_SAMPLES = 1_000
"""Pace samples a job at most over the window (a sample every 10 minutes over 7 days): the
read stays bounded whatever the window, as the Prometheus adapter's step is."""
MIN_STEP_S = 300
"""At least the recorded pace's 5-minute resolution a range query would read."""


def _at(t_s: float) -> datetime:
    return datetime.fromtimestamp(t_s, UTC)


def pace_step_s(span_s: float) -> int:
    """The sampling step over a window of `span_s`: whole minutes, MAX_SAMPLES at most."""
    return max(MIN_STEP_S, math.ceil(span_s / MAX_SAMPLES / 60) * 60)


class SimFleetHistory:
    name = "the simulated fleet"

    def __init__(self, fleet: SimFleet) -> None:
        self.fleet = fleet
        self.reads = 0  # snapshots made by job_paces, for the tests

    def components(self) -> tuple[str, ...]:
        """What the fleet can say the history of: the built-in three and any rolled out."""
        extra = (r.component for r in self.fleet.rollouts if r.component not in BUILT_IN_SLOTS)
        return (*BUILT_IN_SLOTS, *dict.fromkeys(extra))

    def _changes(self, node: int, component: str, start_s: float, end_s: float) -> list[float]:
        """The instants inside the window where the node's value may change."""
        out = {
            r.switch_s[node]
            for r in self.fleet.rollouts
            if r.component == component and start_s < r.switch_s[node] <= end_s
        }
        slot = BUILT_IN_SLOTS.get(component)
        if slot is not None:
            drift = DRIFT_KINDS[slot]
            for placed in self.fleet.placed:
                if placed.node != node or placed.fault.kind is not drift:
                    continue
                for t in (placed.fault.since_s, placed.fault.until_s):
                    if start_s < t <= end_s:
                        out.add(t)
        return sorted(out)

    async def versions(
        self, components: Sequence[str], *, start: datetime, end: datetime
    ) -> list[VersionSpan]:
        start_s, end_s = start.timestamp(), end.timestamp()
        fleet = self.fleet
        names = fleet.topology.names
        spans: list[VersionSpan] = []
        for component in dict.fromkeys(components):
            for n in range(fleet.n_nodes):
                if fleet.version_at(n, component, start_s) is None:
                    continue  # a component this fleet never had
                bounds = [start_s, *self._changes(n, component, start_s, end_s), end_s]
                value = fleet.version_at(n, component, start_s)
                since = start_s
                for t in bounds[1:-1]:
                    now = fleet.version_at(n, component, t)
                    if now != value:
                        # The last minute the old value showed; the new one from its own.
                        spans.append(
                            VersionSpan(names[n], component, str(value), _at(since), _at(t - 60))
                        )
                        value, since = now, t
                spans.append(VersionSpan(names[n], component, str(value), _at(since), end))
        return spans

    async def job_paces(self, *, start: datetime, end: datetime) -> list[JobPace]:
        # Seconds of simulation over days of a big fleet: off the event loop, so that the bot
        # keeps answering meanwhile.
        return await asyncio.to_thread(self.paces, start.timestamp(), end.timestamp())

    def paces(self, start_s: float, end_s: float) -> list[JobPace]:
        """Every training job's slowest rank at each step of the window (computed)."""
        fleet = self.fleet
        step = pace_step_s(end_s - start_s)
        first = math.ceil(start_s / step) * step  # aligned, as a range query's steps are
        # Snapshots of its own (not the fleet's cache, which the bot's other reads share).
        scope = Scope(fleet, None)
        samples: dict[int, list[PaceSample]] = {}
        t = first
        while t <= end_s:
            pace: dict[int, float] = {}
            for j, _, _, _, seconds in FleetSnapshot(fleet, t, scope).step_times():
                if seconds > pace.get(j, 0.0):
                    pace[j] = seconds
            self.reads += 1
            for j, seconds in pace.items():
                samples.setdefault(j, []).append(PaceSample(_at(t), seconds))
            t += step
        out = []
        for j, points in sorted(samples.items()):
            spec = fleet.job_specs[j]
            out.append(
                JobPace(
                    job_id=spec.job.job_id,
                    nodes=spec.job.nodes,
                    samples=tuple(points),
                    gpus=len(spec.nodes) * fleet.gpus_per_node,
                )
            )
        return out
