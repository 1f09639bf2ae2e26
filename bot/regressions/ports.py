"""What the regression finder reads, behind a port (Prometheus or the simulator, bot/backends)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from bot.regressions.models import JobPace, NodeCompute, VersionSpan


class FleetHistory(Protocol):
    name: str

    def components(self) -> tuple[str, ...]:
        """What it can read the history of: the built-in components and the configured ones."""
        ...

    async def versions(
        self, components: Sequence[str], *, start: datetime, end: datetime
    ) -> list[VersionSpan]:
        """Every node's value of each component over the window: bounded queries whatever the
        fleet size (one range query a component, `count by (node, <label>)`)."""
        ...

    async def job_paces(self, *, start: datetime, end: datetime) -> list[JobPace]:
        """Every job's pace over the window, with its nodes: bounded queries (the recorded
        pace of all jobs in one range query, the job-to-node map in another)."""
        ...

    async def node_compute(self, *, start: datetime, end: datetime) -> list[NodeCompute]:
        """Each node's compute time in each job over the window, for the jobs that export it
        (the mean over the node's ranks): bounded queries whatever the fleet size (one range
        query of `avg by (job, node)`, at a step that widens with the rows it loads)."""
        ...
