"""Signed but malformed requests into the real aiohttp server: a 400 (an event: a 200 ack) and
one log line, never a traceback, and nothing done; a press without a response_url is still
answered."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import urllib.parse
from typing import Any

import pytest

from bot.render.triage import DRAIN_ACTION
from tests.e2e.conftest import SIGNING_SECRET, Slack

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"


async def post_raw(
    slack: Slack, raw: bytes, content_type: str, *, stamp: str | None = None
) -> tuple[int, dict[str, str]]:
    """Signs the bytes themselves (slack_sdk's signer decodes them as UTF-8 first)."""
    stamp = str(int(time.time())) if stamp is None else stamp
    mac = hmac.new(SIGNING_SECRET.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256)
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": "v0=" + mac.hexdigest(),
    }
    async with slack.http.post(slack.url, data=raw, headers=headers) as resp:
        await resp.read()
        return resp.status, dict(resp.headers)


def interactive(payload: dict[str, Any]) -> bytes:
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()


def press(slack: Slack, **drop_or_set: Any) -> dict[str, Any]:
    emu = slack.emulator
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U0ADMIN", "username": "ana", "team_id": emu.team_id},
        "team": {"id": emu.team_id, "domain": "emu"},
        "trigger_id": emu.new_trigger_id(),
        "container": {"type": "view", "view_id": "V0HOME"},
        "actions": [{"type": "button", "action_id": DRAIN_ACTION, "value": "gpu-0042|xid"}],
    }
    payload.update(drop_or_set)
    return {k: v for k, v in payload.items() if v is not None}


def submission(slack: Slack, view: Any) -> dict[str, Any]:
    emu = slack.emulator
    return {
        "type": "view_submission",
        "user": {"id": "U0ADMIN", "username": "ana", "team_id": emu.team_id},
        "team": {"id": emu.team_id, "domain": "emu"},
        "trigger_id": emu.new_trigger_id(),
        **({"view": view} if view is not None else {}),
    }


def command(slack: Slack, *drop: str) -> bytes:
    payload = slack.emulator.slash_command_payload("/node-health", "gpu-0042")
    return urllib.parse.urlencode({k: v for k, v in payload.items() if k not in drop}).encode()


def malformed(slack: Slack) -> list[tuple[str, bytes, str, int]]:
    """(what, body, content type, the status Slack must get)."""
    emu = slack.emulator
    event = emu.event_payload({"type": "app_home_opened", "user": "U0ADMIN", "tab": "home"})
    no_user = emu.event_payload({"type": "app_home_opened", "channel": "D0ADMIN", "tab": "home"})
    no_event = {k: v for k, v in event.items() if k != "event"}
    modal = {"type": "modal", "id": "V0MODAL", "callback_id": "meowbot_palette", "blocks": []}
    untyped = {k: v for k, v in modal.items() if k != "type"}
    return [
        ("invalid JSON", b'{"type": "event_callback", "event": {', JSON, 400),
        ("JSON that is no object", b"[1, 2]", JSON, 400),
        ("bytes that are not UTF-8", b'{"type": "event_callback", "x": "\xff\xfe"}', JSON, 400),
        ("form bytes that are not UTF-8", b"command=%2Fnode-health&text=%FF%FE", FORM, 400),
        ("a form that does not parse", b"command=%2Fnode-health&user_id", FORM, 400),
        ("a payload that is not JSON", b"payload=%7B%22type%22%3A", FORM, 400),
        ("block_actions without actions", interactive(press(slack, actions=None)), FORM, 400),
        ("block_actions with no action", interactive(press(slack, actions=[])), FORM, 400),
        ("an action without id", interactive(press(slack, actions=[{"v": 1}])), FORM, 400),
        ("block_actions without user", interactive(press(slack, user=None)), FORM, 400),
        ("view_submission without view", interactive(submission(slack, None)), FORM, 400),
        ("view_submission, untyped view", interactive(submission(slack, untyped)), FORM, 400),
        ("slash command without command", command(slack, "command"), FORM, 400),
        ("slash command without user_id", command(slack, "user_id"), FORM, 400),
        ("neither of the three", b"text=hello", FORM, 400),
        ("event_callback without event", json.dumps(no_event).encode(), JSON, 200),
        ("app_home_opened without user", json.dumps(no_user).encode(), JSON, 200),
    ]


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_malformed_signed_requests_get_400_and_change_nothing(
    slack: Slack, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cases = malformed(slack)
    keys_before = await redis_client.keys("*")
    for what, body, content_type, status in cases:
        caplog.clear()
        got, headers = await post_raw(slack, body, content_type)
        assert got == status, what
        assert headers.get("X-Slack-No-Retry") == "1", what
        refused = [r for r in caplog.records if r.getMessage() == "slack request refused"]
        assert len(refused) == 1, what
        assert tracebacks(caplog) == [], what
    await asyncio.sleep(0.3)  # anything a listener had started would have called Slack by now
    assert tracebacks(caplog) == []
    assert [c.method for c in slack.emulator.calls] == []
    assert slack.emulator.responses == []
    assert await redis_client.keys("*") == keys_before  # no event id claimed, nothing stored
    metrics = slack.bot.deps.telemetry.exposition().decode()
    assert "meowbot_commands_total{" not in metrics


async def test_bad_signatures_stay_401_before_any_parsing(
    slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    old = str(int(time.time()) - 6 * 60)
    for stamp in (old, "not-a-number", "", "²"):
        status, _ = await post_raw(slack, b"{not json", JSON, stamp=stamp)
        assert status == 401, stamp
    async with slack.http.post(slack.url, data=b"\xff{", headers={"Content-Type": JSON}) as resp:
        assert resp.status == 401
    assert not [r for r in caplog.records if r.getMessage() == "slack request refused"]
    assert tracebacks(caplog) == []


async def test_a_refusal_without_response_url_goes_to_the_channel_or_the_dm(
    slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    """No admins are set, so a Drain is refused: pressed in App Home (no response_url and no
    channel) the refusal is a DM; pressed where the payload names a channel, an ephemeral."""
    emu = slack.emulator
    refusal = slack.bot.deps.authz.refusal("drain nodes")
    status, _ = await post_raw(slack, interactive(press(slack)), FORM)
    assert status == 200
    dm = await emu.wait_for_call("chat.postMessage")
    assert dm.ok and dm.args["channel"] == "U0ADMIN"
    assert dm.args["text"] == refusal

    in_channel = press(
        slack,
        container={"type": "view", "view_id": "V0MODAL"},
        channel={"id": "C0GENERAL", "name": "general"},
    )
    status, _ = await post_raw(slack, interactive(in_channel), FORM)
    assert status == 200
    ephemeral = await emu.wait_for_call("chat.postEphemeral")
    assert ephemeral.ok, ephemeral
    assert ephemeral.args["channel"] == "C0GENERAL" and ephemeral.args["user"] == "U0ADMIN"
    assert ephemeral.args["text"] == refusal
    assert emu.responses == []
    assert tracebacks(caplog) == []


async def test_well_formed_requests_still_pass(slack: Slack) -> None:
    status, _, _ = await slack.command("/node-health", "help")
    assert status == 200
    await slack.emulator.wait_for_responses(1)
    status, _, _ = await slack.event(
        slack.emulator.event_payload({"type": "app_home_opened", "user": "U0ADMIN", "tab": "home"})
    )
    assert status == 200
    await slack.emulator.wait_for_call("views.publish")
