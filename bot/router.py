"""Turns a slash command's text into an answer: the one way through the code for each command.

The capabilities themselves (node health, slow jobs, the playground, highlights) plug in here
as their issues land; until then a command says plainly that it is not built yet.
"""

from __future__ import annotations

from bot.commands import BY_NAME, SlashCommand
from bot.render.blocks import SlackMessage, usage
from bot.render.blocks import error as error_message

HELP_WORDS = {"help", "-h", "--help", "?"}


def command_usage(cmd: SlashCommand) -> SlackMessage:
    return usage(cmd.name, list(cmd.usage), cmd.description)


def not_built(cmd: SlashCommand) -> SlackMessage:
    return error_message(
        f"{cmd.name} is not built yet: it arrives with issue #{cmd.issue}. "
        f"Try `{cmd.name} help` for what it will do."
    )


def answer(command: str, text: str) -> SlackMessage:
    """The answer to `/command text` (pure: the slow capabilities will be awaited here)."""
    cmd = BY_NAME.get(command)
    if cmd is None:
        known = ", ".join(sorted(BY_NAME))
        return error_message(f"I don't know {command}; I answer {known}.")
    words = text.split()
    if words and words[0].lower() in HELP_WORDS:
        return command_usage(cmd)
    return not_built(cmd)
