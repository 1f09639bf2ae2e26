"""/node-health and /hw-faults through signed requests, and who may press Drain."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.backends.resume_store import RedisResumes
from bot.models import FaultKind
from bot.render.triage import DRAIN_ACTION, RESUME_ACTION, RESUME_ANYWAY_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings


def press(emu: SlackEmulator, action_id: str, value: str, user: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user, "username": emu.workspace.users[user]["name"], "team_id": emu.team_id},
        "api_app_id": "A0TEST",
        "team": {"id": emu.team_id, "domain": "emu"},
        "container": {"type": "message", "message_ts": "1.2", "channel_id": "C0GENERAL"},
        "trigger_id": emu.new_trigger_id(),
        "channel": {"id": "C0GENERAL", "name": "general"},
        "message": {"ts": "1.2", "text": "x", "blocks": []},
        "response_url": emu.new_response_url(channel="C0GENERAL"),
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "b",
                "value": value,
                "action_ts": "1.3",
            }
        ],
    }


async def test_node_health_of_a_faulty_node(slack: Slack) -> None:
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    fault = next(
        f
        for f in fleet.injected
        if f.kind is FaultKind.XID or f.kind is FaultKind.ECC_DBE or f.kind is FaultKind.GPU_MISSING
    )
    status, _, _ = await slack.command("/node-health", fault.node)
    assert status == 200
    await slack.emulator.wait_for_responses(1)
    answer = slack.emulator.responses[0][1]
    assert validate_blocks(answer["blocks"]) == []
    text = json.dumps(answer["blocks"])
    assert fault.node in answer["text"] and "DRAIN" in text
    assert DRAIN_ACTION in text


@pytest.fixture
async def admin_slack(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[Slack]:
    """The simulated fleet and scheduler, with ana (U0ADMIN) an admin."""
    bot = await create_bot(bot_settings(emulator, redis_url, MEOWBOT_ADMINS="U0ADMIN"))
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


async def test_drain_pressed_on_a_private_answer_redraws_it_with_resume(
    admin_slack: Slack,
) -> None:
    slack = admin_slack
    emu = slack.emulator
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    fault = next(f for f in fleet.injected if f.kind is FaultKind.XID)
    await slack.command("/node-health", fault.node)
    await emu.wait_for_responses(1)
    await slack.interactive(emu.ephemeral_actions_payload(0, DRAIN_ACTION))
    await emu.wait_for_responses(2)
    done = emu.responses[1][1]
    # Slack redraws the private answer in place: done above, the node as it stands below.
    assert done["replace_original"] is True, done["text"]
    assert done["response_type"] == "ephemeral"
    assert emu.ephemerals[-1]["replaces"]
    assert validate_blocks(done["blocks"]) == []
    text = json.dumps(done["blocks"])
    assert f"Draining `{fault.node}`" in done["text"]
    assert RESUME_ACTION in text and DRAIN_ACTION not in text


async def test_hw_faults_and_bad_input(slack: Slack) -> None:
    await slack.command("/hw-faults", "--since 6h")
    await slack.command("/node-health", 'gpu-1"} or vector(1) #')
    await slack.emulator.wait_for_responses(2)
    answers = {r[1]["text"]: r[1] for r in slack.emulator.responses}
    faults = next(a for t, a in answers.items() if "hardware faults" in t)
    assert validate_blocks(faults["blocks"]) == []
    refused = next(a for t, a in answers.items() if "not a node name" in t)
    assert refused["response_type"] == "ephemeral"


async def test_drain_by_someone_not_allowed_is_refused(slack: Slack) -> None:
    status, _, _ = await slack.interactive(
        press(slack.emulator, DRAIN_ACTION, "gpu-0001|meowbot: xid79 gpu3", "U0USER")
    )
    assert status == 200
    await slack.emulator.wait_for_responses(1)
    answer = slack.emulator.responses[0][1]
    # No admins are named in this bot: the refusal says so, not the setting's name.
    assert "Nobody may drain nodes from Slack here" in answer["text"], answer
    assert "MEOWBOT_ADMINS" not in answer["text"]
    assert answer["response_type"] == "ephemeral"


@pytest.fixture
async def slurm_slack(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[Slack]:
    settings = bot_settings(
        emulator,
        redis_url,
        SLURM_REST_URL=need_service("SLURM_REST_URL"),
        SLURM_JWT=need_service("SLURM_JWT"),
        SLURM_USER=os.environ.get("SLURM_USER", "root"),
        MEOWBOT_ADMINS="U0ADMIN",
    )
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


def scontrol_reason(node: str) -> str:
    out = subprocess.run(
        ["scontrol", "show", "node", node],
        capture_output=True,
        text=True,
        check=True,
        # Without SLURM_JWT: the command-line tools then log in with munge, as an operator would.
        env={
            **{k: v for k, v in os.environ.items() if k != "SLURM_JWT"},
            "SLURM_CONF": need_service("SLURM_CONF"),
        },
    ).stdout
    for part in out.split("\n"):
        if part.strip().startswith("Reason="):
            return part.strip().removeprefix("Reason=")
    return ""


async def test_admin_drains_and_resumes_through_slurm(slurm_slack: Slack) -> None:
    emu = slurm_slack.emulator
    node = "gpu-0009"
    await slurm_slack.interactive(press(emu, DRAIN_ACTION, f"{node}|meowbot: xid79 gpu3", "U0USER"))
    await emu.wait_for_responses(1)
    refused = emu.responses[-1][1]["text"]
    assert "Only the cluster admins may drain nodes (ask <@U0ADMIN>)" in refused
    assert "meowbot" not in scontrol_reason(node)  # the refusal changed nothing

    await slurm_slack.interactive(
        press(emu, DRAIN_ACTION, f"{node}|meowbot: xid79 gpu3", "U0ADMIN")
    )
    await emu.wait_for_responses(2)
    assert "Draining `gpu-0009`" in emu.responses[-1][1]["text"], emu.responses[-1]
    assert scontrol_reason(node).startswith("meowbot: xid79 gpu3 by @ana")

    await slurm_slack.interactive(press(emu, RESUME_ACTION, node, "U0ADMIN"))
    await emu.wait_for_responses(3)
    assert "Resumed" in emu.responses[-1][1]["text"], emu.responses[-1]
    for _ in range(50):
        if "meowbot" not in scontrol_reason(node):
            break
        await asyncio.sleep(0.1)
    assert "meowbot" not in scontrol_reason(node)
    # Remembered in Redis, for every replica: the Xid it was drained for is history now.
    memory = slurm_slack.bot.deps.triage.resumes
    assert isinstance(memory, RedisResumes)
    assert list(await memory.resumes([node, "gpu-0011"])) == [node]


def scontrol(*args: str, check: bool = True) -> None:
    subprocess.run(
        ["scontrol", *args],
        capture_output=True,
        text=True,
        check=check,
        env={
            **{k: v for k, v in os.environ.items() if k != "SLURM_JWT"},
            "SLURM_CONF": need_service("SLURM_CONF"),
        },
    )


async def test_an_operators_drain_is_resumed_only_when_confirmed(slurm_slack: Slack) -> None:
    emu = slurm_slack.emulator
    node = "gpu-0010"
    scontrol("update", f"nodename={node}", "state=drain", "reason=bad DIMM (ops ticket 12)")
    try:
        await slurm_slack.interactive(press(emu, RESUME_ACTION, node, "U0ADMIN"))
        await emu.wait_for_responses(1)
        refused = emu.responses[-1][1]
        assert "unless you confirm" in refused["text"], refused
        assert scontrol_reason(node).startswith("bad DIMM")  # nothing changed
        assert emu.ephemeral_actions_payload(0, RESUME_ANYWAY_ACTION)["actions"][0]["value"] == node

        await slurm_slack.interactive(
            emu.ephemeral_actions_payload(0, RESUME_ANYWAY_ACTION, user="U0USER")
        )
        await emu.wait_for_responses(2)
        assert "Only the cluster admins may resume nodes" in emu.responses[-1][1]["text"]
        assert scontrol_reason(node).startswith("bad DIMM")

        await slurm_slack.interactive(emu.ephemeral_actions_payload(0, RESUME_ANYWAY_ACTION))
        await emu.wait_for_responses(3)
        assert "Resumed" in emu.responses[-1][1]["text"], emu.responses[-1]
        for _ in range(50):
            if not scontrol_reason(node):
                break
            await asyncio.sleep(0.1)
        assert scontrol_reason(node) == ""
    finally:
        scontrol("update", f"nodename={node}", "state=resume", check=False)


async def test_home_tab_lists_the_viewers_slurm_jobs(slurm_slack: Slack) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    env["SLURM_CONF"] = need_service("SLURM_CONF")
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "-N",
            "1",
            "-J",
            "home-tab-job",
            "--wrap",
            "sleep 60",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    job_id = out.split(";")[0]
    try:
        emu = slurm_slack.emulator
        # ana@example.org maps to the cluster user "ana", who has no jobs; map her to root.
        slurm_slack.bot.deps.users.mapping["U0ADMIN"] = "root"
        event = {"type": "app_home_opened", "user": "U0ADMIN", "channel": "D0A", "tab": "home"}
        await slurm_slack.event(emu.event_payload(event))
        call = await emu.wait_for_call("views.publish", timeout=15)
        assert call.ok, call
        text = json.dumps(call.args["view"])
        assert job_id in text and "home-tab-job" in text
        # Bob has an email but no cluster jobs: his tab says so rather than showing root's.
        event = {"type": "app_home_opened", "user": "U0USER", "channel": "D0U", "tab": "home"}
        await slurm_slack.event(emu.event_payload(event))
        call = await emu.wait_for_call("views.publish", count=2, timeout=15)
        assert "No running jobs of `bob`" in json.dumps(emu.calls_to("views.publish")[-1].args)
    finally:
        subprocess.run(["scancel", job_id], env=env, check=False)


async def test_job_slow_posts_progress_then_the_answer_detail_and_chart(slack: Slack) -> None:
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    job = fleet.add_job([f"gpu-{i:04d}" for i in range(481, 497)], user="alice")
    fault = fleet.inject_straggler(job.job_id, FaultKind.THROTTLE_HW_THERMAL, node="gpu-0490")
    status, _, _ = await slack.command("/job-slow", job.job_id)
    assert status == 200
    upload = await slack.emulator.wait_for_call("files.completeUploadExternal", timeout=30)
    assert upload.ok
    posted = slack.emulator.calls_to("chat.postMessage")[0]
    assert f"job {job.job_id}" in posted.args["text"].lower()
    update = slack.emulator.calls_to("chat.update")[0]
    assert update.ok and validate_blocks(update.args["blocks"]) == []
    answer = json.dumps(update.args["blocks"])
    assert fault.node in answer and DRAIN_ACTION in answer and "throttl" in answer.lower()
    replies = [m for m in slack.emulator.messages("C0GENERAL") if m.get("thread_ts")]
    assert replies, "the detail goes in the thread"
    png = next(iter(slack.emulator.uploads.values()))
    assert png.startswith(b"\x89PNG") and len(png) < 1_000_000


async def test_job_slow_without_step_times_shows_the_lagging_proxy(slack: Slack) -> None:
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    job = fleet.add_job(
        [f"gpu-{i:04d}" for i in range(465, 481)], user="alice", exports_step_time=False
    )
    fleet.inject(FaultKind.NVLINK_CRC, "gpu-0470", 3)
    status, _, _ = await slack.command("/job-slow", job.job_id)
    assert status == 200
    await slack.emulator.wait_for_call("files.completeUploadExternal", timeout=30)
    update = slack.emulator.calls_to("chat.update")[0]
    answer = json.dumps(update.args["blocks"])
    assert "gpu-0470" in answer and "nvlink_crc" in answer and "exports no step time" in answer
    assert "recovers up to" in answer  # a proxy bounds the cost; it does not measure it
    detail = json.dumps([m for m in slack.emulator.messages("C0GENERAL") if m.get("thread_ts")])
    assert "NVLink TX" in detail and "GB/s" in detail and "MADs" in detail


async def test_job_slow_bad_and_unknown_ids_are_private_and_post_nothing(slack: Slack) -> None:
    await slack.command("/job-slow", '1"} or vector(1)')
    await slack.command("/job-slow", "99999999")
    await slack.emulator.wait_for_responses(2)
    texts = sorted(r[1]["text"] for r in slack.emulator.responses)
    assert any("not a job id" in t for t in texts)
    assert any("knows no job 99999999" in t for t in texts)
    assert all(r[1]["response_type"] == "ephemeral" for r in slack.emulator.responses)
    assert slack.emulator.calls_to("chat.postMessage") == []
