"""A bot with Slurm and Kubernetes both configured (SLURM_REST_URL and KUBECONFIG), on the real
Slurm and the real kube-apiserver of scripts/testenv.py: /node-health of a node in both shows
it, the Drain button drains it in both and tells the owner of its Kubernetes job by DM, and
Resume brings it back in both. Nothing above the scheduler port knows there are two."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.backends.both_schedulers import BothSchedulers
from bot.backends.slurm import SlurmRest
from bot.errors import BackendError
from bot.render.triage import DRAIN_ACTION, RESUME_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_triage_commands import press
from tests.kube_api import KubeApi, wait_ready

NODE = "gpu-0014"
ROOT = "U0ROOT"


@pytest.fixture
async def both(emulator: SlackEmulator, redis_url: str, redis_client: Any) -> AsyncIterator[Slack]:
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    emulator.add_user(ROOT, "root", email="root@example.org", real_name="Root")
    settings = bot_settings(
        emulator,
        redis_url,
        SLURM_REST_URL=need_service("SLURM_REST_URL"),
        SLURM_JWT=need_service("SLURM_JWT"),
        SLURM_USER=os.environ.get("SLURM_USER", "root"),
        KUBECONFIG=need_service("MEOWBOT_TEST_KUBECONFIG"),
        MEOWBOT_ADMINS="U0ADMIN",
    )
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


async def test_drain_and_resume_a_node_in_both_from_the_buttons(
    both: Slack, emulator: SlackEmulator
) -> None:
    api = KubeApi.from_env()
    api.node(NODE)
    api.namespace("root")  # user_from: namespace, so the jobs here are root's
    job = api.batch_job("root", "train-e2e")
    api.pod("root", "train-e2e-0", NODE, owner=job)
    scheduler = both.bot.deps.triage.scheduler
    inner = getattr(scheduler, "inner", scheduler)
    assert isinstance(inner, BothSchedulers)
    slurm: SlurmRest = inner.slurm
    try:
        drain = press(emulator, DRAIN_ACTION, f"{NODE}|meowbot: xid79 gpu3", "U0ADMIN")
        status, _, _ = await both.interactive(drain)
        assert status == 200
        await emulator.wait_for_responses(1, timeout=20)
        answer = emulator.responses[-1][1]["text"]
        assert f"Draining `{NODE}` in Slurm and Kubernetes" in answer, answer
        assert "1 job owner was told by DM." in answer, answer
        dm = emulator.messages("D0ROOT")[-1]["blocks"][0]["text"]["text"]
        assert "`root/job/train-e2e`" in dm and f"`{NODE}`" in dm

        s = (await slurm.nodes([NODE]))[NODE]
        k = api.get(f"/api/v1/nodes/{NODE}")
        assert s.draining and s.reason == "meowbot: xid79 gpu3 by @ana"
        assert k["spec"]["unschedulable"] is True

        status, _, _ = await both.command("/node-health", NODE)
        assert status == 200
        await emulator.wait_for_responses(2, timeout=20)
        shown = json.dumps(emulator.responses[-1][1])
        # Slack text escapes the @ (a word joiner after it): no one is mentioned.
        assert "*Slurm and Kubernetes*\\nidle+DRAIN" in shown, shown
        assert "meowbot: xid79 gpu3 by @\\u2060ana" in shown and RESUME_ACTION in shown

        resume = press(emulator, RESUME_ACTION, NODE, "U0ADMIN")
        status, _, _ = await both.interactive(resume)
        assert status == 200
        await emulator.wait_for_responses(3, timeout=20)
        assert not (await slurm.nodes([NODE]))[NODE].out_of_service
        back = api.get(f"/api/v1/nodes/{NODE}")
        assert not back["spec"].get("unschedulable")
        assert not any(t["key"] == "meowbot.io/drain" for t in back["spec"].get("taints") or [])
    finally:
        api.delete("/api/v1/namespaces/root/pods/train-e2e-0")
        with contextlib.suppress(BackendError):
            await slurm.resume(NODE)
