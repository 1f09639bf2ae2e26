"""Runs the suite on a drained node through its scheduler and puts the node back in service
only when every step passed; then reads the node back and answers with what it is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from bot import drain_reason
from bot.errors import BackendError
from bot.models import JobState
from bot.mrkdwn import code
from bot.ports import Scheduler, SchedulerNode
from bot.triage.ports import FaultHistory
from bot.triage.repeat_config import FAILED_VALIDATION, RepeatConfig
from bot.triage.repeats import bounded, failed_validation, offenders
from bot.validation.config import ValidationConfig
from bot.validation.ports import NodeTester
from bot.validation.run import StepOutcome, all_ended, batch_script, outcomes, verdict

ENDED = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT})
FILES_GRACE_S = 30.0
"""How long after its job ended a step's files may still appear (a shared filesystem's cache)."""
MARGIN_S = 300
"""The job's time limit beyond its steps' timeouts: the script's own start, the scheduler's."""


@dataclass(frozen=True)
class Refusal:
    sentence: str


@dataclass
class Validation:
    node: str
    run_id: str
    steps: list[StepOutcome]
    job_id: str | None = None
    ended: bool = False
    passed: bool = False
    cancelled_by: str | None = None
    reason: str | None = None  # the drain reason on a failure
    after: SchedulerNode | None = None  # the node as the scheduler holds it at the end
    error: str | None = None  # a scheduler that refused a step of the run itself
    offender: str | None = None  # its failures make it a repeat offender: the line saying so


Progress = Callable[[Validation], Awaitable[None]]
Cancelled = Callable[[], Awaitable[str | None]]


def refusal(node: SchedulerNode | None, name: str) -> Refusal | None:
    """Whether `name` may be tested now: it must be known and out of service (drained or
    down), so that no job of anyone's shares its GPUs with the test."""
    if node is None:
        return Refusal(f"I don't know a node {code(name[:60])} in the scheduler.")
    if not node.out_of_service:
        return Refusal(
            f"{code(name)} is in service ({node.state}): drain it first, so that no job shares "
            "its GPUs with the test."
        )
    if node.others_taints:
        # The test's Job tolerates meowbot's taints and the cordon only: it would wait
        # for the time limit and fail as never started.
        taints = ", ".join(code(t) for t in node.others_taints[:3])
        return Refusal(
            f"{code(name)} carries taints that are not meowbot's ({taints}): the test's Job "
            "would not be scheduled there. Take them off first, or test it by hand."
        )
    return None


def time_limit_s(cfg: ValidationConfig) -> int:
    return sum(s.timeout_s for s in cfg.steps) + MARGIN_S


async def validate(
    tester: NodeTester,
    scheduler: Scheduler,
    node: str,
    cfg: ValidationConfig,
    *,
    run_id: str,
    progress: Progress,
    cancelled: Cancelled,
    poll_s: float = 2.0,
    job_id: str | None = None,
) -> Validation:
    """The whole run. `progress` is called whenever a step's state changes; `cancelled`
    (polled) names who cancelled, if anyone did. Errors of the scheduler end the run with the
    node left drained, and say so. `job_id`: a run already started (by a replica that
    stopped), taken up where it is."""
    steps = cfg.steps
    names = [s.name for s in steps]
    run = Validation(node, run_id, outcomes(steps, {}))
    limit = time_limit_s(cfg)
    try:
        run.job_id = job_id or await tester.start(
            node, run_id, batch_script(steps, tester.folder(run_id)), time_limit_s=limit
        )
        await progress(run)
        deadline = time.monotonic() + limit + MARGIN_S
        seen = job_id is not None  # a job just submitted may not be listed yet
        ended_at: float | None = None
        while True:
            await asyncio.sleep(poll_s)
            who = await cancelled()
            if who is not None:
                run.cancelled_by = who
                await tester.cancel(run.job_id)
            state = await tester.job_state(run.job_id)
            seen = seen or state is not None
            late = time.monotonic() > deadline
            if ended_at is None and (late or (seen and (state is None or state in ENDED))):
                ended_at = time.monotonic()
            files = await tester.files(run_id, names)
            # A step's last file can reach meowbot's side of a shared filesystem after the
            # job has ended (NFS caches what a folder holds): read again, for a while.
            now = outcomes(steps, files)
            settled = ended_at is not None and (
                run.cancelled_by is not None
                or all_ended(now)
                or time.monotonic() - ended_at > FILES_GRACE_S
            )
            if settled:  # a step still without its exit code now never finished
                now = outcomes(steps, files, job_ended=True)
            if now != run.steps:
                run.steps = now
                if not settled:
                    await progress(run)
            if settled or all_ended(now):
                break
        failed = verdict(run.steps)
        run.passed = failed is None and run.cancelled_by is None
        run.reason = None if run.passed else _reason(failed, run.cancelled_by)
        await tester.finish(node, run_id, passed=run.passed, reason=run.reason or "")
    except BackendError as exc:
        run.error = exc.user_text()
        run.passed = False
    run.ended = True
    try:
        run.after = (await scheduler.nodes([node])).get(node)
    except BackendError as exc:
        run.error = run.error or exc.user_text()
    return run


def counts_against(run: Validation) -> bool:
    """A run the node itself failed: not cancelled, not stopped by a scheduler's error."""
    return run.ended and not run.passed and run.cancelled_by is None and run.error is None


async def count_failure(
    history: FaultHistory, cfg: RepeatConfig, node: str, at: datetime
) -> str | None:
    """Adds the failure to the node's fault history (where repeat offenders are found); the
    offender's line when the node is now one (`3rd failed validation on the node in 30 days:
    ...`), so that its verdict, everywhere, says RMA."""
    stored = await history.occurrences([node])
    mine = [o for o in stored if o.node == node]
    kept = bounded([*mine, failed_validation(node, at)], at, cfg.keep_days, cfg.max_per_node)
    await history.save({node: kept}, at)
    found = [o for o in offenders(kept, at, cfg) if o.cause == FAILED_VALIDATION]
    return found[0].line(at) if found else None


def _reason(failed: StepOutcome | None, cancelled_by: str | None) -> str:
    if cancelled_by is not None:
        return drain_reason.for_cancelled_validation(cancelled_by)
    assert failed is not None and failed.result is not None
    return drain_reason.for_failed_validation(failed.name, failed.result.reason)
