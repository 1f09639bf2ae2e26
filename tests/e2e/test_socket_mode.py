"""One Socket Mode session: the same AsyncApp over the emulator's WebSocket."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bot.app import create_bot
from bot.config import Mode, load_settings
from bot.shell.emulator import SlackEmulator
from tests.waiting import eventually


async def test_socket_mode_slash_command(emulator: SlackEmulator, redis_url: str) -> None:
    settings = load_settings(
        SLACK_BOT_TOKEN=emulator.bot_token,
        SLACK_APP_TOKEN=emulator.app_token,
        SLACK_API_URL=emulator.api_url,
        REDIS_URL=redis_url,
    )
    assert settings.mode is Mode.SOCKET
    bot = await create_bot(settings)
    try:
        await bot.start_socket_mode()
        assert emulator.calls_to("apps.connections.open")[0].ok
        payload = emulator.slash_command_payload("/playground", "help")
        ack = await emulator.socket_send("slash_commands", payload)
        assert ack["envelope_id"]
        await emulator.wait_for_responses(1)
        answer = emulator.responses[0][1]
        assert "/playground" in answer["text"]
        assert answer["response_type"] == "ephemeral"
    finally:
        await bot.close()


async def test_socket_mode_malformed_envelopes_are_refused_without_a_traceback(
    emulator: SlackEmulator, redis_url: str, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Envelopes do not pass the HTTP edge: the same check runs in Bolt for them."""
    caplog.set_level(logging.INFO)
    settings = load_settings(
        SLACK_BOT_TOKEN=emulator.bot_token,
        SLACK_APP_TOKEN=emulator.app_token,
        SLACK_API_URL=emulator.api_url,
        REDIS_URL=redis_url,
    )
    bot = await create_bot(settings)
    try:
        await bot.start_socket_mode()
        emulator.calls.clear()
        keys_before = await redis_client.keys("*")
        command = emulator.slash_command_payload("/node-health", "gpu-0042")
        event = emulator.event_payload({"type": "app_home_opened", "tab": "home"})
        press = {"type": "block_actions", "user": {"id": "U0ADMIN"}, "trigger_id": "1.2.x"}
        malformed = [
            ("slash_commands", {k: v for k, v in command.items() if k != "user_id"}),
            ("events_api", event),
            ("interactive", press),
        ]
        for kind, payload in malformed:
            ack = await emulator.socket_send(kind, payload)
            assert ack["envelope_id"]

        def refusals() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.getMessage() == "slack request refused"]

        await eventually(lambda: len(refusals()) >= len(malformed), "each one refused")
        refused = refusals()
        assert [r.__dict__["reason"] for r in refused] == [
            "slash command without user_id",
            "app_home_opened without user",
            "block_actions without actions",
        ]
        assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
        # Bolt's authorization (auth.test) runs before any middleware of the app's; nothing else.
        assert {c.method for c in emulator.calls} <= {"auth.test"}
        assert emulator.responses == []
        assert await redis_client.keys("*") == keys_before  # no event id claimed
    finally:
        await bot.close()
