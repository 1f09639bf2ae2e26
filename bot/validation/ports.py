"""What a validation needs of a scheduler: hold the node, run the suite there as a job, read
its step files, and let the node go. Implemented for Slurm (bot/backends/slurm_validation.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.models import JobState
from bot.validation.run import StepFiles


class NodeTester(Protocol):
    name: str  # "Slurm", said in sentences

    def folder(self, run_id: str) -> str:
        """Where the job writes its step files, as the node sees it."""
        ...

    async def start(self, node: str, run_id: str, script: str, *, time_limit_s: int) -> str:
        """Holds the node for this run alone (nothing else can land there), lets the run's
        job start on it, submits `script`; returns the job's id."""
        ...

    async def job_state(self, job_id: str) -> JobState | None:
        """The job's state; None once the scheduler has forgotten it."""
        ...

    async def files(self, run_id: str, steps: Sequence[str]) -> dict[str, StepFiles]: ...

    async def cancel(self, job_id: str) -> None: ...

    async def finish(self, node: str, run_id: str, *, passed: bool, reason: str) -> None:
        """On a pass the node goes back into service; otherwise it is drained with `reason`.
        Either way the hold goes."""
        ...


@dataclass(frozen=True)
class RunRecord:
    """A run in flight, as another replica (or this one restarted) takes it up: its job and
    the message that follows it."""

    node: str
    run_id: str
    job_id: str
    channel: str
    ts: str
    by: str  # who asked, as Slack shows them


class ValidationLedger(Protocol):
    """Shared across replicas: which node is being tested by which run, who cancelled, and
    the runs in flight with a lease their watcher keeps fresh."""

    async def record(self, run: RunRecord, ttl_s: int) -> None: ...

    async def records(self) -> list[RunRecord]: ...

    async def forget(self, run_id: str) -> None: ...

    async def lease(self, run_id: str, ttl_s: int, *, take: bool = False) -> bool:
        """Keeps the run's watcher lease for `ttl_s` (`take`: only if no one holds it; True
        when this caller now holds it)."""
        ...

    async def hold(self, node: str, run_id: str, ttl_s: int) -> str | None:
        """Claims `node` for `run_id`; returns the run already holding it, else None."""
        ...

    async def running(self) -> int:
        """How many runs hold a node now."""
        ...

    async def release(self, node: str, run_id: str) -> None: ...

    async def cancel(self, run_id: str, user_name: str) -> None: ...

    async def cancelled_by(self, run_id: str) -> str | None: ...

    async def first_boot(self, node: str, reason: str, booted: str) -> str:
        """The boot (`SchedulerNode.boot_mark`) `node` was in when first seen drained for
        `reason`: another one means it booted since."""
        ...

    async def forget_boots(self, keep: Collection[str]) -> None:
        """Forgets the first boot times of every node not in `keep` (back in service)."""
        ...
