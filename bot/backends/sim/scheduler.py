"""A scheduler over the simulated fleet's jobs, for the demo and tests without Slurm.

It answers the scheduler port from `SimFleet`'s job table (the same jobs the simulated metrics
show step times for) and keeps drains in memory, so the shell and the sim-backed bot can run
/job-slow and the Drain button end to end. With SLURM_REST_URL set, the real adapter is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from bot import drain_reason
from bot.backends.sim.fleet import SimFleet
from bot.models import Job, JobState
from bot.ports import SchedulerNode


class SimScheduler:
    name = "the simulated scheduler"

    def __init__(self, fleet: SimFleet) -> None:
        self.fleet = fleet
        # node -> (reason, when set, set down rather than drained)
        self._drained: dict[str, tuple[str, datetime, bool]] = {}

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SchedulerNode]:
        known = self.fleet.topology.names
        wanted = known if names is None else [n for n in names if self.fleet.topology.has(n)]
        out: dict[str, SchedulerNode] = {}
        for name in wanted:
            busy = self.fleet.running_job(name) is not None
            reason, changed, down = self._drained.get(name, (None, None, False))
            out[name] = SchedulerNode(
                name=name,
                state="down" if down else "allocated" if busy else "idle",
                flags=("DRAIN",) if reason and not down else (),
                reason=reason,
                reason_set_by=(
                    "meowbot" if drain_reason.is_ours(reason) else "an operator" if reason else None
                ),
                reason_changed_at=changed,
            )
        return out

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        live = {JobState.RUNNING, JobState.PENDING}
        return [j for j in self.fleet.jobs if j.state in live and (user is None or j.user == user)]

    async def job(self, job_id: str) -> Job | None:
        if self.fleet.job_position(job_id) is None:
            return None
        return self.fleet.job(job_id)

    async def last_finished(self, user: str) -> Job | None:
        ended = [j for j in self.fleet.jobs if j.user == user and j.end is not None]
        return max(ended, key=lambda j: j.end or j.start, default=None)

    async def previous_run(self, job: Job) -> Job | None:
        return await self.job(job.prev_job_id) if job.prev_job_id else None

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        self.fleet.topology.index(node)  # unknown nodes raise, as Slurm refuses them
        self._drained[node] = (drain_reason.check(reason), datetime.now(UTC), now)

    async def resume(self, node: str, *, force: bool = False) -> None:
        self._drained.pop(node, None)

    def hold(self, node: str, reason: str, *, down: bool = False) -> None:
        """Drains (or sets down) a node as an operator would, with their own reason."""
        self.fleet.topology.index(node)
        self._drained[node] = (reason, datetime.now(UTC), down)

    async def close(self) -> None:
        return None
