"""One Socket Mode session: the same AsyncApp over the emulator's WebSocket."""

from __future__ import annotations

from bot.app import create_bot
from bot.config import Mode, load_settings
from bot.shell.emulator import SlackEmulator


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
