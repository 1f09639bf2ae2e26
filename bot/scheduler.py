"""The scheduler port: what triage needs from Slurm (or, later, Kubernetes).

Kept to nodes with state and reason, jobs with node lists, and drain/resume, so that a
Kubernetes adapter fits the same shape (conditions -> state flags, cordon -> drain, taint
reason -> reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from bot import drain_reason
from bot.models import Job


class SchedulerNode(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    state: str  # base state, lower case: idle, mixed, allocated, down, future, ...
    flags: tuple[str, ...] = ()  # upper case modifiers: DRAIN, NOT_RESPONDING, ...
    reason: str | None = None
    reason_set_by: str | None = None
    reason_changed_at: datetime | None = None

    @property
    def draining(self) -> bool:
        return "DRAIN" in self.flags or self.state in {"drain", "draining", "drained"}

    @property
    def down(self) -> bool:
        return self.state == "down" or "DOWN" in self.flags

    @property
    def out_of_service(self) -> bool:
        """Drained or set down: what a resume brings back."""
        return self.draining or self.down

    @property
    def reason_is_ours(self) -> bool:
        return drain_reason.is_ours(self.reason)


class Scheduler(Protocol):
    name: str  # "Slurm", said in error sentences

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SchedulerNode]:
        """State of the named nodes (all when None); unknown names are left out."""
        ...

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        """Pending and running jobs, optionally of one user."""
        ...

    async def job(self, job_id: str) -> Job | None:
        """One job, finished ones included while the scheduler remembers them."""
        ...

    async def previous_run(self, job: Job) -> Job | None:
        """The earlier run of the same job (a requeue or resubmission), when known."""
        ...

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        """Takes the node out of scheduling. `now=False` lets running jobs finish (Slurm DRAIN,
        a Kubernetes cordon); `now=True` stops them too (Slurm DOWN: its jobs end and are
        requeued where they allow it; cordon and evict), for faults that have broken them."""
        ...

    async def resume(self, node: str) -> None: ...

    async def close(self) -> None: ...
