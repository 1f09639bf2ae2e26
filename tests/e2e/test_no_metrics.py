"""A real scheduler and no metrics source: the bot answers from the scheduler, never from the
simulated fleet. On the real Slurm (16 nodes, gpu-0001..gpu-0016) and the real kube-apiserver
of scripts/testenv.py, with no PROMETHEUS_URL: a real node is known and its health "not
checked", a node the scheduler does not have is unknown, /hw-faults says it cannot see faults,
the sweep posts nothing, /healthz names the sources, and MEOWBOT_FLEET beside a scheduler
refuses to start with one sentence."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.render.triage import DRAIN_ACTION, RESUME_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_process import clean_env, meowbot
from tests.kube_api import KubeApi, wait_ready

CHANNEL = "C0ALERTS"
KUBE_NODE = "nometrics-k01"  # a Node of this test's own on the shared kube-apiserver


async def _bot(emulator: SlackEmulator, redis_url: str, **backends: Any) -> AsyncIterator[Slack]:
    emulator.add_channel(CHANNEL, "gpu-alerts")
    settings = bot_settings(
        emulator,
        redis_url,
        MEOWBOT_ADMINS="U0ADMIN",
        MEOWBOT_ALERT_CHANNEL=CHANNEL,
        MEOWBOT_SWEEP_INTERVAL="5",
        **backends,
    )
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


def _slurm_env() -> dict[str, str]:
    return {
        "SLURM_REST_URL": need_service("SLURM_REST_URL"),
        "SLURM_JWT": need_service("SLURM_JWT"),
        "SLURM_USER": os.environ.get("SLURM_USER", "root"),
    }


@pytest.fixture
async def slurm_only(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[Slack]:
    async for slack in _bot(emulator, redis_url, **_slurm_env()):
        yield slack


@pytest.fixture
async def kube_only(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[Slack]:
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    KubeApi.from_env().node(KUBE_NODE, rack="r09")
    async for slack in _bot(
        emulator, redis_url, KUBECONFIG=need_service("MEOWBOT_TEST_KUBECONFIG")
    ):
        yield slack


async def _answer(slack: Slack, command: str, text: str) -> dict[str, Any]:
    emu = slack.emulator
    before = len(emu.responses)
    status, _, _ = await slack.command(command, text)
    assert status == 200
    await emu.wait_for_responses(before + 1, timeout=20)
    answer = emu.responses[-1][1]
    assert validate_blocks(answer.get("blocks") or []) == []
    return answer


async def _healthz(slack: Slack) -> dict[str, Any]:
    url = slack.url.removesuffix(SLACK_EVENTS_PATH) + "/healthz"
    async with slack.http.get(url) as resp:
        assert resp.status == 200
        body: dict[str, Any] = await resp.json()
        return body


def _scontrol(*args: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if k != "SLURM_JWT"},
        "SLURM_CONF": need_service("SLURM_CONF"),
    }
    out = subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, check=False)
    return out.stdout


async def test_slurm_without_metrics_answers_from_slurm_and_never_the_simulator(
    slurm_only: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    slack = slurm_only
    health = await _healthz(slack)
    backends = health["backends"]
    assert backends["metrics"] == "none" and backends["scheduler"] == "slurm", backends
    assert "fleet" not in backends  # nothing simulated to name

    # A real node: known, its Slurm state shown, its health not checked and why.
    real = await _answer(slack, "/node-health", "gpu-0003")
    text = json.dumps(real["blocks"])
    assert real["text"] == "gpu-0003: health not checked", real["text"]
    assert "no metrics source: set PROMETHEUS_URL" in text
    assert "*Slurm*" in text and "healthy" not in text.lower()
    # A node Slurm does not have (the simulator's gpu-0400): unknown, said by whom.
    fake = await _answer(slack, "/node-health", "gpu-0400")
    assert "Slurm does not know a node `gpu-0400`" in fake["text"], fake["text"]
    # A hostlist: the nodes by Slurm state, the ones Slurm lacks left out.
    listed = await _answer(slack, "/node-health", "gpu-[0001-0020]")
    assert "20 nodes: health not checked" in listed["text"], listed["text"]
    assert "gpu-[0017-0020]" in json.dumps(listed["blocks"])
    # Faults cannot be seen without metrics: said, not "no faults" nor the simulator's.
    faults = await _answer(slack, "/hw-faults", "")
    assert "I cannot see hardware faults here: no metrics source" in faults["text"]
    assert "No faults found" not in json.dumps(faults)
    why = await _answer(slack, "/hw-faults", "why xid")
    assert "Set PROMETHEUS_URL" in why["text"], why["text"]
    regressions = await _answer(slack, "/regressions", "")
    assert "Set PROMETHEUS_URL" in regressions["text"], regressions["text"]

    # App Home: the nodes by Slurm state, health not checked, the sources named.
    event = {"type": "app_home_opened", "user": "U0ADMIN", "channel": "D0A", "tab": "home"}
    await slack.event(slack.emulator.event_payload(event))
    call = await slack.emulator.wait_for_call("views.publish", timeout=15)
    home = json.dumps(call.args["view"])
    assert "nodes in Slurm: idle" in home and "Health not checked: no metrics source" in home
    assert "*metrics*\\nnone" in home and "*scheduler*\\nslurm" in home, home
    assert "simulated" not in home

    # The sweep has nothing to read: it does not run, says so once, and posts nothing.
    alerting = slack.bot.deps.alerting
    assert alerting is not None and not alerting.can_sweep
    assert await alerting.sweep_once() is None
    with caplog.at_level(logging.WARNING, logger="bot.alerts.runtime"):
        slack.bot.start_background(digest=False)
        await asyncio.sleep(0.5)
    assert any("the passive sweep is off" in r.getMessage() for r in caplog.records)
    assert slack.emulator.messages(CHANNEL) == []


async def test_slurm_without_metrics_drains_and_resumes_on_slurms_state(
    slurm_only: Slack,
) -> None:
    slack, emu, node = slurm_only, slurm_only.emulator, "gpu-0005"
    try:
        await _answer(slack, "/node-health", node)
        await slack.interactive(emu.ephemeral_actions_payload(0, DRAIN_ACTION, user="U0ADMIN"))
        await emu.wait_for_responses(2, timeout=20)
        drained = emu.responses[-1][1]
        assert f"Draining `{node}` in Slurm" in drained["text"], drained["text"]
        assert "Reason=meowbot: by hand, health not checked by @ana" in _scontrol(
            "show", "node", node
        )
        # Redrawn as Slurm now has it: drained, Resume offered, health still not checked.
        shown = json.dumps(drained["blocks"])
        assert "DRAIN" in shown and RESUME_ACTION in shown and "health not checked" in shown
        again = await _answer(slack, "/node-health", node)
        await slack.interactive(
            emu.ephemeral_actions_payload(len(emu.responses) - 1, RESUME_ACTION, user="U0ADMIN")
        )
        await emu.wait_for_responses(4, timeout=20)
        assert "Resumed" in emu.responses[-1][1]["text"], emu.responses[-1][1]["text"]
        assert "DRAIN" in json.dumps(again["blocks"])
        assert "meowbot" not in _scontrol("show", "node", node)
    finally:
        _scontrol("update", f"nodename={node}", "state=resume")


async def test_slurm_without_metrics_shows_a_nodes_jobs_and_cannot_say_why_one_is_slow(
    slurm_only: Slack,
) -> None:
    slack, node = slurm_only, "gpu-0007"
    env = {
        **{k: v for k, v in os.environ.items() if k != "SLURM_JWT"},
        "SLURM_CONF": need_service("SLURM_CONF"),
    }
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-N",
            "1",
            "-w",
            node,
            "-J",
            "nometrics-job",
            "-o",
            "/dev/null",
            "--chdir",
            "/",
            "--wrap",
            "sleep 120",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    job_id = out.strip().split(";")[0]
    scheduler = slack.bot.deps.triage.scheduler
    assert scheduler is not None
    try:
        for _ in range(100):  # until Slurm runs it
            job = await scheduler.job(job_id)
            if job is not None and job.state.value == "running":
                break
            await asyncio.sleep(0.2)
        shown = await _answer(slack, "/node-health", node)
        assert f"`{job_id}` nometrics-job (root, running)" in json.dumps(shown["blocks"])
        slow = await _answer(slack, "/job-slow", job_id)
        assert slow["text"].startswith(
            f"Job {job_id} (nometrics-job) runs on 1 node, but I cannot "
            "tell why it is slow: no metrics source"
        ), slow["text"]
        # Said privately before anything is posted: no "looking at…" left in the channel.
        assert slack.emulator.calls_to("chat.postMessage") == []
    finally:
        subprocess.run(["scancel", job_id], env=env, check=False)


async def test_kubernetes_without_metrics_knows_its_nodes_only(kube_only: Slack) -> None:
    slack = kube_only
    backends = (await _healthz(slack))["backends"]
    assert backends["metrics"] == "none" and backends["scheduler"] == "kubernetes", backends
    assert "fleet" not in backends

    real = await _answer(slack, "/node-health", KUBE_NODE)
    text = json.dumps(real["blocks"])
    assert real["text"] == f"{KUBE_NODE}: health not checked", real["text"]
    assert "*Kubernetes*" in text and "no metrics source: set PROMETHEUS_URL" in text
    assert "rack r09" in text  # placed by its Node label, as with metrics
    fake = await _answer(slack, "/node-health", "gpu-0001")  # the simulator's first node
    assert "Kubernetes does not know a node `gpu-0001`" in fake["text"], fake["text"]
    faults = await _answer(slack, "/hw-faults", "")
    assert "I cannot see hardware faults here: no metrics source" in faults["text"]
    jobs = await _answer(slack, "/job-slow", "default/job/nope")
    assert "Kubernetes knows no job" in jobs["text"], jobs["text"]


async def test_the_simulated_fleet_beside_slurm_refuses_to_start() -> None:
    env = {**clean_env(), "SLURM_REST_URL": need_service("SLURM_REST_URL"), "MEOWBOT_FLEET": "sim"}
    proc = await meowbot("run", env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert lines == [
        "meowbot: MEOWBOT_FLEET runs the simulated fleet only when no cluster is configured, "
        "and SLURM_REST_URL is set: unset MEOWBOT_FLEET to use the cluster (the simulator "
        "never stands in beside it)."
    ], lines
