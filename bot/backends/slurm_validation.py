"""The validation port over Slurm: a maintenance reservation holds the node for the run, the
node is resumed into it (Slurm starts no job on a drained node, a reservation's included),
and the suite runs as a batch job in the reservation. The job writes its step files into a
folder on storage both the node and meowbot see (`validation.output_dir`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from bot.backends.slurm import SlurmRest
from bot.backends.validation_files import read_step_files
from bot.errors import BackendError
from bot.models import JobState
from bot.validation.run import StepFiles

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


NOT_AVAILABLE = "Required node not available"
SUBMIT_WAIT_S = 120.0
SUBMIT_RETRY_S = 1.0
IN_USE = "reservation is in use"
RELEASE_WAIT_S = 120.0


def reservation_name(run_id: str) -> str:
    return f"meowbot-validate-{run_id}"


class SlurmTester:
    name = "Slurm"

    def __init__(self, slurm: SlurmRest, output_dir: str, *, extra_path: str = "") -> None:
        self.slurm = slurm
        self.output_dir = output_dir
        self.extra_path = extra_path  # the site's tools (dcgmi, all_reduce_perf) if not on PATH

    def folder(self, run_id: str) -> str:
        return os.path.join(self.output_dir, run_id)

    async def start(self, node: str, run_id: str, script: str, *, time_limit_s: int) -> str:
        minutes = -(-time_limit_s // 60)
        name = reservation_name(run_id)
        await self.slurm.reserve(name, node, minutes + 5)
        try:
            # Resumed into the reservation first: slurmrestd refuses a job whose only node is
            # drained ("Required node not available"), and the reservation already keeps
            # everyone else's jobs off it.
            await self.slurm.resume(node)
            job_id = await self._submit(script, name, node, minutes)
        except BackendError:
            await self.slurm.drain(node, "meowbot: validation could not start")
            await self.slurm.unreserve(name)
            raise
        return job_id

    async def _submit(self, script: str, reservation: str, node: str, minutes: int) -> str:
        """The job, into the reservation. A node just resumed (or just rebooted) is refused
        until its slurmd answers again ("Required node not available"): asked again for up
        to SUBMIT_WAIT_S."""
        job = {
            "name": f"meowbot-validate-{node}",
            "reservation": reservation,
            "nodes": "1",
            "time_limit": minutes,
            "current_working_directory": "/tmp",
            "standard_output": "/dev/null",
            "standard_error": "/dev/null",
            "environment": {"PATH": f"{self.extra_path}:{PATH}" if self.extra_path else PATH},
        }
        waited = 0.0
        while True:
            try:
                return await self.slurm.submit(script, job)
            except BackendError as exc:
                if NOT_AVAILABLE not in exc.sentence or waited >= SUBMIT_WAIT_S:
                    raise
            await asyncio.sleep(SUBMIT_RETRY_S)
            waited += SUBMIT_RETRY_S

    async def job_state(self, job_id: str) -> JobState | None:
        job = await self.slurm.job(job_id)
        return None if job is None else job.state

    async def files(self, run_id: str, steps: Sequence[str]) -> dict[str, StepFiles]:
        return await read_step_files(self.folder(run_id), steps)

    async def cancel(self, job_id: str) -> None:
        await self.slurm.cancel(job_id)

    async def finish(self, node: str, run_id: str, *, passed: bool, reason: str) -> None:
        # Drained before the hold goes: no job lands on a node that failed in between.
        if not passed:
            await self.slurm.drain(node, reason)
        # A job that has just ended still holds its reservation while it completes (the
        # epilog, a cancelled step's cleanup): Slurm refuses to delete one "in use".
        waited = 0.0
        while True:
            try:
                await self.slurm.unreserve(reservation_name(run_id))
                return
            except BackendError as exc:
                if IN_USE not in exc.sentence or waited >= RELEASE_WAIT_S:
                    raise
            await asyncio.sleep(SUBMIT_RETRY_S)
            waited += SUBMIT_RETRY_S
