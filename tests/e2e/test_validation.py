"""Testing a drained node from Slack, on the real test Slurm: `/node-health <node> test`,
one message that follows the run, the node read back at the end, Cancel, and the refusals
(a node in service, one not known, a person who may not act). Stand-ins for `dcgmi` and
`all_reduce_perf` print the real tools' recorded outputs (tests/data/validation/)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.render.alerts import ALERT_DRAIN_ACTION
from bot.render.triage import RESUME_ACTION
from bot.render.validation import CANCEL_TEST_ACTION, TEST_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from bot.triage.repeats import failed_validation
from bot.validation import policy
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_alerts import am_alert, webhook
from tests.slurm_reboot import rebooted
from tests.waiting import eventually

CHANNEL = "C0OPS"
TOKEN = "e2e-webhook-token"
NODE = "gpu-0012"
DATA = Path(__file__).resolve().parents[1] / "data" / "validation"


def _scontrol(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    env["SLURM_CONF"] = need_service("SLURM_CONF")
    return subprocess.run(
        ["scontrol", *args], env=env, capture_output=True, text=True, check=False
    ).stdout


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
async def ops(
    emulator: SlackEmulator, redis_url: str, redis_client: Any, tmp_path: Path
) -> AsyncIterator[tuple[Slack, Path]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "dcgmi", f"cat {DATA / 'dcgm_r2_v3_pass.json'}")
    _tool(bin_dir, "all_reduce_perf", f"sleep 2; cat {DATA / 'nccl_all_reduce_h200_8gpu.txt'}")
    config = tmp_path / "meowbot.yaml"
    steps = [
        {
            "name": "dcgm",
            "command": ["dcgmi", "diag", "-r", "2", "-j"],
            "timeout_s": 60,
            "parser": "dcgm_diag",
        },
        {
            "name": "all-reduce",
            "command": ["all_reduce_perf", "-g", "8"],
            "timeout_s": 60,
            "parser": "nccl_all_reduce",
            "params": {"min_bus_bw_gbs": {"H200": 470}},
        },
    ]
    config.write_text(
        json.dumps(
            {
                "validation": {
                    "steps": steps,
                    "output_dir": str(tmp_path / "out"),
                    "tools_path": str(bin_dir),
                    # Looked at only where a test starts the background loops.
                    "on_repair": True,
                    "repair_check_s": 5,
                }
            }
        )
    )
    emulator.add_channel(CHANNEL, "gpu-ops")
    settings = bot_settings(
        emulator,
        redis_url,
        MEOWBOT_ADMINS="U0ADMIN",
        MEOWBOT_CONFIG=str(config),
        MEOWBOT_ALERT_CHANNEL=CHANNEL,
        ALERTMANAGER_WEBHOOK_TOKEN=TOKEN,
        ALERTMANAGER_URL=None,
        SLURM_REST_URL=need_service("SLURM_REST_URL"),
        SLURM_JWT=need_service("SLURM_JWT"),
        SLURM_USER=os.environ.get("SLURM_USER", "root"),
    )
    bot = await create_bot(settings)
    assert bot.deps.validation is not None
    bot.deps.validation.poll_s = 0.3
    _scontrol("update", f"nodename={NODE}", "state=drain", "reason=meowbot: xid79 gpu3")
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http), bin_dir
    await bot.close()
    # A test that failed mid-run leaves its reservation: gone, so no later test meets it.
    for name in re.findall(r"ReservationName=(meowbot-validate-\S+)", _scontrol("show", "res")):
        _scontrol("delete", f"ReservationName={name}")
    _scontrol("update", f"nodename={NODE}", "state=resume")


async def _private(slack: Slack, command: str, text: str, user: str = "U0ADMIN") -> dict[str, Any]:
    emu = slack.emulator
    before = len(emu.responses)
    status, _, _ = await slack.command(command, text, user=user, channel=CHANNEL)
    assert status == 200
    await emu.wait_for_responses(before + 1, timeout=30)
    answer: dict[str, Any] = emu.responses[-1][1]
    assert validate_blocks(answer.get("blocks") or []) == []
    return answer


def _texts(slack: Slack) -> list[str]:
    return [m["text"] for m in slack.emulator.workspace.messages(CHANNEL)]


def _top(slack: Slack) -> list[dict[str, Any]]:
    return [
        m
        for m in slack.emulator.workspace.messages(CHANNEL)
        if "thread_ts" not in m or m.get("thread_ts") == m.get("ts")
    ]


async def test_a_drained_node_passes_and_is_back_in_service_as_slurm_says(
    ops: tuple[Slack, Path],
) -> None:
    slack, _ = ops
    # The drained node's answer offers "Test and resume" beside Resume.
    answer = await _private(slack, "/node-health", NODE)
    actions = json.dumps(answer["blocks"])
    assert TEST_ACTION in actions and RESUME_ACTION in actions
    # With validation.on_repair, a person's press is the "repaired" word.
    assert '"Repaired: test and resume"' in actions
    await slack.command("/node-health", f"{NODE} test", channel=CHANNEL)

    def ended() -> bool:
        msgs = _top(slack)
        return bool(msgs) and "back in service" in msgs[-1]["text"]

    await eventually(
        ended, f"the run's message says the node is back in service: {_texts(slack)}", 60
    )
    msg = _top(slack)[-1]
    body = json.dumps(msg["blocks"])
    assert "dcgm: passed" in body and "all-reduce: passed" in body, body
    assert "Slurm now says" in body and "idle" in body
    assert CANCEL_TEST_ACTION not in body  # no Cancel once it has ended
    assert validate_blocks(msg["blocks"]) == []

    # The person who asked is told in the thread (posted after the last edit), and Slurm
    # agrees with the words.
    def told() -> bool:
        return any(
            m.get("thread_ts") == msg["ts"] and m["ts"] != msg["ts"] and "<@U0ADMIN>" in m["text"]
            for m in slack.emulator.workspace.messages(CHANNEL)
        )

    await eventually(told, "the person who asked is told in the run's thread", 30)
    shown = _scontrol("show", "node", NODE)
    assert "State=IDLE" in shown and "DRAIN" not in shown, shown
    assert "meowbot-validate" not in _scontrol("show", "reservation")


async def test_cancel_stops_the_job_and_the_node_stays_drained(ops: tuple[Slack, Path]) -> None:
    slack, bin_dir = ops
    # Under the test Slurm's proctrack/linuxproc a cancelled step's process outlives the job and
    # holds the reservation until it ends; meowbot waits for it (proctrack/cgroup kills it).
    _tool(bin_dir, "dcgmi", "exec sleep 12")
    await slack.command("/node-health", f"{NODE} test", channel=CHANNEL)

    def running() -> bool:
        msgs = _top(slack)
        return bool(msgs) and ":hourglass_flowing_sand: dcgm: running" in json.dumps(
            msgs[-1]["blocks"]
        )

    await eventually(running, "the first step shows running", 60)
    msg = _top(slack)[-1]
    # Someone who may not act is refused; the run goes on.
    refused = slack.emulator.block_actions_payload(
        CHANNEL, msg["ts"], CANCEL_TEST_ACTION, user="U0USER"
    )
    status, _, _ = await slack.interactive(refused)
    assert status == 200
    press = slack.emulator.block_actions_payload(CHANNEL, msg["ts"], CANCEL_TEST_ACTION)
    status, _, _ = await slack.interactive(press)
    assert status == 200

    def cancelled() -> bool:
        return "cancelled by" in _top(slack)[-1]["text"]

    try:
        await eventually(cancelled, "the message says who cancelled", 60)
    except AssertionError:
        raise AssertionError(_texts(slack)) from None
    assert "it stays out of service" in _top(slack)[-1]["text"]
    shown = _scontrol("show", "node", NODE)
    assert "DRAIN" in shown and "validation cancelled by" in shown, shown
    assert "meowbot-validate" not in _scontrol("show", "reservation")


async def test_refusals_are_private_and_change_nothing(ops: tuple[Slack, Path]) -> None:
    slack, _ = ops
    before = len(_top(slack))
    in_service = await _private(slack, "/node-health", "gpu-0013 test")
    assert "is in service" in in_service["text"] and "drain it first" in in_service["text"]
    unknown = await _private(slack, "/node-health", "gpu-0999 test")
    assert "don't know" in unknown["text"], unknown["text"]
    forged = await _private(slack, "/node-health", "gpu-0012';scontrol`id` test")
    assert "don't know" in forged["text"], forged["text"]
    nobody = await _private(slack, "/node-health", f"{NODE} test", user="U0USER")
    assert "test nodes" in nobody["text"], nobody["text"]
    assert len(_top(slack)) == before  # nothing posted, nothing reserved
    assert "meowbot-validate" not in _scontrol("show", "reservation")
    assert "DRAIN" in _scontrol("show", "node", NODE)


async def test_a_run_whose_watcher_stopped_is_taken_up_and_ends_in_its_message(
    ops: tuple[Slack, Path],
) -> None:
    slack, bin_dir = ops
    _tool(bin_dir, "dcgmi", f"sleep 5; cat {DATA / 'dcgm_r2_v3_pass.json'}")
    first = slack.bot.deps.validation
    assert first is not None
    first.lease_s = 2
    await slack.command("/node-health", f"{NODE} test", channel=CHANNEL)

    def running() -> bool:
        msgs = _top(slack)
        return bool(msgs) and "dcgm: running" in json.dumps(msgs[-1]["blocks"])

    await eventually(running, "the first step shows running", 60)
    ts = _top(slack)[-1]["ts"]
    # The replica following it stops (as `close` stops it): the run stays recorded, its node
    # held in the reservation.
    for task in list(first.tasks):
        task.cancel()
    assert "meowbot-validate" in _scontrol("show", "reservation")
    other = await create_bot(slack.bot.settings)
    try:
        assert other.deps.validation is not None
        other.deps.validation.poll_s, other.deps.validation.lease_s = 0.3, 2
        other.start_background(sweep=False, digest=False)

        def ended() -> bool:
            return "back in service" in _top(slack)[-1]["text"]

        await eventually(ended, "the other replica ends the run in its message", 60)
    finally:
        await other.close()
    assert _top(slack)[-1]["ts"] == ts  # the same message, not a new one
    shown = _scontrol("show", "node", NODE)
    assert "State=IDLE" in shown and "DRAIN" not in shown, shown
    assert "meowbot-validate" not in _scontrol("show", "reservation")


async def test_after_a_drain_from_an_alert_its_thread_offers_the_test_that_runs_there(
    ops: tuple[Slack, Path],
) -> None:
    slack, _ = ops
    emu = slack.emulator
    _scontrol("update", f"nodename={NODE}", "state=resume")  # in service when the fault comes
    slack.bot.start_background(sweep=False, digest=False)
    url = slack.url.removesuffix(SLACK_EVENTS_PATH) + ALERTMANAGER_PATH
    alert = webhook([am_alert(NODE, "GpuXid79", severity="critical")])
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with slack.http.post(url, data=json.dumps(alert), headers=headers) as resp:
        assert resp.status == 200
    await eventually(lambda: bool(_top(slack)), "the alert is posted", 60)
    alert_ts = _top(slack)[-1]["ts"]
    drain = emu.block_actions_payload(CHANNEL, alert_ts, ALERT_DRAIN_ACTION)
    status, _, _ = await slack.interactive(drain)
    assert status == 200

    def in_thread() -> list[dict[str, Any]]:
        return [
            m
            for m in emu.workspace.messages(CHANNEL)
            if m.get("thread_ts") == alert_ts and m["ts"] != alert_ts
        ]

    def offered() -> bool:
        return any(TEST_ACTION in json.dumps(m.get("blocks") or []) for m in in_thread())

    try:
        await eventually(offered, "the alert's thread offers Test and resume", 60)
    except AssertionError:
        said = [r[1].get("text") for r in emu.responses]
        raise AssertionError((said, _texts(slack), _scontrol("show", "node", NODE))) from None
    offer = next(m for m in in_thread() if TEST_ACTION in json.dumps(m.get("blocks") or []))
    assert "DRAIN" in _scontrol("show", "node", NODE)
    status, _, _ = await slack.interactive(
        emu.block_actions_payload(CHANNEL, offer["ts"], TEST_ACTION)
    )
    assert status == 200

    def ended() -> bool:
        return any("back in service" in m["text"] for m in in_thread())

    await eventually(ended, "the run ends in the alert's thread", 60)
    shown = _scontrol("show", "node", NODE)
    assert "State=IDLE" in shown and "DRAIN" not in shown, shown


async def test_app_home_lists_the_nodes_meowbot_drained_with_the_test_to_those_who_may_act(
    ops: tuple[Slack, Path],
) -> None:
    slack, _ = ops
    emu = slack.emulator
    views = []
    for count, user in enumerate(("U0ADMIN", "U0USER"), start=1):
        event = {"type": "app_home_opened", "user": user, "channel": "D0A", "tab": "home"}
        await slack.event(emu.event_payload(event))
        call = await emu.wait_for_call("views.publish", count=count, timeout=30)
        assert call.ok, call.error  # the emulator holds the view to Block Kit's rules
        views.append(json.dumps(call.args["view"]))
    admin, user_view = views
    assert f"`{NODE}`" in admin and TEST_ACTION in admin and "xid79 gpu3" in admin
    assert "gpu-0013" not in admin  # in service: nothing to test
    assert TEST_ACTION not in user_view and "Drained by meowbot" not in user_view


async def test_a_third_failure_in_30_days_makes_the_node_a_repeat_offender_for_rma(
    ops: tuple[Slack, Path],
) -> None:
    slack, bin_dir = ops
    _tool(bin_dir, "dcgmi", f"cat {DATA / 'dcgm_r2_v3_fail.json'}")
    history = slack.bot.deps.triage.history
    assert history is not None
    now = datetime.now(UTC)
    earlier = [failed_validation(NODE, now - timedelta(days=d)) for d in (12, 4)]
    await history.save({NODE: earlier}, now)
    await slack.command("/node-health", f"{NODE} test", channel=CHANNEL)

    def ended() -> bool:
        msgs = _top(slack)
        return bool(msgs) and "failed validation and stays out" in msgs[-1]["text"]

    await eventually(ended, f"the run ends failed: {_texts(slack)}", 60)
    body = json.dumps(_top(slack)[-1]["blocks"])
    assert "Repeat offender: 3rd failed validation on the node in 30 days" in body, body
    assert "Its verdict is now RMA" in body
    # The same verdict everywhere: /node-health reads it from the same history.
    answer = json.dumps(await _private(slack, "/node-health", NODE))
    assert "3rd failed validation on the node in 30 days" in answer, answer
    assert "open an RMA" in answer
    kept = [o for o in await history.occurrences([NODE]) if o.cause == "failed_validation"]
    assert len(kept) == 3


async def test_on_repair_a_node_booted_since_meowbots_drain_is_tested_unasked(
    ops: tuple[Slack, Path], redis_client: Any
) -> None:
    slack, _ = ops
    v = slack.bot.deps.validation
    assert v is not None and v.cfg.on_repair

    # Right after an earlier test's run, Slurm can show the node not responding a moment,
    # without its boot time.
    async def registered() -> bool:
        return (await v.scheduler.nodes([NODE]))[NODE].booted_at is not None

    await eventually(registered, "Slurm shows the node's boot time", 30)
    before = (await v.scheduler.nodes([NODE]))[NODE]
    assert before.booted_at is not None and policy.watched(before)
    assert not policy.repaired(before, before.boot_mark)
    slack.bot.start_background(sweep=False, digest=False)

    async def looked() -> bool:
        return bool(await redis_client.hexists("meowbot:validation:boot", NODE))

    await eventually(looked, "the policy has seen the drained node and its boot time", 30)
    assert _top(slack) == []  # drained, not booted since: not tested
    with rebooted(NODE):

        def ended() -> bool:
            msgs = _top(slack)
            return bool(msgs) and "back in service" in msgs[-1]["text"]

        await eventually(ended, f"the node is tested and resumed: {_texts(slack)}", 90)
    [msg] = _top(slack)  # once: in service, it is not tested again
    # Who asked, as the thread is told: meowbot, and why.
    replies = [
        m["text"]
        for m in slack.emulator.workspace.messages(CHANNEL)
        if m.get("thread_ts") == msg["ts"] and m["ts"] != msg["ts"]
    ]
    assert any(
        r.startswith(f"meowbot ({NODE} booted at ") and "after its drain for xid79 gpu3" in r
        for r in replies
    ), replies
    shown = _scontrol("show", "node", NODE)
    assert "DRAIN" not in shown, shown
