"""Test and resume on the real test Slurm and kube-apiserver: what meowbot adds between the
press and the node back in service, beyond the suite's own run time, and the Slack calls one
validation costs. Run by hand, under the test services:

    MEOWBOT_TEST_SERVICES=redis,slurm,kube python scripts/testenv.py -- python bench/validation.py

Side by side, on the same node and a suite of two steps that do nothing (`true`), so the
suite's own time is ~0 and what is measured is the machinery:

- bare: the same Slurm calls made directly (scontrol reservation, resume, job submit over
  slurmrestd, the job's state polled every 0.2 s, the reservation deleted): the ceiling;
- meowbot: `/node-health <node> test` signed into the bot's HTTP server, until its message
  says the node is back in service and Slurm shows it idle with no reservation, at the
  default poll of the job (2 s) and at 0.2 s.

On Kubernetes the same two paths (the validating taint, the Job, its status polled, the taints
and cordon taken back), with tests/kube_kubelet.py standing in for the kubelet and the Job
controller that the test API server lacks: it runs the Job's script here and writes its status
in both paths alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import create_bot
from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.kubernetes_validation import KubeTester
from bot.backends.kubernetes_validation_spec import job_name
from bot.backends.slurm import SlurmRest
from bot.backends.slurm_validation import SlurmTester
from bot.config import load_settings
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from bot.validation.config import KubernetesValidation, StepConfig
from bot.validation.run import batch_script
from bot.validation.service import ENDED
from tests.e2e.conftest import SIGNING_SECRET, Slack
from tests.kube_api import KubeApi, KubeError, wait_ready
from tests.kube_kubelet import run_job

NODE = "gpu-0014"
KUBE_NODE = "kv-bench"
NS = "meowbot"
IMAGE = KubernetesValidation(image="site/validate:1", namespace=NS)
RUNS = 5
CHANNEL = "C0OPS"
STEPS = (
    StepConfig(name="one", command=("true",), timeout_s=30),
    StepConfig(name="two", command=("true",), timeout_s=30),
)


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run under scripts/testenv.py with slurm and redis")
    return value


def _scontrol(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True).stdout


def _drain() -> None:
    _scontrol("update", f"nodename={NODE}", "state=drain", "reason=meowbot: bench")


def _back() -> bool:
    shown = _scontrol("show", "node", NODE)
    return "State=IDLE " in shown and "meowbot-validate" not in _scontrol("show", "reservation")


async def bare(slurm: SlurmRest, folder: Path) -> float:
    _drain()
    tester = SlurmTester(slurm, str(folder))
    run_id = f"bare{time.monotonic_ns()}"
    t0 = time.perf_counter()
    job = await tester.start(
        NODE, run_id, batch_script(STEPS, tester.folder(run_id)), time_limit_s=120
    )
    while (state := await tester.job_state(job)) is not None and state not in ENDED:
        await asyncio.sleep(0.2)
    await tester.finish(NODE, run_id, passed=True, reason="")
    return time.perf_counter() - t0


class Kube:
    """The Kubernetes side: the admin client that drains the node and plays the kubelet."""

    def __init__(self) -> None:
        wait_ready(_env("MEOWBOT_TEST_KUBE_STATUS"))
        self.api = KubeApi.from_env()
        with contextlib.suppress(KubeError):
            self.api.namespace(NS)
        self.api.delete(f"/api/v1/nodes/{KUBE_NODE}")
        self.api.node(KUBE_NODE)
        self.adapter = KubernetesScheduler(kubeconfig=_env("MEOWBOT_TEST_KUBECONFIG"))

    async def drain(self) -> None:
        await self.adapter.drain(KUBE_NODE, "meowbot: bench")

    async def back(self) -> bool:
        raw = self.api.get(f"/api/v1/nodes/{KUBE_NODE}")
        taints = [t for t in raw["spec"].get("taints") or [] if t["key"].startswith("meowbot")]
        return not raw["spec"].get("unschedulable") and not taints

    def kubelet(self) -> asyncio.Task[int | None]:
        """Runs the next Job of the node as a kubelet would (its name has the second)."""

        async def next_job() -> int | None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                jobs = self.api.get(f"/apis/batch/v1/namespaces/{NS}/jobs")["items"]
                fresh = [
                    j["metadata"]["name"]
                    for j in jobs
                    if KUBE_NODE in j["metadata"]["name"] and not j.get("status")
                ]
                if fresh:
                    return await run_job(self.api, NS, fresh[0])
                await asyncio.sleep(0.02)
            return None

        return asyncio.create_task(next_job())


async def bare_kube(kube: Kube, folder: Path) -> float:
    await kube.drain()
    tester = KubeTester(kube.adapter, str(folder), IMAGE)
    run_id = f"{KUBE_NODE}-{time.time_ns()}"
    kubelet = asyncio.create_task(run_job(kube.api, NS, job_name(run_id)))
    t0 = time.perf_counter()
    job = await tester.start(
        KUBE_NODE, run_id, batch_script(STEPS, tester.folder(run_id)), time_limit_s=120
    )
    while (state := await tester.job_state(job)) is not None and state not in ENDED:
        await asyncio.sleep(0.2)
    await tester.finish(KUBE_NODE, run_id, passed=True, reason="")
    took = time.perf_counter() - t0
    await kubelet
    return took


async def with_bot(poll_s: float, folder: Path, kube: Kube | None = None) -> tuple[float, int]:
    emu = SlackEmulator()
    await emu.start()
    emu.add_channel(CHANNEL, "gpu-ops")
    config = folder / "meowbot.json"
    steps = [s.model_dump(exclude_defaults=True) | {"timeout_s": s.timeout_s} for s in STEPS]
    validation: dict[str, object] = {"steps": steps, "output_dir": str(folder)}
    if kube is not None:
        validation["kubernetes"] = IMAGE.model_dump()
    config.write_text(json.dumps({"validation": validation}))
    node = NODE if kube is None else KUBE_NODE
    settings = load_settings(
        SLACK_BOT_TOKEN=emu.bot_token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=emu.api_url,
        REDIS_URL=_env("REDIS_URL"),
        MEOWBOT_ADMINS="U0ADMIN",
        MEOWBOT_CONFIG=str(config),
        PROMETHEUS_URL=None,
        KUBECONFIG=None if kube is None else _env("MEOWBOT_TEST_KUBECONFIG"),
        SLURM_REST_URL=_env("SLURM_REST_URL") if kube is None else None,
    )
    bot = await create_bot(settings)
    assert bot.deps.validation is not None
    bot.deps.validation.poll_s = poll_s
    port = await bot.start_http("127.0.0.1", 0)
    if kube is None:
        _drain()
    else:
        await kube.drain()
    kubelet = kube.kubelet() if kube is not None else None
    try:
        async with aiohttp.ClientSession() as http:
            slack = Slack(emu, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
            before = len(emu.calls)
            t0 = time.perf_counter()
            status, _, _ = await slack.command("/node-health", f"{node} test", channel=CHANNEL)
            assert status == 200
            while not (
                any("back in service" in m["text"] for m in emu.workspace.messages(CHANNEL))
                and (_back() if kube is None else await kube.back())
            ):
                await asyncio.sleep(0.05)
            took = time.perf_counter() - t0
            await asyncio.sleep(0.5)  # the thread reply to the asker
            calls = [c for c in emu.calls[before:] if c.method.startswith("chat.")]
            return took, len(calls)
    finally:
        if kubelet is not None:
            await kubelet
        await bot.close()
        await emu.stop()


async def main() -> None:
    slurm = SlurmRest(
        _env("SLURM_REST_URL"), token=_env("SLURM_JWT"), user=_env("SLURM_USER"), timeout_s=10
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        await bare(slurm, folder)  # warm: slurmrestd's spec, the node's first job
        rows: dict[str, list[float]] = {
            "bare Slurm calls": [],
            "meowbot, poll 2 s": [],
            "meowbot, poll 0.2 s": [],
        }
        calls: list[int] = []
        for _ in range(RUNS):
            rows["bare Slurm calls"].append(await bare(slurm, folder))
            took, n = await with_bot(2.0, folder)
            rows["meowbot, poll 2 s"].append(took)
            calls.append(n)
            took, _ = await with_bot(0.2, folder)
            rows["meowbot, poll 0.2 s"].append(took)
        kube = Kube()
        await bare_kube(kube, folder)  # warm
        krows: dict[str, list[float]] = {
            "bare Kubernetes calls": [],
            "meowbot, poll 2 s": [],
            "meowbot, poll 0.2 s": [],
        }
        kcalls: list[int] = []
        for _ in range(RUNS):
            krows["bare Kubernetes calls"].append(await bare_kube(kube, folder))
            took, n = await with_bot(2.0, folder, kube)
            krows["meowbot, poll 2 s"].append(took)
            kcalls.append(n)
            took, _ = await with_bot(0.2, folder, kube)
            krows["meowbot, poll 0.2 s"].append(took)
        await kube.adapter.close()
    await slurm.close()
    _table(f"Slurm, node {NODE}", rows, calls)
    _table(f"Kubernetes, node {KUBE_NODE}", krows, kcalls)


def _table(title: str, rows: dict[str, list[float]], calls: list[int]) -> None:
    ceiling = statistics.median(next(iter(rows.values())))
    print(f"{title}: press -> node back in service, suite of 2 no-op steps, {RUNS} runs")
    for name, xs in rows.items():
        med = statistics.median(xs)
        print(
            f"  {name:22s} median {med:5.2f} s  max {max(xs):5.2f} s  x{med / ceiling:4.1f} of bare"
        )
    print(f"  Slack chat.* calls per validation: {statistics.median(calls):.0f} (max {max(calls)})")


if __name__ == "__main__":
    asyncio.run(main())
