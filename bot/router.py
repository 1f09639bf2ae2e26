"""Turns a slash command's text into an answer: the one way through the code for each command.

The slash command, the palette modal and the shell all come through `answer` (by way of
handlers/commands.py, whose table runs the long-running commands itself).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.commands import BY_NAME, SlashCommand
from bot.render.blocks import SlackMessage, usage
from bot.render.blocks import error as error_message
from bot.render.triage import (
    faults_help_lines,
    render_faults,
    render_node,
    render_summary,
    render_user_error,
)
from bot.triage import service
from bot.triage.service import NodeReport, Triage, UserError

HELP_WORDS = {"help", "-h", "--help", "?"}

Capability = Callable[[Triage, str], Awaitable[SlackMessage]]


# What a command's help adds to its usage lines: the lists a person cannot guess.
HELP_MORE: dict[str, Callable[[], list[str]]] = {"/hw-faults": faults_help_lines}


def command_usage(cmd: SlashCommand) -> SlackMessage:
    more = HELP_MORE.get(cmd.name)
    return usage(cmd.name, [*cmd.usage, *(more() if more else [])], cmd.description)


async def _node_health(triage: Triage, text: str) -> SlackMessage:
    result = await service.node_health(triage, text)
    if isinstance(result, UserError):
        return render_user_error(result)
    if isinstance(result, NodeReport):
        return render_node(result, dashboard_url=triage.config.dashboard_url)
    return render_summary(result)


async def _hw_faults(triage: Triage, text: str) -> SlackMessage:
    result = await service.hw_faults(triage, text)
    if isinstance(result, UserError):
        return render_user_error(result)
    return render_faults(result)


CAPABILITIES: dict[str, Capability] = {
    "/node-health": _node_health,
    "/hw-faults": _hw_faults,
}
# Commands whose capability needs an argument: alone, they answer with their usage.
NEEDS_ARGUMENT = {"/node-health"}


def is_help(text: str) -> bool:
    words = text.split()
    return bool(words) and words[0].lower() in HELP_WORDS


async def answer(command: str, text: str, triage: Triage) -> SlackMessage:
    cmd = BY_NAME.get(command)
    if cmd is None:
        known = ", ".join(sorted(BY_NAME))
        return error_message(f"I don't know {command}; I answer {known}.")
    if is_help(text) or (not text.split() and command in NEEDS_ARGUMENT):
        return command_usage(cmd)
    capability = CAPABILITIES.get(command)
    if capability is None:
        # The long-running commands are run by handlers/commands.py itself; what reaches here
        # of them is their help.
        return command_usage(cmd)
    return await capability(triage, text)
