"""Drain and resume through the scheduler, with owned reasons: the rules, not the buttons.

A drain through a `TellingScheduler` (bot/app.py builds one) tells the owners of the jobs it
hits, and the answer says how many were told (bot/triage/owners.py).

meowbot drains with reasons starting `meowbot:`, never overwrites a reason an operator set,
and resumes only nodes whose reason it set, unless a person confirms (`force`): the answer to a
refused resume says so (`Done.can_force`) and the caller offers a confirmed "Resume anyway".

Every drain and resume reads the node back from the scheduler once it acted (through the port's
`nodes()`, each scheduler's own view where there are several: `Sided`) and answers with what it
reads (bot/triage/readback.py): "Resumed" only when the node is back in service, and an action
that changed nothing says so and records nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from bot import drain_reason
from bot.errors import BackendError
from bot.ports import ResumeMemory, Scheduler, SchedulerNode, Sided
from bot.triage import readback
from bot.triage.owners import TellingScheduler, Told
from bot.triage.targets import NODE_RE

SETTLE_S = 5.0
SETTLE_STEP_S = 0.25


@dataclass(frozen=True)
class Done:
    sentence: str  # what to tell the person, whatever happened
    changed: bool = False  # the node read back differs from before: something was done
    can_force: bool = False  # refused only for want of a person's confirmation
    ok: bool = False  # read back, the aim holds: out by meowbot (drain), in service (resume)


def _unknown(scheduler: Scheduler, node: str) -> str:
    do = "do" if " and " in scheduler.name else "does"
    return f"{scheduler.name} {do} not know `{node}`; nothing was changed."


async def _read(scheduler: Scheduler, node: str) -> dict[str, SchedulerNode]:
    """The node as each scheduler behind `scheduler` sees it (those that know it)."""
    if isinstance(scheduler, Sided):
        seen = await scheduler.sides([node])
        return {where: nodes[node] for where, nodes in seen.items() if node in nodes}
    found = (await scheduler.nodes([node])).get(node)
    return {scheduler.name: found} if found is not None else {}


async def _read_settled(scheduler: Scheduler, node: str) -> dict[str, SchedulerNode]:
    """Read back once the scheduler settled: a node Slurm just resumed reads not responding
    until its daemon answered, so it is read again for up to SETTLE_S."""
    seen = await _read(scheduler, node)
    for _ in range(int(SETTLE_S / SETTLE_STEP_S)):
        if not any(readback.settling(n, w) for w, n in seen.items()):
            break
        await asyncio.sleep(SETTLE_STEP_S)
        seen = await _read(scheduler, node)
    return seen


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
            return Done(_unknown(scheduler, node))
        if current.reason and not current.reason_is_ours:
            return Done(
                f"`{node}` already has a reason set by an operator ({current.reason!r}); "
                "I do not overwrite it; nothing was changed."
            )
        if current.down and current.reason_is_ours:
            return Done(f"`{node}` is already down ({current.reason}); nothing was changed.")
        if current.draining and current.reason_is_ours and not now:
            return Done(f"`{node}` is already draining ({current.reason}); nothing was changed.")
        before = await _read(scheduler, node)
        told: Told | None = None
        failed: BackendError | None = None
        try:
            if isinstance(scheduler, TellingScheduler):
                told = await scheduler.drain_and_tell(node, reason, now=now)
            else:
                await scheduler.drain(node, reason, now=now)
        except BackendError as exc:
            failed = exc  # part of it may have happened (one of two schedulers): read back
        after = await _read(scheduler, node)
    except BackendError as exc:
        return Done(f"I could not drain `{node}`: {exc.user_text()}")
    readings = {w: readback.after_drain(b, after.get(w), w, now=now) for w, b in before.items()}
    changed = any(r.changed for r in readings.values())
    ok = all(r.ok for r in readings.values())
    owners = f" {told.sentence()}" if told is not None else ""
    trouble = failed.user_text() if failed is not None else ""
    sentence = readback.drain_sentence(
        node, readings, reason, now=now, owners=owners, trouble=trouble
    )
    return Done(sentence, changed=changed, ok=ok)


async def resume(
    scheduler: Scheduler | None,
    node: str,
    user_name: str,
    *,
    force: bool = False,
    memory: ResumeMemory | None = None,
) -> Done:
    """Returns `node` to service; a reason meowbot did not set needs `force` (a confirmation).
    A resume read back in service is remembered (`memory`): the Xids it was taken out for are
    history then. One that left the node out of service is not."""
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
            return Done(_unknown(scheduler, node))
        before = await _read(scheduler, node)
        if not current.out_of_service:
            left = [x for w, n in before.items() for x in readback.theirs(n, w)]
            still = f" It {'; '.join(left)}." if left else ""
            return Done(f"`{node}` is not drained; nothing to resume.{still}")
        if current.reason and not current.reason_is_ours and not force:
            return Done(
                f"`{node}` was taken out by someone else ({current.reason!r}); I resume only "
                "nodes I drained, unless you confirm.",
                can_force=True,
            )
        failed: BackendError | None = None
        try:
            await scheduler.resume(node, force=force)
        except BackendError as exc:
            failed = exc
        after = await _read_settled(scheduler, node)
    except BackendError as exc:
        return Done(f"I could not resume `{node}`: {exc.user_text()}")
    readings = {w: readback.after_resume(b, after.get(w), w) for w, b in before.items()}
    changed = any(r.changed for r in readings.values())
    ok = all(r.ok for r in readings.values())
    if changed and ok and memory is not None:
        await memory.record_resume(node, datetime.now(UTC))
    sentence = readback.resume_sentence(node, readings, user_name)
    if failed is not None:
        sentence = f"{sentence} {scheduler.name} said: {failed.user_text()}"
    return Done(sentence, changed=changed, ok=ok)
