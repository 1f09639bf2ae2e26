"""One vocabulary through the real server: the words and node names one command takes, every
command takes; a suggestion is a button that runs the command; a node's answer says its state
apart from the advice and whose job runs on it; the fault history says how far back it sees.
Signed requests into the real aiohttp server; Slack's side is the emulator; Redis is real."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.models import FaultKind
from bot.render.blocks import base_action_id
from bot.render.picks import ASK_PICK_ACTION, read_pick
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from bot.words import when
from tests.e2e.conftest import Slack, bot_settings

USER = "U0ADMIN"
CHANNEL = "C0GENERAL"
IDLE_S = 30.0


@pytest.fixture
async def slack(emulator: SlackEmulator, redis_url: str, redis_client: Any) -> AsyncIterator[Slack]:
    bot = await create_bot(bot_settings(emulator, redis_url, MEOWBOT_ADMINS=USER))
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


async def _answer(slack: Slack, command: str, text: str) -> dict[str, Any]:
    """The private answer to a slash command."""
    emu = slack.emulator
    n = len(emu.responses)
    assert (await slack.command(command, text, user=USER, channel=CHANNEL))[0] == 200
    await emu.wait_for_responses(n + 1, timeout=IDLE_S)
    return dict(emu.responses[-1][1])


def _header(answer: dict[str, Any]) -> str:
    return str(next(b["text"]["text"] for b in answer["blocks"] if b["type"] == "header"))


async def test_every_form_of_a_node_name_reaches_the_node(slack: Slack) -> None:
    for typed in ("gpu42", "GPU-0042", '"gpu-0042"', "\u201cgpu-0042\u201d", "gpu-042"):
        answer = await _answer(slack, "/node-health", typed)
        assert _header(answer).startswith("gpu-0042 · advice: "), (typed, answer["text"])
    # A comma list, spaces and all, in /node-health and in /hw-faults.
    both = json.dumps(await _answer(slack, "/node-health", "gpu-0042, gpu-0043"))
    assert "2 nodes" in both or "of 2" in both, both[:300]
    faults = await _answer(slack, "/hw-faults", "reboots gpu42, GPU-0043 --since 2d")
    assert _header(faults) == "Hardware faults: 2 nodes (unexpected reboot), last 2 days"


async def test_why_takes_the_words_hw_faults_takes(slack: Slack) -> None:
    emu = slack.emulator
    for word in ("reboots", "reboot", "Unexpected-Reboot"):
        emu.clear_calls()
        n = len(emu.responses)
        await slack.command("/hw-faults", f"why {word} --since 2d", user=USER, channel=CHANNEL)
        assert await slack.bot.deps.inflight.wait_idle(IDLE_S)
        refusals = [json.dumps(body) for _, body in emu.responses[n:]]
        assert not any("cannot look back" in r for r in refusals), (word, refusals)
        posted = [c.args for c in emu.calls if c.method in {"chat.postMessage", "chat.update"}]
        assert any("unexpected reboot" in json.dumps(p) for p in posted), word
    # A family word of several kinds asks which; a kind only the fault history holds (Redis
    # keeps one here) says, before the history's first record, that it holds none yet.
    answer = await _answer(slack, "/hw-faults", "why nvlink")
    assert "names several kinds" in answer["text"] and "`nvlink_replay`" in answer["text"]
    answer = await _answer(slack, "/hw-faults", "why NVLink-CRC")
    assert "holds no `nvlink_crc` faults yet" in answer["text"], answer["text"]
    answer = await _answer(slack, "/hw-faults", "why fizzbuzz")
    assert "cannot look back at `fizzbuzz`" in answer["text"]


async def test_did_you_mean_is_a_button_that_runs_the_command(slack: Slack) -> None:
    emu = slack.emulator
    answer = await _answer(slack, "/node-health", "gpu-04x2")
    assert "Did you mean" in answer["text"]
    buttons = [el for b in answer["blocks"] if b["type"] == "actions" for el in b["elements"]]
    assert buttons and all(base_action_id(b["action_id"]) == ASK_PICK_ACTION for b in buttons)
    first = read_pick(buttons[0]["value"])
    assert first is not None and first[0] == "/node-health"
    suggested = first[1]
    assert buttons[0]["text"]["text"] == suggested
    emu.clear_calls()
    press = emu.ephemeral_actions_payload(len(emu.responses) - 1, ASK_PICK_ACTION)
    assert (await slack.interactive(press))[0] == 200
    assert await slack.bot.deps.inflight.wait_idle(IDLE_S)
    shown = [json.dumps(c.args) for c in emu.calls if c.method.startswith("chat.")]
    shown += [json.dumps(body) for _, body in emu.responses[-1:]]
    assert any(f"{suggested} \\u00b7 advice: " in s for s in shown), shown


async def test_a_node_answer_says_state_advice_and_whose_job(slack: Slack) -> None:
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    sched = slack.bot.deps.triage.scheduler
    assert sched is not None
    jobs = [j for j in await sched.jobs() if j.nodes]
    job = jobs[0]
    node = job.nodes[0]
    answer = await _answer(slack, "/node-health", node)
    text = json.dumps(answer["blocks"], ensure_ascii=False)
    assert "state: in service · advice: " in text
    assert f"`{job.job_id}` ({job.name}, {job.user})" in text, text
    assert "Checked 20" in text and " UTC" in text
    # A reboot's evidence in words: when the node came back, not `node_boot_time_seconds{} = ...`.
    booted = datetime.now(UTC) - timedelta(minutes=5)
    fleet.inject(FaultKind.UNEXPECTED_REBOOT, node, None, booted)
    text = json.dumps((await _answer(slack, "/node-health", node))["blocks"])
    assert f"booted {when(booted)}" in text and "node_boot_time_seconds" not in text


async def test_repeat_offenders_say_how_far_back_the_history_sees(slack: Slack) -> None:
    answer = await _answer(slack, "/hw-faults", "repeat")
    text = json.dumps(answer["blocks"])
    assert "No GPU or node has had the same fault again and again" not in text
    assert "too short to tell" in text and "90 days" not in text
    assert "no history recorded yet" in text


async def test_why_does_not_date_a_fault_to_the_history_start(slack: Slack) -> None:
    """A fault already there when the record began has no known start: `why` on its kind
    finds no event at meowbot's start, and reads from when the record began."""
    emu = slack.emulator
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    fleet.inject(FaultKind.ECC_DBE, "gpu-0042", 3)
    await _answer(slack, "/node-health", "gpu-0042")  # the first record: the history begins
    began = await slack.bot.deps.triage.history.began()  # type: ignore[union-attr]
    assert began is not None
    emu.clear_calls()
    await slack.command("/hw-faults", "why ecc_dbe", user=USER, channel=CHANNEL)
    assert await slack.bot.deps.inflight.wait_idle(IDLE_S)
    posted = [json.dumps(c.args) for c in emu.calls if c.method in {"chat.update"}]
    assert any("nothing to look back from" in p for p in posted), posted
    assert any(f"{began:%H:%M} UTC" in p for p in posted), posted


