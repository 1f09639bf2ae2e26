"""The regression finder's FleetHistory over the simulated fleet: what its exporters showed.

Versions come from the fleet's own timeline (its rollouts and drift faults: the values the
exported `node_uname_info{release}` and DCGM labels carry at each minute), as spans between the
minutes they changed at. Job paces are the recorded pace Prometheus would keep: each running
training job's slowest rank at each sample, from the same snapshots the step-time series are
made of, so the sim's history and its exposition agree to the sample. Per-node compute times
(the jobs that export them) are the mean of each node's ranks' exported compute time at the
same samples, read in the same pass: a rollout's effect shows on its upgraded nodes only, and
the job's own wander (bot/backends/sim/wander.py) on all of them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.backends.sim.fleet import DRIFT_KINDS, SimFleet
from bot.backends.sim.rollouts import BUILT_IN_SLOTS
from bot.backends.sim.snapshot import FleetSnapshot, Scope
from bot.regressions.models import JobPace, NodeCompute, PaceSample, VersionSpan

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
        self._pending: dict[tuple[float, float], asyncio.Future[_Read]] = {}

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
        return (await self._read_window(start, end)).paces

    async def node_compute(self, *, start: datetime, end: datetime) -> list[NodeCompute]:
        return (await self._read_window(start, end)).computes

    async def _read_window(self, start: datetime, end: datetime) -> _Read:
        """One pass over the window for both reads when they are asked together (the service
        does): the second joins the first's while it runs. Nothing is kept after it, so a
        fleet changed since is read as it is now."""
        window = (start.timestamp(), end.timestamp())
        running = self._pending.get(window)
        if running is None:
            running = asyncio.ensure_future(asyncio.to_thread(self.read, *window))
            self._pending[window] = running
            running.add_done_callback(lambda _: self._pending.pop(window, None))
        return await asyncio.shield(running)

    def paces(self, start_s: float, end_s: float) -> list[JobPace]:
        """Every training job's slowest rank at each step of the window (computed)."""
        return self.read(start_s, end_s).paces

    def read(self, start_s: float, end_s: float) -> _Read:
        """Every training job's slowest rank, and each node's mean compute time in the jobs
        that export it, at each step of the window (computed)."""
        fleet = self.fleet
        step = pace_step_s(end_s - start_s)
        first = math.ceil(start_s / step) * step  # aligned, as a range query's steps are
        # Snapshots of its own (not the fleet's cache, which the bot's other reads share).
        scope = Scope(fleet, None)
        samples: dict[int, list[PaceSample]] = {}
        node_samples: dict[tuple[int, int], list[PaceSample]] = {}
        t = first
        while t <= end_s:
            at = _at(t)
            pace: dict[int, float] = {}
            computes: dict[tuple[int, int], list[float]] = {}
            for j, n, _, _, seconds, compute, _ in FleetSnapshot(fleet, t, scope).rank_times():
                if seconds > pace.get(j, 0.0):
                    pace[j] = seconds
                if fleet.job_specs[j].exports_compute_time:
                    computes.setdefault((j, n), []).append(compute)
            self.reads += 1
            for j, seconds in pace.items():
                samples.setdefault(j, []).append(PaceSample(at, seconds))
            for key, values in computes.items():
                node_samples.setdefault(key, []).append(PaceSample(at, sum(values) / len(values)))
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
        names = fleet.topology.names
        per_node = [
            NodeCompute(fleet.job_specs[j].job.job_id, names[n], tuple(points))
            for (j, n), points in sorted(node_samples.items())
        ]
        return _Read(out, per_node)


@dataclass(frozen=True)
class _Read:
    paces: list[JobPace]
    computes: list[NodeCompute]
