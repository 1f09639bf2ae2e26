"""Test and resume on the real test Slurm: what meowbot adds between the press and the node
back in service, beyond the suite's own run time, and the Slack calls one validation costs.
Run by hand, under the test services:

    MEOWBOT_TEST_SERVICES=redis,slurm python scripts/testenv.py -- python bench/validation.py

Side by side, on the same node and a suite of two steps that do nothing (`true`), so the
suite's own time is ~0 and what is measured is the machinery:

- bare: the same Slurm calls made directly (scontrol reservation, resume, job submit over
  slurmrestd, the job's state polled every 0.2 s, the reservation deleted): the ceiling;
- meowbot: `/node-health <node> test` signed into the bot's HTTP server, until its message
  says the node is back in service and Slurm shows it idle with no reservation, at the
  default poll of the job (2 s) and at 0.2 s.
"""

from __future__ import annotations

import asyncio
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
from bot.backends.slurm import SlurmRest
from bot.backends.slurm_validation import SlurmTester
from bot.config import load_settings
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from bot.validation.config import StepConfig
from bot.validation.run import batch_script
from bot.validation.service import ENDED
from tests.e2e.conftest import SIGNING_SECRET, Slack

NODE = "gpu-0014"
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


async def with_bot(poll_s: float, folder: Path) -> tuple[float, int]:
    emu = SlackEmulator()
    await emu.start()
    emu.add_channel(CHANNEL, "gpu-ops")
    config = folder / "meowbot.json"
    steps = [s.model_dump(exclude_defaults=True) | {"timeout_s": s.timeout_s} for s in STEPS]
    config.write_text(json.dumps({"validation": {"steps": steps, "output_dir": str(folder)}}))
    settings = load_settings(
        SLACK_BOT_TOKEN=emu.bot_token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=emu.api_url,
        REDIS_URL=_env("REDIS_URL"),
        MEOWBOT_ADMINS="U0ADMIN",
        MEOWBOT_CONFIG=str(config),
        PROMETHEUS_URL=None,
        KUBECONFIG=None,
    )
    bot = await create_bot(settings)
    assert bot.deps.validation is not None
    bot.deps.validation.poll_s = poll_s
    port = await bot.start_http("127.0.0.1", 0)
    _drain()
    try:
        async with aiohttp.ClientSession() as http:
            slack = Slack(emu, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
            before = len(emu.calls)
            t0 = time.perf_counter()
            status, _, _ = await slack.command("/node-health", f"{NODE} test", channel=CHANNEL)
            assert status == 200
            while not (
                any("back in service" in m["text"] for m in emu.workspace.messages(CHANNEL))
                and _back()
            ):
                await asyncio.sleep(0.05)
            took = time.perf_counter() - t0
            await asyncio.sleep(0.5)  # the thread reply to the asker
            calls = [c for c in emu.calls[before:] if c.method.startswith("chat.")]
            return took, len(calls)
    finally:
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
    await slurm.close()
    ceiling = statistics.median(rows["bare Slurm calls"])
    print(f"press -> node back in service, suite of 2 no-op steps, {RUNS} runs, node {NODE}")
    for name, xs in rows.items():
        med = statistics.median(xs)
        print(
            f"  {name:22s} median {med:5.2f} s  max {max(xs):5.2f} s  x{med / ceiling:4.1f} of bare"
        )
    print(f"  Slack chat.* calls per validation: {statistics.median(calls):.0f} (max {max(calls)})")


if __name__ == "__main__":
    asyncio.run(main())