async def test_hw_faults_and_why_count_the_same_week(slack: Slack) -> None:
    """One history: the reboots and Xids `/hw-faults --since 7d` lists are the events `why`
    ranks its precursors over, node by node (they once said 1 and 10)."""
    emu = slack.emulator
    for kind, words in (("reboot", "unexpected reboot"), ("xid", "Xid")):
        listed = json.dumps(await _answer(slack, "/hw-faults", f"{kind} --since 7d"))
        n_listed = int(re.search(r"(\d+) faults?\*? in", listed).group(1))  # type: ignore[union-attr]
        emu.clear_calls()
        await slack.command("/hw-faults", f"why {kind} --since 7d", user=USER, channel=CHANNEL)
        assert await slack.bot.deps.inflight.wait_idle(IDLE_S)
        posted = " ".join(json.dumps(c.args) for c in emu.calls if c.method == "chat.update")
        found = re.search(rf"(\d+) {words}s? on (\d+) nodes?", posted)
        assert found is not None, posted[:500]
        assert n_listed == int(found.group(2)) > 0, (kind, n_listed, found.group(0))
    # A node `why` counts a reboot on shows it in its own /hw-faults.
    events = await slack.bot.deps.faults.precursors.events(  # type: ignore[union-attr]
        "unexpected_reboot",
        nodes=None,
        start=datetime.now(UTC) - timedelta(days=2),
        end=datetime.now(UTC),
    )
    assert events
    node = events[0].node
    text = json.dumps(await _answer(slack, "/hw-faults", f"{node} --since 2d"))
    assert "No faults found" not in text and "unexpected reboot" in text
