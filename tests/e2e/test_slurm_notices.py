"""The owners of real Slurm jobs are told when meowbot drains or sets down their node: three
replicas on real Redis, the real Slurm cluster of scripts/testenv.py (its jobs run as root; the
Slack emulator has a `root` whose email is root@example.org), presses from the /node-health
Drain button and from an alert's Drain (an Xid 79 is critical: the node is set down)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.models import JobState
from bot.ports import Scheduler
from bot.render.alerts import ALERT_DRAIN_ACTION
from bot.render.triage import DRAIN_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_alerts import am_alert, webhook
from tests.e2e.test_triage_commands import press

TOKEN = "e2e-webhook-token"
CHANNEL = "C0ALERTS"
ROOT = "U0ROOT"


def cli(*args: str, check: bool = True) -> str:
    # Munge, not JWT: the slurmds do not take a JWT for job steps.
    env = {
        **{k: v for k, v in os.environ.items() if k != "SLURM_JWT"},
        "SLURM_CONF": need_service("SLURM_CONF"),
    }
    out = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise AssertionError(f"{args}: {out.stderr}")
    return out.stdout


def submit(node: str, *, requeue: bool) -> str:
    out = cli(
        "sbatch",
        "--parsable",
        "-N",
        "1",
        "-w",
        node,
        "-J",
        "notice-llm",
        "-o",
        "/dev/null",
        "--chdir",
        "/",
        "--requeue" if requeue else "--no-requeue",
        "--wrap",
        "sleep 300",
    )
    job_id = out.strip().split(";")[0]
    assert job_id.isdigit(), out
    return job_id


async def wait_running(scheduler: Scheduler, job_id: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = await scheduler.job(job_id)
        if job is not None and job.state is JobState.RUNNING:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} did not start in {timeout_s} s")


@pytest.fixture
def nodes_back() -> Iterator[list[str]]:
    """Nodes the test took out, returned to service after it (and its jobs cancelled)."""
    taken: list[str] = []
    yield taken
    cli("scancel", "-n", "notice-llm", check=False)
    for node in taken:
        cli("scontrol", "update", f"nodename={node}", "state=resume", check=False)


@pytest.fixture
async def three(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[list[Slack]]:
    emulator.add_user(ROOT, "root", email="root@example.org", real_name="Root")
    emulator.add_channel(CHANNEL, "gpu-alerts")
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())
        out: list[Slack] = []
        for _ in range(3):
            settings = bot_settings(
                emulator,
                redis_url,
                SLURM_REST_URL=need_service("SLURM_REST_URL"),
                SLURM_JWT=need_service("SLURM_JWT"),
                SLURM_USER=os.environ.get("SLURM_USER", "root"),
                MEOWBOT_ADMINS="U0ADMIN",
                ALERTMANAGER_WEBHOOK_TOKEN=TOKEN,
                MEOWBOT_ALERT_CHANNEL=CHANNEL,
                ALERTMANAGER_URL=None,
            )
            bot = await create_bot(settings)
            stack.push_async_callback(bot.close)
            port = await bot.start_http("127.0.0.1", 0)
            bot.start_background(sweep=False)
            out.append(Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http))
        yield out


def root_dms(emu: SlackEmulator) -> list[dict[str, Any]]:
    return emu.messages("D0ROOT") if "D0ROOT" in emu.workspace.channels else []


async def test_a_drain_on_three_replicas_tells_the_slurm_jobs_owner_once(
    three: list[Slack], emulator: SlackEmulator, nodes_back: list[str]
) -> None:
    node = "gpu-0012"
    scheduler = three[0].bot.deps.triage.scheduler
    assert scheduler is not None
    job_id = submit(node, requeue=True)
    nodes_back.append(node)
    await wait_running(scheduler, job_id)
    listed = await scheduler.job(job_id)
    assert listed is not None and listed.requeue is True  # Slurm's flag, as the adapter reads it

    payload = press(emulator, DRAIN_ACTION, f"{node}|meowbot: xid79 gpu3", "U0ADMIN")
    await asyncio.gather(*(s.interactive(payload) for s in three))
    await emulator.wait_for_responses(3, timeout=20)
    answers = [r[1]["text"] for r in emulator.responses]
    assert sum("1 job owner was told by DM." in a for a in answers) == 1, answers
    [dm] = root_dms(emulator)
    assert validate_blocks(dm["blocks"]) == []
    body = dm["blocks"][0]["text"]["text"]
    assert f"`{job_id}` (notice-llm)" in body and f"`{node}`" in body
    assert "Xid 79 (GPU has fallen off the bus)" in body
    assert "keeps running to its end" in body
    job = await scheduler.job(job_id)  # a drain lets it finish: still running, on the node
    assert job is not None and job.state is JobState.RUNNING and node in job.nodes


async def test_drain_now_from_an_alert_says_the_job_is_stopped_as_slurm_will_treat_it(
    three: list[Slack], emulator: SlackEmulator, nodes_back: list[str]
) -> None:
    node = "gpu-0013"
    scheduler = three[0].bot.deps.triage.scheduler
    assert scheduler is not None
    job_id = submit(node, requeue=False)
    nodes_back.append(node)
    await wait_running(scheduler, job_id)
    job = await scheduler.job(job_id)
    assert job is not None and job.requeue is False  # what Slurm says of the job

    url = three[0].url.removesuffix(SLACK_EVENTS_PATH) + ALERTMANAGER_PATH
    alert = webhook([am_alert(node, "GpuXid79", severity="critical")])
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with three[0].http.post(url, data=json.dumps(alert), headers=headers) as resp:
        assert resp.status == 200
    await emulator.wait_for_call("chat.postMessage", timeout=15)
    [msg] = [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") in (None, m["ts"])]

    drain = emulator.block_actions_payload(CHANNEL, msg["ts"], ALERT_DRAIN_ACTION)
    await asyncio.gather(*(s.interactive(drain) for s in three))
    await emulator.wait_for_responses(3, timeout=20)
    answers = [r[1]["text"] for r in emulator.responses]
    assert sum("1 job owner was told by DM." in a for a in answers) == 1, answers
    assert any("running jobs are stopped" in a for a in answers), answers
    [dm] = root_dms(emulator)
    body = dm["blocks"][0]["text"]["text"]
    assert f"`{job_id}`" in body and "set down" in body
    assert "stopped and not requeued" in body, body
    # And so Slurm did: the job ended, not requeued (the slurmd answering, ReturnToService=2
    # soon brings the node itself back, so the job is what shows it).
    for _ in range(100):
        job = await scheduler.job(job_id)
        if job is not None and job.state not in {JobState.RUNNING, JobState.PENDING}:
            break
        await asyncio.sleep(0.2)
    assert job is not None and job.state not in {JobState.RUNNING, JobState.PENDING}, job


async def test_an_event_on_the_nodes_of_one_slurm_job_says_the_job_is_shared(
    three: list[Slack], emulator: SlackEmulator, nodes_back: list[str]
) -> None:
    nodes = ["gpu-0009", "gpu-0010", "gpu-0011"]
    scheduler = three[0].bot.deps.triage.scheduler
    assert scheduler is not None
    out = cli(
        "sbatch",
        "--parsable",
        "-N",
        "3",
        "-w",
        ",".join(nodes),
        "-J",
        "notice-llm",
        "-o",
        "/dev/null",
        "--chdir",
        "/",
        "--wrap",
        "sleep 300",
    )
    job_id = out.strip().split(";")[0]
    await wait_running(scheduler, job_id)

    # Xid 48 (a warning: nothing is drained); no job label: the job is Slurm's word.
    url = three[0].url.removesuffix(SLACK_EVENTS_PATH) + ALERTMANAGER_PATH
    alert = webhook([am_alert(n, "GpuXid48", xid="48") for n in nodes])
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with three[0].http.post(url, data=json.dumps(alert), headers=headers) as resp:
        assert resp.status == 200
    await emulator.wait_for_call("chat.postMessage", timeout=15)
    [msg] = [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") in (None, m["ts"])]
    text = json.dumps(msg["blocks"])
    assert "gpu-[0009-0011]" in text and f"job `{job_id}`" in text, text
