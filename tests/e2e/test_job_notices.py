"""The owners of the jobs a drain hits are told by DM, end to end: three replicas on real
Redis, the simulated fleet's scheduler (each replica its own: every one of them drains, so only
the shared claim keeps the DM single), and the Slack emulator. Real Slurm: test_slurm_notices.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.render.job_notice import JOB_NOTICE_RESUME_ACTION, JOB_NOTICE_STOP_ACTION
from bot.render.triage import DRAIN_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_alerts import am_alert, webhook
from tests.e2e.test_triage_commands import press
from tests.waiting import eventually

NODE, OTHER, ZEDS = "gpu-0005", "gpu-0006", "gpu-0007"
ALERTS = "C0ALERTS"
TOKEN = "e2e-webhook-token"


async def replicas(
    stack: AsyncExitStack, emulator: SlackEmulator, redis_url: str, count: int
) -> list[Slack]:
    http = await stack.enter_async_context(aiohttp.ClientSession())
    out: list[Slack] = []
    for _ in range(count):
        bot = await create_bot(bot_settings(emulator, redis_url, MEOWBOT_ADMINS="U0ADMIN"))
        stack.push_async_callback(bot.close)
        port = await bot.start_http("127.0.0.1", 0)
        out.append(Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http))
    return out


@pytest.fixture
async def three(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[list[Slack]]:
    async with AsyncExitStack() as stack:
        slacks = await replicas(stack, emulator, redis_url, 3)
        for s in slacks:  # the same jobs on every replica's fleet (one job a node, there)
            fleet = s.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
            # Bob is on Slack (bob@example.org); zed, who owns a job too, is not.
            for job_id, user, node in (
                ("9100001", "bob", NODE),
                ("9100002", "bob", OTHER),
                ("9100003", "zed", ZEDS),
            ):
                fleet.add_job([node], user=user, job_id=job_id, name=f"llm-{job_id}")
        yield slacks


def retries_waiting(slacks: list[Slack]) -> int:
    """DMs the replicas will try again in the background."""
    return sum(s.bot.deps.triage.scheduler.retries.waiting for s in slacks)  # type: ignore[union-attr]


def dms(emu: SlackEmulator, user: str) -> list[dict[str, Any]]:
    channel = "D" + user[1:]
    return emu.messages(channel) if channel in emu.workspace.channels else []


async def test_a_drain_pressed_on_three_replicas_tells_the_owner_once(
    three: list[Slack], emulator: SlackEmulator
) -> None:
    # The same press delivered to three replicas at once (each drains its own fleet).
    payload = press(emulator, DRAIN_ACTION, f"{NODE}|meowbot: xid79 gpu3", "U0ADMIN")
    await asyncio.gather(*(s.interactive(payload) for s in three))
    await emulator.wait_for_responses(3, timeout=15)
    answers = [r[1]["text"] for r in emulator.responses]
    assert all(f"Draining `{NODE}`" in a for a in answers), answers
    # The replica that told bob says so; the others found him told already.
    assert sum("1 job owner was told by DM." in a for a in answers) == 1, answers
    assert sum("0 job owners were told by DM (1 told already)." in a for a in answers) == 2

    [bob] = dms(emulator, "U0USER")
    assert dms(emulator, "U0ADMIN") == []  # ana pressed; she owns no job there
    assert validate_blocks(bob["blocks"]) == []
    body = bob["blocks"][0]["text"]["text"]
    assert "`9100001` (llm-9100001)" in body and f"`{NODE}`" in body
    assert "Xid 79 (GPU has fallen off the bus) on GPU 3, by @" in body and "ana" in body
    assert "keeps running to its end" in body
    assert "9100002" not in body  # bob's job on the other node is not hit
    assert len(emulator.calls_to("conversations.open")) == 1


async def test_an_owner_slack_does_not_know_is_skipped_not_an_error(
    three: list[Slack], emulator: SlackEmulator
) -> None:
    await three[0].interactive(press(emulator, DRAIN_ACTION, f"{ZEDS}|meowbot: xid79", "U0ADMIN"))
    await emulator.wait_for_responses(1, timeout=15)
    said = emulator.responses[-1][1]["text"]
    assert f"Draining `{ZEDS}`" in said
    assert "0 job owners were told by DM (1 owner not found on Slack)." in said, said
    assert emulator.calls_to("conversations.open") == []
    assert emulator.calls_to("chat.postMessage") == []


async def test_an_owner_who_stops_the_messages_gets_none_until_turning_them_back_on(
    three: list[Slack], emulator: SlackEmulator
) -> None:
    first = three[0]
    await first.interactive(press(emulator, DRAIN_ACTION, f"{NODE}|meowbot: xid79", "U0ADMIN"))
    await emulator.wait_for_responses(1, timeout=15)
    [dm] = dms(emulator, "U0USER")
    # Bob presses "Stop these messages" in the DM, on another replica than the one that sent it.
    stop = emulator.block_actions_payload("D0USER", dm["ts"], JOB_NOTICE_STOP_ACTION, user="U0USER")
    await three[1].interactive(stop)
    await emulator.wait_for_responses(2)
    stopped = emulator.responses[-1][1]
    assert "You will not be told again" in stopped["text"]
    assert stopped["response_type"] == "ephemeral" and validate_blocks(stopped["blocks"]) == []

    await three[2].interactive(press(emulator, DRAIN_ACTION, f"{OTHER}|meowbot: xid79", "U0ADMIN"))
    await emulator.wait_for_responses(3, timeout=15)
    said = emulator.responses[-1][1]["text"]
    assert "0 job owners were told by DM (1 turned these messages off)." in said, said
    assert len(dms(emulator, "U0USER")) == 1  # nothing new for bob

    # He turns them back on, from the answer to his press.
    resume = emulator.ephemeral_actions_payload(1, JOB_NOTICE_RESUME_ACTION, user="U0USER")
    await three[0].interactive(resume)
    await emulator.wait_for_responses(4)
    assert "You will be told again" in emulator.responses[-1][1]["text"]
    ledger = three[0].bot.deps.job_notices
    assert ledger is not None and not await ledger.opted_out("U0USER")


async def test_the_auto_drain_tells_the_owner_too(
    emulator: SlackEmulator, redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    config = tmp_path / "meowbot.yaml"
    config.write_text("alerts:\n  auto_drain_causes: [GpuXid79]\n")
    emulator.add_channel(ALERTS, "gpu-alerts")
    async with AsyncExitStack() as stack:
        bot = await create_bot(
            bot_settings(
                emulator,
                redis_url,
                MEOWBOT_ADMINS="U0ADMIN",
                MEOWBOT_CONFIG=str(config),
                ALERTMANAGER_WEBHOOK_TOKEN=TOKEN,
                MEOWBOT_ALERT_CHANNEL=ALERTS,
                ALERTMANAGER_URL=None,
            )
        )
        stack.push_async_callback(bot.close)
        port = await bot.start_http("127.0.0.1", 0)
        bot.start_background(sweep=False)
        fleet = bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
        fleet.add_job([NODE], user="bob", job_id="9100009", name="llm-auto")
        http = await stack.enter_async_context(aiohttp.ClientSession())
        alert = webhook([am_alert(NODE, "GpuXid79", severity="critical")])
        async with http.post(
            f"http://127.0.0.1:{port}{ALERTMANAGER_PATH}",
            data=json.dumps(alert),
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as resp:
            assert resp.status == 200
        await emulator.wait_for_call("conversations.open", timeout=20)
        for _ in range(100):
            if dms(emulator, "U0USER"):
                break
            await asyncio.sleep(0.1)
        [dm] = dms(emulator, "U0USER")
        body = dm["blocks"][0]["text"]["text"]
        # An Xid 79 is critical: set down, so the job is stopped (the simulated scheduler does
        # not say whether a job allows requeue).
        assert "`9100009` (llm-auto)" in body and "set down" in body
        assert "by @" in body and "meowbot-auto-drain" in body
        assert "requeued if it allows requeue" in body


async def test_a_dm_slack_fails_to_take_once_is_delivered_once(
    three: list[Slack], emulator: SlackEmulator
) -> None:
    # Slack answers the DM's post with a 500 once; the press still reaches all three replicas.
    emulator.fail_next("chat.postMessage", status=500, error="fatal_error")
    payload = press(emulator, DRAIN_ACTION, f"{NODE}|meowbot: xid79 gpu3", "U0ADMIN")
    await asyncio.gather(*(s.interactive(payload) for s in three))
    await emulator.wait_for_responses(3, timeout=15)
    answers = [r[1]["text"] for r in emulator.responses]
    assert all(f"Draining `{NODE}`" in a for a in answers), answers
    # Tried again (by a later replica's press or in the background) until it went through;
    # once no replica has a try left waiting, still one DM.
    await eventually(lambda: bool(dms(emulator, "U0USER")), "the DM is delivered")
    await eventually(lambda: retries_waiting(three) == 0, "the tries in the background end")
    [dm] = dms(emulator, "U0USER")
    assert "`9100001` (llm-9100001)" in dm["blocks"][0]["text"]["text"]
    posts = emulator.calls_to("chat.postMessage")
    assert [c.ok for c in posts] == [False, True], posts


async def test_a_dm_slack_refuses_for_good_is_not_tried_again(
    three: list[Slack], emulator: SlackEmulator
) -> None:
    emulator.fail_next("conversations.open", status=200, error="cannot_dm_bot")
    payload = press(emulator, DRAIN_ACTION, f"{NODE}|meowbot: xid79", "U0ADMIN")
    await asyncio.gather(*(s.interactive(payload) for s in three))
    await emulator.wait_for_responses(3, timeout=15)
    answers = [r[1]["text"] for r in emulator.responses]
    assert all(f"Draining `{NODE}`" in a for a in answers), answers
    assert sum("(1 DM refused by Slack)" in a for a in answers) == 1, answers
    assert sum("(1 told already)" in a for a in answers) == 2, answers
    assert retries_waiting(three) == 0  # none is tried again, now or later
    assert len(emulator.calls_to("conversations.open")) == 1
    assert dms(emulator, "U0USER") == []
    # The drain of the next node goes on as ever.
    await three[0].interactive(press(emulator, DRAIN_ACTION, f"{OTHER}|meowbot: xid79", "U0ADMIN"))
    await emulator.wait_for_responses(4, timeout=15)
    assert "1 job owner was told by DM." in emulator.responses[-1][1]["text"]
    assert len(dms(emulator, "U0USER")) == 1


async def test_the_owner_who_drains_their_own_jobs_node_is_told_as_the_one_who_did(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> None:
    """Bob may drain; his job runs on the node he drains. His DM says that he drained it and
    what becomes of his job, not that "meowbot drained" it as news; his answer says he was
    told too."""
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())
        bot = await create_bot(bot_settings(emulator, redis_url, MEOWBOT_ADMINS="U0USER"))
        stack.push_async_callback(bot.close)
        port = await bot.start_http("127.0.0.1", 0)
        slack = Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
        fleet = bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
        fleet.add_job([NODE], user="bob", job_id="9100001", name="llm-9100001")
        await slack.interactive(press(emulator, DRAIN_ACTION, f"{NODE}|meowbot: xid79", "U0USER"))
        await emulator.wait_for_responses(1, timeout=15)
        said = emulator.responses[-1][1]["text"]
        assert f"Draining `{NODE}`" in said, said
        assert "Your own job 9100001 is among them" in said, said
        [dm] = dms(emulator, "U0USER")
        assert validate_blocks(dm["blocks"]) == []
        body = dm["blocks"][0]["text"]["text"]
        assert body.startswith(f":hourglass_flowing_sand: You drained `{NODE}`, where your job")
        assert "`9100001` (llm-9100001)" in body and "which meowbot drained" not in body
        assert "keeps running to its end" in body
