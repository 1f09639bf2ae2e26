"""Slurm and Kubernetes at once: one `Scheduler` over both, for a fleet with two schedulers.

Slurm on Kubernetes (Slinky, Soperator), or one fleet shared by both, has nodes that are a
Slurm node and a Kubernetes node under the same name. Draining one through Slurm alone leaves
Kubernetes scheduling onto it (and the other way round), so here a drain or resume goes to
each scheduler that knows the node, each through its own API, and is logged in one audit
line. A node whose states differ (drained in Slurm, schedulable in Kubernetes) is shown as
such: its reason says what each one says, and it reads as drained, so the Resume button
brings both back in line. A node in one scheduler only is that scheduler's as it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from bot.backends import kubernetes, slurm
from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.slurm import SlurmRest
from bot.errors import BackendError
from bot.models import Job
from bot.ports import SchedulerNode

log = logging.getLogger(__name__)


def _said(node: SchedulerNode) -> str:
    if node.out_of_service:
        word = "down" if node.down else "drained"
        return f"{word} ({node.reason})" if node.reason else word
    return "down" if node.down else "in service"


def merge(name: str, slurm: SchedulerNode, kube: SchedulerNode) -> SchedulerNode:
    """One node as both see it. Agreeing, Slurm's view (with its reason); differing, a node
    out of service whose reason says each side, led by meowbot's reason where it is one of
    them (so a resume of meowbot's own drain is not mistaken for someone else's)."""
    if slurm.out_of_service == kube.out_of_service and slurm.down == kube.down:
        if slurm.reason or not kube.reason:
            return slurm
        return slurm.model_copy(update={"reason": kube.reason})
    ours = next((n.reason for n in (slurm, kube) if n.reason_is_ours), None)
    differs = f"Slurm {_said(slurm)}, Kubernetes {_said(kube)}"
    reason = f"{ours} [differs: {differs}]" if ours else f"differs: {differs}"
    flags = dict.fromkeys([*slurm.flags, *kube.flags])
    if not slurm.draining and not kube.draining and "DRAIN" not in flags:
        flags["DRAIN"] = None
    source = slurm if slurm.out_of_service else kube
    return SchedulerNode(
        name=name,
        state="down" if slurm.down or kube.down else slurm.state,
        flags=tuple(flags),
        reason=reason,
        reason_set_by=source.reason_set_by,
        reason_changed_at=source.reason_changed_at,
        booted_at=slurm.booted_at,
        boot_id=slurm.boot_id or kube.boot_id,
    )


class BothSchedulers:
    """The `Scheduler` port over a Slurm and a Kubernetes cluster that may share nodes."""

    name = "Slurm and Kubernetes"

    def __init__(self, slurm_: SlurmRest, kube: KubernetesScheduler) -> None:
        self.slurm = slurm_
        self.kube = kube

    async def _both(
        self, names: Sequence[str] | None
    ) -> tuple[dict[str, SchedulerNode], dict[str, SchedulerNode]]:
        # A Kubernetes node name may hold what a Slurm name may not, and the other way round:
        # each side is asked only for the names it can take.
        s_names = k_names = names
        if names is not None:
            s_names = [n for n in names if _valid(slurm.check_node_name, n)]
            k_names = [n for n in names if _valid(kubernetes.check_node_name, n)]
        s, k = await asyncio.gather(self.slurm.nodes(s_names), self.kube.nodes(k_names))
        return s, k

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SchedulerNode]:
        s, k = await self._both(names)
        out = dict(k)
        out.update(s)
        for name in s.keys() & k.keys():
            out[name] = merge(name, s[name], k[name])
        return out

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        s, k = await asyncio.gather(self.slurm.jobs(user=user), self.kube.jobs(user=user))
        return [*s, *k]

    def _owner(self, job_id: str) -> SlurmRest | KubernetesScheduler:
        # Slurm's ids are digits; Kubernetes' are namespace/kind/name.
        return self.slurm if job_id.strip().isdigit() else self.kube

    async def job(self, job_id: str) -> Job | None:
        return await self._owner(job_id).job(job_id)

    async def last_finished(self, user: str) -> Job | None:
        s, k = await asyncio.gather(self.slurm.last_finished(user), self.kube.last_finished(user))
        ended = [j for j in (s, k) if j is not None]
        return max(ended, key=lambda j: j.end or j.start, default=None)

    async def previous_run(self, job: Job) -> Job | None:
        return await self._owner(job.job_id).previous_run(job)

    async def sides(self, names: Sequence[str]) -> dict[str, dict[str, SchedulerNode]]:
        """Each scheduler's own view of the named nodes, for an answer naming each outcome."""
        s, k = await self._both(names)
        return {self.slurm.name: s, self.kube.name: k}

    async def _each(
        self, node: str, verb: str, reason: str | None, now: bool, force: bool = False
    ) -> None:
        s, k = await self._both([node])
        known: list[tuple[SlurmRest | KubernetesScheduler, SchedulerNode]] = [
            (t, seen[node]) for t, seen in ((self.slurm, s), (self.kube, k)) if node in seen
        ]
        if not known:
            raise BackendError(self.name, f"know no node {node}.")
        # A resume goes where the node is out of service: the side already in service (put
        # back by hand) has nothing to undo, and Slurm refuses to resume an idle node.
        targets = [t for t, n in known if reason is not None or n.out_of_service]
        if not targets:
            return

        async def one(target: SlurmRest | KubernetesScheduler) -> str | None:
            try:
                if reason is None:
                    await target.resume(node, force=force)
                else:
                    await target.drain(node, reason, now=now)
            except BackendError as exc:
                return exc.user_text()
            return None

        errors = await asyncio.gather(*(one(t) for t in targets))
        done = [t.name for t, e in zip(targets, errors, strict=True) if e is None]
        failed = [e for e in errors if e is not None]
        # The one audit line of the change, whichever schedulers it went to.
        log.info(
            "%s %s in %s%s%s",
            verb,
            node,
            " and ".join(t.name for t in targets),
            f" reason={reason!r}" if reason else "",
            f"; failed: {'; '.join(failed)}" if failed else "",
        )
        if failed:
            head = f"{verb} in {' and '.join(done)}, but " if done else ""
            raise BackendError(self.name, f"{head}{'; '.join(failed)}")

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        await self._each(node, "drained" if not now else "drained now", reason, now)

    async def resume(self, node: str, *, force: bool = False) -> None:
        await self._each(node, "resumed", None, False, force)

    async def close(self) -> None:
        await asyncio.gather(self.slurm.close(), self.kube.close())


def _valid(check: Callable[[str], str], name: str) -> bool:
    try:
        check(name)
    except ValueError:
        return False
    return True
