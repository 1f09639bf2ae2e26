"""The validation port over Slurm and Kubernetes at once: a node in both is tested once, by a
Slurm job (Slurm on Kubernetes runs its jobs there), held in Kubernetes too for the run, and
put back or left drained in both. A node in one scheduler only is tested by that one."""

from __future__ import annotations

from collections.abc import Sequence

from bot.backends.kubernetes_validation import KubeTester
from bot.backends.slurm_validation import SlurmTester
from bot.errors import BackendError
from bot.models import JobState
from bot.validation.run import StepFiles


class BothTester:
    name = "Slurm and Kubernetes"

    def __init__(self, slurm: SlurmTester, kube: KubeTester) -> None:
        self.slurm = slurm
        self.kube = kube

    def folder(self, run_id: str) -> str:
        return self.slurm.folder(run_id)

    async def _in_slurm(self, node: str) -> bool:
        return node in await self.slurm.slurm.nodes([node])

    async def start(self, node: str, run_id: str, script: str, *, time_limit_s: int) -> str:
        if not await self._in_slurm(node):
            return await self.kube.start(node, run_id, script, time_limit_s=time_limit_s)
        if await self.kube.has(node):
            await self.kube.hold(node, run_id)
        try:
            return await self.slurm.start(node, run_id, script, time_limit_s=time_limit_s)
        except BackendError:
            if await self.kube.has(node):
                await self.kube.finish(node, run_id, passed=False, reason=_NOT_STARTED)
            raise

    def _of(self, job_id: str) -> SlurmTester | KubeTester:
        """Kubernetes' job ids are `namespace/name`, Slurm's a number."""
        return self.kube if "/" in job_id else self.slurm

    async def job_state(self, job_id: str) -> JobState | None:
        return await self._of(job_id).job_state(job_id)

    async def files(self, run_id: str, steps: Sequence[str]) -> dict[str, StepFiles]:
        return await self.slurm.files(run_id, steps)

    async def cancel(self, job_id: str) -> None:
        await self._of(job_id).cancel(job_id)

    async def finish(self, node: str, run_id: str, *, passed: bool, reason: str) -> None:
        if await self._in_slurm(node):
            await self.slurm.finish(node, run_id, passed=passed, reason=reason)
        if await self.kube.has(node):
            await self.kube.finish(node, run_id, passed=passed, reason=reason)


_NOT_STARTED = "meowbot: validation could not start"
