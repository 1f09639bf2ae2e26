"""The ports more than one domain takes: protocols the adapters in bot/backends/ implement.

A port used by one domain lives in that domain's `ports.py`; the ones here are shared: the
state store, the scheduler (triage and the alerts drain and resume through it), the inventory
and where a node sits (triage and the alerts group by it), the resume memory (triage reads it,
both write it), and the fenced lock (the alert notifier and the weekly digest).

The scheduler port is kept to nodes with state and reason, jobs with node lists, and
drain/resume, so that a Kubernetes adapter fits the same shape as Slurm's (conditions -> state
flags, cordon -> drain, taint reason -> reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from bot import drain_reason
from bot.models import Job, Node


class StateStore(Protocol):
    """Shared state (Redis in production). Keys are namespaced by team id inside the store."""

    name: str

    async def claim(self, team_id: str, kind: str, key: str, ttl_s: int) -> bool:
        """True the first time (team, kind, key) is claimed within ttl_s, False afterwards."""
        ...

    async def ping(self) -> None:
        """Raises when the store cannot be reached."""
        ...

    async def close(self) -> None: ...


class Fence(Protocol):
    """A lock held with a fencing token: writes made under it fail (`bot.errors.FenceLost`)
    once another holder took the lock."""

    @property
    def name(self) -> str: ...

    @property
    def token(self) -> str: ...


class Located(Protocol):
    """What grouping needs of a node: its leaf switch and rack ("" when unknown)."""

    @property
    def leaf_switch(self) -> str: ...

    @property
    def rack(self) -> str: ...


class Inventory(Protocol):
    """What the cluster is made of: node names, topology, expected hardware."""

    async def load(self) -> None:
        """Refreshes what it knows when that is stale (cheap when it is not)."""
        ...

    def names(self) -> Sequence[str]: ...

    def node(self, name: str) -> Node | None: ...

    def leaf_switch(self, name: str) -> str | None: ...

    def place(self, name: str) -> Located | None:
        """Where the node sits, for grouping; None when the inventory does not know."""
        ...


class ResumeMemory(Protocol):
    """When meowbot last resumed each node (shared by every replica)."""

    async def record_resume(self, node: str, at: datetime) -> None: ...

    async def resumes(self, nodes: Sequence[str]) -> dict[str, datetime]:
        """The last resume of each of `nodes` that meowbot made (nodes it never resumed left
        out)."""
        ...


class SchedulerNode(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    state: str  # base state, lower case: idle, mixed, allocated, down, future, ...
    flags: tuple[str, ...] = ()  # upper case modifiers: DRAIN, NOT_RESPONDING, ...
    reason: str | None = None
    reason_set_by: str | None = None
    reason_changed_at: datetime | None = None
    booted_at: datetime | None = None  # when the node last booted, where the scheduler says
    boot_id: str | None = None  # which boot it is in (a kubelet's bootID): changes on a reboot
    # Kubernetes: someone else's cordon (spec.unschedulable meowbot did not set), and the
    # scheduling taints (NoSchedule, NoExecute) others put on the node, as `key=value:Effect`.
    others_cordon: bool = False
    others_taints: tuple[str, ...] = ()

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
    def boot_mark(self) -> str | None:
        """What tells one boot of the node from the next: its boot id, else its boot time."""
        if self.boot_id:
            return self.boot_id
        return self.booted_at.isoformat() if self.booted_at else None

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

    async def last_finished(self, user: str) -> Job | None:
        """The user's job that ended last, while the scheduler remembers it."""
        ...

    async def previous_run(self, job: Job) -> Job | None:
        """The earlier run of the same job (a requeue or resubmission), when known."""
        ...

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        """Takes the node out of scheduling. `now=False` lets running jobs finish (Slurm DRAIN,
        a Kubernetes cordon); `now=True` stops them too (Slurm DOWN: its jobs end and are
        requeued where they allow it; cordon and evict), for faults that have broken them."""
        ...

    async def resume(self, node: str, *, force: bool = False) -> None:
        """Takes back meowbot's drain; `force` (a person confirmed) also what someone else set
        that the scheduler lets meowbot clear (Slurm's drain, a Kubernetes cordon)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class Sided(Protocol):
    """A scheduler over several (Slurm and Kubernetes at once): each one's own view of nodes,
    so an action can say each one's outcome."""

    async def sides(self, names: Sequence[str]) -> dict[str, dict[str, SchedulerNode]]:
        """Scheduler name -> the named nodes it knows."""
        ...
