"""The commands: one table of how each runs, and the slash-command listener.

Slash commands and the App Home palette both come through `dispatch`, so a command answers the
same wherever it is asked; only where the answer goes and how a form opens differ (`Asker`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot import router
from bot.commands import COMMANDS
from bot.deps import Deps
from bot.render.blocks import SlackMessage
from handlers import highlights, jobslow, playground
from handlers.playground import OpenView
from handlers.registry import Registry
from handlers.reply import Private, respond_message


@dataclass(frozen=True)
class Asker:
    """Who asked, and how to answer them where they asked."""

    user_id: str
    channel: str  # where a public answer goes: the channel, or the person's DM
    team: str
    private: Private  # an answer for the asker only
    open_view: OpenView  # shows a form (a modal) to the asker


Runner = Callable[[Deps, AsyncWebClient, str, Asker], Awaitable[None]]


async def _job_slow(deps: Deps, client: AsyncWebClient, text: str, a: Asker) -> None:
    await jobslow.run(deps, client, text=text, user_id=a.user_id, channel=a.channel,
                      private=a.private)  # fmt: skip


async def _playground(deps: Deps, client: AsyncWebClient, text: str, a: Asker) -> None:
    await playground.run_command(deps, client, text=text, user_id=a.user_id, channel=a.channel,
                                 open_view=a.open_view, private=a.private)  # fmt: skip


async def _highlights(deps: Deps, client: AsyncWebClient, text: str, a: Asker) -> None:
    await highlights.run(deps, client, text=text, user_id=a.user_id, channel=a.channel,
                         team=a.team, private=a.private)  # fmt: skip


# Commands whose work outlives the ack: they post and edit messages themselves, and answer
# bad input privately. The others answer at once through `router.answer`.
LONG_RUNNING: dict[str, Runner] = {
    jobslow.COMMAND: _job_slow,
    playground.COMMAND: _playground,
    highlights.COMMAND: _highlights,
}


def opens_a_view(deps: Deps, name: str, text: str) -> bool:
    """Whether the command answers with a form rather than a message (`/playground` alone)."""
    return name == playground.COMMAND and not text.split() and deps.playground is not None


async def dispatch(deps: Deps, client: AsyncWebClient, name: str, text: str, asker: Asker) -> None:
    """Runs `name text` for `asker`; the caller has acked (or acks through `open_view`)."""
    deps.telemetry.commands.labels(command=name).inc()
    runner = LONG_RUNNING.get(name)
    if runner is not None and not router.is_help(text):
        await runner(deps, client, text, asker)
        return
    await asker.private(await router.answer(name, text, deps.triage))


def register(reg: Registry, deps: Deps) -> None:
    async def on_command(
        ack: Any, command: dict[str, Any], respond: Any, client: AsyncWebClient
    ) -> None:
        # Ack before anything else: Slack gives up after 3 s.
        await ack()

        async def private(message: SlackMessage) -> None:
            await respond_message(respond, message)

        async def open_view(view: dict[str, Any]) -> dict[str, Any]:
            # views.open must use the trigger within 3 s of the command: nothing slow before.
            opened = await client.views_open(trigger_id=str(command.get("trigger_id", "")),
                                             view=view)  # fmt: skip
            return dict(opened["view"])

        asker = Asker(
            user_id=str(command.get("user_id", "")),
            channel=str(command.get("channel_id", "")),
            team=str(command.get("team_id", "")),
            private=private,
            open_view=open_view,
        )
        await dispatch(deps, client, str(command.get("command", "")),
                       str(command.get("text", "")), asker)  # fmt: skip

    reg.commands((cmd.name for cmd in COMMANDS), on_command)
