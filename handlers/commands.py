"""Slash-command listeners: ack at once, then answer through response_url."""

from __future__ import annotations

from typing import Any

from bot import router
from bot.commands import COMMANDS
from bot.deps import Deps
from handlers.registry import Registry
from handlers.reply import respond_message


def register(reg: Registry, deps: Deps) -> None:
    async def on_command(ack: Any, command: dict[str, Any], respond: Any) -> None:
        # Ack before anything else: Slack gives up after 3 s.
        await ack()
        name = str(command.get("command", ""))
        deps.telemetry.commands.labels(command=name).inc()
        message = await router.answer(name, str(command.get("text", "")), deps.triage)
        await respond_message(respond, message)

    reg.commands((cmd.name for cmd in COMMANDS), on_command)
