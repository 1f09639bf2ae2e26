"""The setup check in App Home, through the bot's real server: an admin presses "Check the
setup" and sees progress, then `meowbot doctor`'s lines with their fixes; anyone else is
refused and nothing runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.doctor.report import Status, verdict
from bot.doctor.run import doctor
from bot.mrkdwn import escape
from bot.render.doctor import CHECKING, SETUP_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from tests.e2e.conftest import Slack, bot_settings

ADMIN, USER = "U0ADMIN", "U0USER"
ALERTS = "C0HOMEALERT"


@pytest.fixture
async def home(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[tuple[Slack, Any]]:
    # redis_client: a clean database, or the last test's event ids count as already seen.
    # The alert channel does not have meowbot in it: a fail, with its fix, to be shown.
    emulator.add_channel(ALERTS, "gpu-alerts", is_member=False)
    settings = bot_settings(emulator, redis_url, MEOWBOT_ADMINS=ADMIN, MEOWBOT_ALERT_CHANNEL=ALERTS)
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http), settings
    await bot.close()


async def _opened(slack: Slack, user: str) -> dict[str, Any]:
    emu = slack.emulator
    count = len(emu.calls_to("views.publish")) + 1
    event = {"type": "app_home_opened", "user": user, "channel": "D0HOME", "tab": "home"}
    assert (await slack.event(emu.event_payload(event)))[0] == 200
    call = await emu.wait_for_call("views.publish", count=count, timeout=30)
    assert call.ok, call.error  # the emulator holds the view to Block Kit's rules
    view: dict[str, Any] = dict(emu.home_views[user])  # as shown, with its id
    return view


async def test_an_admin_checks_the_setup_and_sees_each_line_with_its_fix(
    home: tuple[Slack, Any],
) -> None:
    slack, settings = home
    emu = slack.emulator
    view = await _opened(slack, ADMIN)
    assert SETUP_ACTION in json.dumps(view)
    published = len(emu.calls_to("views.publish"))
    status, _, _ = await slack.interactive(emu.view_actions_payload(view, SETUP_ACTION))
    assert status == 200
    progress = await emu.wait_for_call("views.publish", count=published + 1, timeout=30)
    assert progress.ok and CHECKING in json.dumps(progress.args["view"], ensure_ascii=False)
    done = await emu.wait_for_call("views.publish", count=published + 2, timeout=60)
    assert done.ok, done.error
    shown = json.dumps(done.args["view"], ensure_ascii=False)
    # The same report the command prints, read again here.
    lines = await doctor(settings)
    assert verdict(lines) in shown
    channel = next(line for line in lines if line.what == "alert channel")
    assert channel.status is Status.FAIL
    # As Slack shows it: escaped, "@meowbot" kept from becoming a mention.
    assert f":x: alert channel: {escape(channel.said)}" in shown and escape(channel.fix) in shown
    for part in {line.part for line in lines}:
        assert f"*{part}*" in shown, part
    assert shown.count(":x:") == sum(1 for line in lines if line.status is Status.FAIL)


async def test_anyone_else_sees_no_button_and_a_forged_press_runs_nothing(
    home: tuple[Slack, Any],
) -> None:
    slack, _ = home
    emu = slack.emulator
    assert SETUP_ACTION not in json.dumps(await _opened(slack, USER))
    admins_view = await _opened(slack, ADMIN)
    checks = len(emu.calls_to("auth.test"))
    published = len(emu.calls_to("views.publish"))
    press = emu.view_actions_payload(admins_view, SETUP_ACTION, user=USER)
    assert (await slack.interactive(press))[0] == 200
    refused = await emu.wait_for_call("views.publish", count=published + 1, timeout=30)
    assert refused.args["user_id"] == USER
    shown = json.dumps(refused.args["view"])
    assert "Only the cluster admins may check the setup" in shown
    assert SETUP_ACTION not in shown
    assert len(emu.calls_to("auth.test")) == checks  # the doctor never ran
