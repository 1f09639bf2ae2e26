"""The validation port over Kubernetes: the node, cordoned and tainted by meowbot's drain, is
also tainted `meowbot.io/validating` for the run, and the suite runs as a Job pinned to it
that tolerates those and asks for all its GPUs (bot/backends/kubernetes_validation_spec.py).
On a pass meowbot takes back its taints and its cordon; on a failure they stay, the drain's
reason names the failing step and the node's `meowbot.io/validation` annotation holds the
result. The Job writes its step files into `validation.output_dir`, mounted from the volume
the site names (by default the same path on the node: a shared filesystem)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from bot.backends import kubernetes_nodes as kn
from bot.backends import kubernetes_validation_spec as spec
from bot.backends.kubernetes import NAME, KubernetesScheduler
from bot.backends.validation_files import read_step_files
from bot.errors import BackendError
from bot.models import JobState
from bot.validation.config import KubernetesValidation
from bot.validation.run import StepFiles

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class KubeTester:
    name = "Kubernetes"

    def __init__(
        self,
        kube: KubernetesScheduler,
        output_dir: str,
        cfg: KubernetesValidation | None,
        *,
        extra_path: str = "",
    ) -> None:
        self.kube = kube
        self.output_dir = output_dir
        self.cfg = cfg  # None: nodes are held and released here, their Jobs run elsewhere
        self.extra_path = extra_path

    def folder(self, run_id: str) -> str:
        return os.path.join(self.output_dir, run_id)

    def _jobs(self, namespace: str) -> str:
        return f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs"

    async def has(self, node: str) -> bool:
        return bool(await self.kube.raw_nodes([node]))

    async def hold(self, node: str, run_id: str) -> None:
        await self.kube.patch_node(
            node, lambda raw: spec.hold_patch(raw, run_id), f"taint node {node} for its test"
        )

    async def start(self, node: str, run_id: str, script: str, *, time_limit_s: int) -> str:
        if self.cfg is None:
            raise BackendError(NAME, "has no validation image set (validation.kubernetes.image).")
        found = await self.kube.raw_nodes([node])
        if not found:
            raise BackendError(NAME, f"has no node {node}.")
        await self.hold(node, run_id)
        volume: dict[str, Any] = dict(self.cfg.volume) or {
            "hostPath": {"path": self.output_dir, "type": "Directory"}
        }
        job = spec.job_manifest(
            node=node,
            run_id=run_id,
            script=script,
            image=self.cfg.image,
            gpus=kn.gpu_count(found[0]),
            mount_at=self.output_dir,
            volume=volume,
            path=f"{self.extra_path}:{PATH}" if self.extra_path else PATH,
            time_limit_s=time_limit_s,
        )
        ns = self.cfg.namespace
        try:
            await self.kube.create_object(
                self._jobs(ns), job, f"create the validation Job in namespace {ns}"
            )
        except BackendError:
            await self._release(node, None)
            raise
        return f"{ns}/{spec.job_name(run_id)}"

    def _job_path(self, job_id: str) -> str:
        ns, _, name = job_id.partition("/")
        return f"{self._jobs(ns)}/{quote(name)}"

    async def job_state(self, job_id: str) -> JobState | None:
        job = await self.kube.get_object(self._job_path(job_id), f"read Job {job_id}")
        return None if job is None else spec.job_state(job)

    async def files(self, run_id: str, steps: Sequence[str]) -> dict[str, StepFiles]:
        return await read_step_files(self.folder(run_id), steps)

    async def cancel(self, job_id: str) -> None:
        await self.kube.delete_object(self._job_path(job_id), f"delete Job {job_id}")

    async def _release(self, node: str, result: dict[str, Any] | None) -> None:
        await self.kube.patch_node(
            node,
            lambda raw: spec.release_patch(raw, result),
            f"take the validating taint off node {node}",
        )

    async def finish(self, node: str, run_id: str, *, passed: bool, reason: str) -> None:
        if passed:
            await self._release(node, None)
            await self.kube.resume(node)
            return
        # The drain's reason first: the node is never without meowbot's taint in between.
        await self.kube.drain(node, reason)
        note = spec.result_note(run_id, False, reason, datetime.now(UTC))
        await self._release(node, note)
