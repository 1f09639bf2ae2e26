"""Every command of the table answers from every entry point: the slash command and the App
Home palette, with each example of its usage, alone and with `help`; on the bare bot and with a
checkpoint server (where `/playground` alone answers with its form). Signed requests into the
real aiohttp server; Slack's side is the emulator."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.render.palette import OPEN_PALETTE_ACTION, PALETTE_CALLBACK, PALETTE_COMMAND, PALETTE_TEXT
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from handlers.commands import COMMANDS, Command
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_playground import start

USER = "U0ADMIN"
CHANNEL = "C0GENERAL"
# Web API methods through which the bot shows someone something.
SHOWS = {
    "chat.postMessage",
    "chat.update",
    "chat.postEphemeral",
    "views.open",
    "views.update",
    "views.push",
    "files.completeUploadExternal",
}
# What an answer must never say: a command the table lists but nothing runs.
NOT_AN_ANSWER = ("not built", "I don't know /")
IDLE_S = 30.0  # /job-slow and the highlights chart take a while on a busy machine


@pytest.fixture(params=["bare", "playground"])
async def bot(
    request: pytest.FixtureRequest,
    emulator: SlackEmulator,
    redis_url: str,
    redis_client: Any,
    tmp_path: Path,
) -> AsyncIterator[Slack]:
    """The bot as the other e2e tests start it, and with a checkpoint server configured."""
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "playground":
            yield await start(emulator, redis_url, stack, tmp_path, max_tokens=8, temperature=0)
            return
        bare = await create_bot(bot_settings(emulator, redis_url))
        stack.push_async_callback(bare.close)
        port = await bare.start_http("127.0.0.1", 0)
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Slack(emulator, bare, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)


def texts_of(cmd: Command) -> list[str]:
    """What a person would type after the command: each example of its usage, nothing, help."""
    examples = [
        args.strip()
        for line in cmd.usage
        for name, args in re.findall(r"`(/[\w-]+)([^`]*)`", line)
        if name == cmd.name
    ]
    return list(dict.fromkeys(["", "help", *examples]))


class Answers:
    """What the bot showed since the last mark: response_url posts and Web API calls."""

    def __init__(self, slack: Slack) -> None:
        self.slack = slack
        self.mark()

    def mark(self) -> None:
        self.responses = len(self.slack.emulator.responses)
        self.calls = len(self.slack.emulator.calls)

    async def since_mark(self) -> list[str]:
        """The answers (as JSON) once the bot's work after the ack ended."""
        assert await self.slack.bot.deps.inflight.wait_idle(IDLE_S)
        emu = self.slack.emulator
        shown = [json.dumps(body) for _url, body in emu.responses[self.responses :]]
        for call in emu.calls[self.calls :]:
            if call.method in SHOWS:
                assert call.ok, call
                shown.append(json.dumps(call.args))
        return shown


def check(what: str, status: int, shown: list[str]) -> list[str]:
    failures = []
    if status != 200:
        failures.append(f"{what}: HTTP {status}")
    if not shown:
        failures.append(f"{what}: no answer")
    for answer in shown:
        for phrase in NOT_AN_ANSWER:
            if phrase in answer:
                failures.append(f"{what}: {phrase!r} in {answer[:200]}")
    return failures


async def test_every_command_answers_as_a_slash_command(bot: Slack) -> None:
    slack = bot
    answers = Answers(slack)
    failures: list[str] = []
    for cmd in COMMANDS:
        for text in texts_of(cmd):
            answers.mark()
            status, _, _ = await slack.command(cmd.name, text, user=USER, channel=CHANNEL)
            failures += check(f"{cmd.name} {text!r}", status, await answers.since_mark())
    assert failures == []


async def open_palette(slack: Slack) -> dict[str, Any]:
    """Presses "Run a command" on the App Home tab, as a person would; returns the modal."""
    emu = slack.emulator
    event = {"type": "app_home_opened", "user": USER, "channel": "D0ADMIN", "tab": "home"}
    assert (await slack.event(emu.event_payload(event)))[0] == 200
    home = (await emu.wait_for_call("views.publish")).args["view"]
    press = {
        "type": "block_actions",
        "user": {"id": USER, "username": "ana", "team_id": emu.team_id},
        "api_app_id": "A0TEST",
        "team": {"id": emu.team_id, "domain": "emu"},
        "container": {"type": "view", "view_id": "V0HOME"},
        "trigger_id": emu.new_trigger_id(),
        "view": home,
        "actions": [
            {
                "type": "button",
                "action_id": OPEN_PALETTE_ACTION,
                "block_id": "b",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    assert (await slack.interactive(press))[0] == 200
    opened = await emu.wait_for_call("views.open")
    modal = opened.result["view"]  # as Slack keeps it: with its id, which a form updates
    assert modal["callback_id"] == PALETTE_CALLBACK
    return dict(modal)


def submission(slack: Slack, modal: dict[str, Any], command: str, text: str) -> dict[str, Any]:
    emu = slack.emulator
    select = {"type": "static_select", "selected_option": {"value": command}}
    return {
        "type": "view_submission",
        "team": {"id": emu.team_id, "domain": "emu"},
        "user": {"id": USER, "username": "ana", "team_id": emu.team_id},
        "api_app_id": "A0TEST",
        "trigger_id": emu.new_trigger_id(),
        "view": {
            **modal,
            "state": {
                "values": {
                    PALETTE_COMMAND: {PALETTE_COMMAND: select},
                    PALETTE_TEXT: {PALETTE_TEXT: {"type": "plain_text_input", "value": text}},
                }
            },
        },
    }


async def test_every_command_answers_from_the_app_home_palette(bot: Slack) -> None:
    slack = bot
    modal = await open_palette(slack)
    offered = {
        o["value"]
        for b in modal["blocks"]
        if b.get("block_id") == PALETTE_COMMAND
        for o in b["element"]["options"]
    }
    assert offered == {c.name for c in COMMANDS}
    answers = Answers(slack)
    failures: list[str] = []
    for cmd in COMMANDS:
        for text in texts_of(cmd):
            answers.mark()
            status, body, _ = await slack.interactive(submission(slack, modal, cmd.name, text))
            shown = await answers.since_mark()
            if body:  # the modal itself became the answer (a form replacing the palette)
                reply = json.loads(body)
                if reply.get("response_action") == "errors":
                    failures.append(f"palette {cmd.name} {text!r}: {reply['errors']}")
                shown.append(body)
            failures += check(f"palette {cmd.name} {text!r}", status, shown)
    assert failures == []
