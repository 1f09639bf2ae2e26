"""Testing a drained Kubernetes node from Slack, on the real test kube-apiserver: `/node-health
<node> test`, one message that follows the Job, and the node read back from Kubernetes at the
end. tests/kube_kubelet.py plays the kubelet and the Job controller the test server lacks."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.backends import kubernetes_validation_spec as spec
from bot.render.triage import RESUME_ACTION
from bot.render.validation import TEST_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.kube_api import KubeApi, KubeError, wait_ready
from tests.kube_kubelet import run_job
from tests.waiting import eventually

CHANNEL = "C0OPS"
NODE = "kv-e2e"
NS = "meowbot"
DATA = Path(__file__).resolve().parents[1] / "data" / "validation"


@pytest.fixture
async def ops(
    emulator: SlackEmulator, redis_url: str, redis_client: Any, tmp_path: Path
) -> AsyncIterator[tuple[Slack, KubeApi]]:
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    api = KubeApi.from_env()
    with contextlib.suppress(KubeError):
        api.namespace(NS)
    api.delete(f"/api/v1/nodes/{NODE}")
    api.node(NODE, gpus=8, product="NVIDIA-H200")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, data in (
        ("dcgmi", "dcgm_r2_v3_pass.json"),
        ("all_reduce_perf", "nccl_all_reduce_h200_8gpu.txt"),
    ):
        (bin_dir / name).write_text(f"#!/bin/bash\ncat {DATA / data}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "out").mkdir()
    steps = [
        {"name": "dcgm", "command": ["dcgmi", "diag", "-r", "2", "-j"], "timeout_s": 60,
         "parser": "dcgm_diag"},
        {"name": "all-reduce", "command": ["all_reduce_perf", "-g", "8"], "timeout_s": 60,
         "parser": "nccl_all_reduce", "params": {"min_bus_bw_gbs": {"H200": 470}}},
    ]  # fmt: skip
    validation = {
        "steps": steps,
        "output_dir": str(tmp_path / "out"),
        "tools_path": str(bin_dir),
        "kubernetes": {"image": "site/validate:1", "namespace": NS},
        "on_repair": True,  # looked at only where a test starts the background loops
        "repair_check_s": 5,
    }
    config = tmp_path / "meowbot.yaml"
    config.write_text(json.dumps({"validation": validation}))
    emulator.add_channel(CHANNEL, "gpu-ops")
    settings = bot_settings(
        emulator,
        redis_url,
        MEOWBOT_ADMINS="U0ADMIN",
        MEOWBOT_CONFIG=str(config),
        MEOWBOT_ALERT_CHANNEL=CHANNEL,
        KUBECONFIG=need_service("MEOWBOT_TEST_KUBECONFIG"),
    )
    bot = await create_bot(settings)
    assert bot.deps.validation is not None
    bot.deps.validation.poll_s = 0.3
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http), api
    await bot.close()


async def test_a_drained_kubernetes_node_passes_and_is_back_as_kubernetes_says(
    ops: tuple[Slack, KubeApi],
) -> None:
    slack, api = ops
    scheduler = slack.bot.deps.triage.scheduler
    assert scheduler is not None
    await scheduler.drain(NODE, "meowbot: xid79 gpu3 by @ana")
    emu = slack.emulator
    before = len(emu.responses)
    assert (await slack.command("/node-health", NODE, user="U0ADMIN", channel=CHANNEL))[0] == 200
    await emu.wait_for_responses(before + 1, timeout=30)
    actions = json.dumps(emu.responses[-1][1]["blocks"])
    assert TEST_ACTION in actions and RESUME_ACTION in actions
    # The run's id holds the second it began: the stand-in kubelet takes the Job it finds.
    kubelet = asyncio.create_task(_next_job(api))
    await slack.command("/node-health", f"{NODE} test", user="U0ADMIN", channel=CHANNEL)

    def ended() -> bool:
        msgs = emu.workspace.messages(CHANNEL)
        return bool(msgs) and "back in service" in msgs[0]["text"]

    await eventually(ended, "the run's message says the node is back in service", 60)
    assert await kubelet == 0
    msg = emu.workspace.messages(CHANNEL)[0]
    body = json.dumps(msg["blocks"])
    assert "dcgm: passed" in body and "all-reduce: passed" in body, body
    assert f"Kubernetes now says: `{NODE}` is idle." in body, body
    assert "Kubernetes job meowbot/meowbot-validate-kv-e2e-" in body
    assert validate_blocks(msg["blocks"]) == []
    raw = api.get(f"/api/v1/nodes/{NODE}")
    assert not raw["spec"].get("unschedulable")
    assert not [t for t in raw["spec"].get("taints") or [] if t["key"].startswith("meowbot.io/")]


async def _next_job(api: KubeApi) -> int | None:
    path = f"/apis/batch/v1/namespaces/{NS}/jobs"
    for _ in range(600):
        for job in api.get(path)["items"]:
            name = job["metadata"]["name"]
            labels = job["metadata"].get("labels") or {}
            mine = name.startswith(f"meowbot-validate-{NODE}-") and spec.VALIDATING in labels
            if mine and not job.get("status"):
                return await run_job(api, NS, name)
        await asyncio.sleep(0.1)
    raise TimeoutError("meowbot made no Job")


async def test_on_repair_a_node_whose_kubelet_reports_a_new_boot_is_tested_unasked(
    ops: tuple[Slack, KubeApi], redis_client: Any
) -> None:
    slack, api = ops
    v = slack.bot.deps.validation
    assert v is not None and v.cfg.on_repair
    node_info = {"bootID": "boot-1", "machineID": "m", "systemUUID": "u", "kernelVersion": "k",
                 "osImage": "o", "containerRuntimeVersion": "c", "kubeletVersion": "v1.20.2",
                 "kubeProxyVersion": "v1.20.2", "operatingSystem": "linux",
                 "architecture": "amd64"}  # fmt: skip
    api.merge(f"/api/v1/nodes/{NODE}/status", {"status": {"nodeInfo": node_info}})
    scheduler = slack.bot.deps.triage.scheduler
    assert scheduler is not None
    await scheduler.drain(NODE, "meowbot: xid79 gpu3")
    slack.bot.start_background(sweep=False, digest=False)

    async def looked() -> bool:
        return bool(await redis_client.hexists("meowbot:validation:boot", NODE))

    await eventually(looked, "the policy has seen the drained node and its boot", 30)
    assert slack.emulator.workspace.messages(CHANNEL) == []  # the same boot: not tested
    # The node is repaired and reboots: its kubelet reports a new boot id.
    kubelet = asyncio.create_task(_next_job(api))
    node_info["bootID"] = "boot-2"
    api.merge(f"/api/v1/nodes/{NODE}/status", {"status": {"nodeInfo": node_info}})

    def ended() -> bool:
        msgs = slack.emulator.workspace.messages(CHANNEL)
        return bool(msgs) and "back in service" in msgs[0]["text"]

    await eventually(ended, "the node is tested unasked and back in service", 60)
    assert await kubelet == 0
    told = [m["text"] for m in slack.emulator.workspace.messages(CHANNEL)]
    assert any(t.startswith(f"meowbot ({NODE} booted again, after its drain") for t in told), told
