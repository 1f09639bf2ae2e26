"""Slash-command listeners: ack at once, then answer through response_url."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot import router
from bot.commands import COMMANDS
from bot.deps import Deps
from bot.render.blocks import SlackMessage
from handlers import highlights, jobslow, playground
from handlers.registry import Registry
from handlers.reply import respond_message

LONG_RUNNING = {jobslow.COMMAND, playground.COMMAND, highlights.COMMAND}


def register(reg: Registry, deps: Deps) -> None:
    async def on_command(
        ack: Any, command: dict[str, Any], respond: Any, client: AsyncWebClient
    ) -> None:
        # Ack before anything else: Slack gives up after 3 s.
        await ack()
        name = str(command.get("command", ""))
        text = str(command.get("text", ""))
        deps.telemetry.commands.labels(command=name).inc()
        if name in LONG_RUNNING and not router.is_help(text):
            # Commands whose work outlives the ack: they post and edit messages themselves,
            # and answer bad input privately through response_url.

            async def private(message: SlackMessage) -> None:
                await respond_message(respond, message)

            user_id = str(command.get("user_id", ""))
            channel = str(command.get("channel_id", ""))
            if name == jobslow.COMMAND:
                await jobslow.run(deps, client, text=text, user_id=user_id, channel=channel,
                                  private=private)  # fmt: skip
            elif name == playground.COMMAND:
                await playground.run_command(
                    deps, client, text=text, user_id=user_id, channel=channel,
                    trigger_id=str(command.get("trigger_id", "")), private=private,
                )  # fmt: skip
            else:
                await highlights.run(
                    deps, client, text=text, user_id=user_id, channel=channel,
                    team=str(command.get("team_id", "")), private=private,
                )  # fmt: skip
            return
        await respond_message(respond, await router.answer(name, text, deps.triage))

    reg.commands((cmd.name for cmd in COMMANDS), on_command)
