"""Drain and resume through the scheduler, with owned reasons: the rules, not the buttons.

A drain through a `TellingScheduler` (bot/app.py builds one) tells the owners of the jobs it
hits, and the answer says how many were told (bot/triage/owners.py).

meowbot drains with reasons starting `meowbot:`, never overwrites a reason an operator set,
and resumes only nodes whose reason it set, unless a person confirms (`force`): the answer to a
refused resume says so (`Done.can_force`) and the caller offers a confirmed "Resume anyway".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from bot import drain_reason
from bot.errors import BackendError
from bot.ports import ResumeMemory, Scheduler
from bot.triage.owners import TellingScheduler, Told
from bot.triage.targets import NODE_RE


@dataclass(frozen=True)
class Done:
    sentence: str  # what to tell the person, whatever happened
    changed: bool = False  # the scheduler was told to drain or resume
    can_force: bool = False  # refused only for want of a person's confirmation


async def drain(
    scheduler: Scheduler | None, node: str, cause: str, user_name: str, *, now: bool = False
) -> Done:
    """Drains `node` with the reason `meowbot: <cause> by @<user>`; `now` stops its jobs too."""
    if scheduler is None:
        return Done(
            "No scheduler is configured (set SLURM_REST_URL or KUBECONFIG), so I cannot drain "
            "anything."
        )
    if not NODE_RE.fullmatch(node):
        return Done("That button carries no valid node name; nothing was changed.")
    reason = drain_reason.by_user(cause, user_name)
    try:
        current = (await scheduler.nodes([node])).get(node)
        if current is None:
            return Done(f"{scheduler.name} does not know `{node}`; nothing was changed.")
        if current.reason and not current.reason_is_ours:
            return Done(
                f"`{node}` already has a reason set by an operator ({current.reason!r}); "
                "I do not overwrite it."
            )
        if current.down and current.reason_is_ours:
            return Done(f"`{node}` is already down ({current.reason}).")
        if current.draining and current.reason_is_ours and not now:
            return Done(f"`{node}` is already draining ({current.reason}).")
        told: Told | None = None
        if isinstance(scheduler, TellingScheduler):
            told = await scheduler.drain_and_tell(node, reason, now=now)
        else:
            await scheduler.drain(node, reason, now=now)
    except BackendError as exc:
        return Done(f"I could not drain `{node}`: {exc.user_text()}")
    owners = f" {told.sentence()}" if told is not None else ""
    if now:
        return Done(
            f"Set `{node}` down in {scheduler.name} with reason `{reason}`: its running jobs "
            f"are stopped (and requeued where they allow it).{owners}",
            changed=True,
        )
    return Done(
        f"Draining `{node}` in {scheduler.name} with reason `{reason}`: running jobs finish, "
        f"no new ones start.{owners}",
        changed=True,
    )


async def resume(
    scheduler: Scheduler | None,
    node: str,
    user_name: str,
    *,
    force: bool = False,
    memory: ResumeMemory | None = None,
) -> Done:
    """Returns `node` to service; a reason meowbot did not set needs `force` (a confirmation).
    The resume is remembered (`memory`): the Xids it was taken out for are history then."""
    if scheduler is None:
        return Done(
            "No scheduler is configured (set SLURM_REST_URL or KUBECONFIG), so I cannot resume "
            "anything."
        )
    if not NODE_RE.fullmatch(node):
        return Done("That button carries no valid node name; nothing was changed.")
    try:
        current = (await scheduler.nodes([node])).get(node)
        if current is None:
            return Done(f"{scheduler.name} does not know `{node}`; nothing was changed.")
        if not current.out_of_service:
            return Done(f"`{node}` is not drained; nothing to resume.")
        if current.reason and not current.reason_is_ours and not force:
            return Done(
                f"`{node}` was taken out by someone else ({current.reason!r}); I resume only "
                "nodes I drained, unless you confirm.",
                can_force=True,
            )
        await scheduler.resume(node)
    except BackendError as exc:
        return Done(f"I could not resume `{node}`: {exc.user_text()}")
    if memory is not None:
        await memory.record_resume(node, datetime.now(UTC))
    return Done(f"Resumed `{node}` in {scheduler.name} (by @{user_name}).", changed=True)
