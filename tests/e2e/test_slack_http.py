"""Signed Slack requests into the real aiohttp server; Slack's side is the emulator."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse

import aiohttp

from bot.render.palette import OPEN_PALETTE_ACTION, PALETTE_CALLBACK, PALETTE_COMMAND, PALETTE_TEXT
from bot.shell.emulator import validate_blocks
from handlers.registry import Registry
from tests.e2e.conftest import Slack


async def test_slash_command_acks_then_answers_through_response_url(slack: Slack) -> None:
    started = time.perf_counter()
    status, _body, _ = await slack.command("/node-health", "help")
    acked = time.perf_counter() - started
    assert status == 200 and acked < 3.0
    await slack.emulator.wait_for_responses(1)
    _url, answer = slack.emulator.responses[0]
    assert answer["response_type"] == "ephemeral"
    assert "/node-health" in answer["text"]
    assert validate_blocks(answer["blocks"]) == []
    assert any("gpu-0042" in json.dumps(b) for b in answer["blocks"])


async def test_playground_without_a_server_says_how_to_start_one(slack: Slack) -> None:
    status, _, _ = await slack.command("/playground", "tiny hello")
    assert status == 200
    await slack.emulator.wait_for_responses(1)
    answer = slack.emulator.responses[0][1]
    assert answer["response_type"] == "ephemeral"
    assert "PLAYGROUND_ENDPOINTS" in answer["text"] and "demo-checkpoints" in answer["text"]


async def test_forged_stale_and_missing_signatures_get_401_and_run_nothing(slack: Slack) -> None:
    payload = slack.emulator.slash_command_payload("/node-health", "help")
    body = urllib.parse.urlencode(payload)
    form = "application/x-www-form-urlencoded"
    forged = slack.headers(body, secret="not-the-secret")
    stale = slack.headers(body, ts=int(time.time()) - 6 * 60)
    for headers in (forged, stale, {}):
        status, _, _ = await slack.post(body, content_type=form, headers=headers)
        assert status == 401
    tampered = slack.headers(body)
    status, _, _ = await slack.post(
        body.replace("help", "gpu-1"), content_type=form, headers=tampered
    )
    assert status == 401
    await asyncio.sleep(0.3)
    assert slack.emulator.responses == []
    metrics = slack.bot.deps.telemetry.exposition().decode()
    assert 'meowbot_commands_total{command="/node-health"}' not in metrics


async def test_home_tab_button_modal_and_submission(slack: Slack) -> None:
    emu = slack.emulator
    event = {"type": "app_home_opened", "user": "U0ADMIN", "channel": "D0ADMIN", "tab": "home"}
    status, _, _ = await slack.event(emu.event_payload(event))
    assert status == 200
    call = await emu.wait_for_call("views.publish")
    assert call.ok and call.args["user_id"] == "U0ADMIN"
    home = call.args["view"]
    button = next(el for b in home["blocks"] if b["type"] == "actions" for el in b["elements"])
    assert button["action_id"] == OPEN_PALETTE_ACTION

    press = {
        "type": "block_actions",
        "user": {"id": "U0ADMIN", "username": "ana", "team_id": emu.team_id},
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
    status, _, _ = await slack.interactive(press)
    assert status == 200
    opened = await emu.wait_for_call("views.open")
    assert opened.ok, opened
    modal = opened.args["view"]
    assert modal["callback_id"] == PALETTE_CALLBACK

    def submission(command: str, text: str) -> dict[str, object]:
        return {
            "type": "view_submission",
            "team": {"id": emu.team_id, "domain": "emu"},
            "user": {"id": "U0ADMIN", "username": "ana", "team_id": emu.team_id},
            "api_app_id": "A0TEST",
            "trigger_id": emu.new_trigger_id(),
            "view": {
                **modal,
                "id": "V0MODAL",
                "state": {
                    "values": {
                        PALETTE_COMMAND: {
                            PALETTE_COMMAND: {
                                "type": "static_select",
                                "selected_option": {"value": command},
                            }
                        },
                        PALETTE_TEXT: {PALETTE_TEXT: {"type": "plain_text_input", "value": text}},
                    }
                },
            },
        }

    status, body, _ = await slack.interactive(submission("/rm-rf", "x"))
    assert status == 200
    assert json.loads(body) == {
        "response_action": "errors",
        "errors": {PALETTE_COMMAND: "Pick one of the commands."},
    }
    status, body, _ = await slack.interactive(submission("/hw-faults", "help"))
    assert status == 200 and body == ""
    posted = await emu.wait_for_call("chat.postMessage")
    assert posted.ok and posted.args["channel"] == "U0ADMIN"
    assert "/hw-faults" in posted.args["text"]


async def test_event_retries_are_processed_once(slack: Slack) -> None:
    emu = slack.emulator
    event = {"type": "app_home_opened", "user": "U0USER", "channel": "D0USER", "tab": "home"}
    payload = emu.event_payload(event)
    statuses = [(await slack.event(payload))[0]]
    for retry in (1, 2, 3):
        statuses.append((await slack.event(payload, retry=retry))[0])
    assert statuses == [200, 200, 200, 200]
    await emu.wait_for_call("views.publish")
    await asyncio.sleep(0.3)
    assert len(emu.calls_to("views.publish")) == 1
    metrics = slack.bot.deps.telemetry.exposition().decode()
    assert "meowbot_duplicate_events_total 3.0" in metrics
    # Another team's event with the same id is its own event.
    other = {**payload, "team_id": "T0OTHER"}
    assert (await slack.event(other))[0] == 200


async def test_unhandled_event_is_not_retried(slack: Slack) -> None:
    payload = slack.emulator.event_payload({"type": "pin_added", "user": "U0USER"})
    status, _, headers = await slack.event(payload)
    assert status == 404
    assert headers.get("X-Slack-No-Retry") == "1"


async def test_healthz_and_metrics(slack: Slack) -> None:
    base = slack.url.rsplit("/slack/events", 1)[0]
    await slack.command("/highlights", "help")
    await slack.emulator.wait_for_responses(1)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as resp:
            health = await resp.json()
            assert resp.status == 200
        async with http.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
    assert health["ok"] is True and health["redis"] == "ok" and health["mode"] == "http"
    assert health["backends"]["prometheus"] == "not configured"
    # Simulated, and said so: a real cluster names its metrics and scheduler instead.
    assert health["backends"]["fleet"] == "simulated (512 nodes)"
    assert "metrics" not in health["backends"]
    assert 'meowbot_commands_total{command="/highlights"} 1.0' in metrics
    assert 'meowbot_ack_latency_seconds_count{kind="command"} 1.0' in metrics


async def test_web_api_429_is_retried_after_retry_after(slack: Slack) -> None:
    emu = slack.emulator
    emu.fail_next("views.publish", status=429, retry_after=1)
    event = {"type": "app_home_opened", "user": "U0ADMIN", "channel": "D0ADMIN", "tab": "home"}
    await slack.event(emu.event_payload(event))
    deadline = time.monotonic() + 5
    while len(emu.calls_to("views.publish")) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    first, second = emu.calls_to("views.publish")
    assert not first.ok and second.ok
    assert second.at - first.at >= 0.95


async def test_shutdown_lets_work_after_the_ack_finish(slack: Slack) -> None:
    async def slow(ack: object, respond: object) -> None:
        await ack()  # type: ignore[operator]
        await asyncio.sleep(0.5)  # a backend call still running when SIGTERM comes
        await respond(text="finished after shutdown began")  # type: ignore[operator]

    # Registered the way handlers/ registers every listener, so it is tracked the same way.
    Registry(slack.bot.app, slack.bot.deps.inflight).command("/e2e-slow", slow)
    status, _, _ = await slack.command("/e2e-slow")
    assert status == 200 and slack.emulator.responses == []
    started = time.perf_counter()
    await slack.bot.close()
    assert time.perf_counter() - started < 10
    assert [r[1]["text"] for r in slack.emulator.responses] == ["finished after shutdown began"]
    slack.bot.runner = None  # closed already; the fixture's close is then a no-op for HTTP
