"""The commands: one table, one `dispatch`, and the slash-command listener.

Each command is declared once, here: its name, description, usage and usage hint (which the
manifest test holds manifest.yaml to), its help extras, what runs it and when it answers with a
form instead. The table lives in handlers/ rather than bot/ because an entry references its
runner, which talks to Slack; bot/render/palette.py and the shell take the table's names and
descriptions as arguments or imports and declare nothing themselves. Each runner lives in the
handler module of its surface (handlers/triage.py, jobslow.py, playground.py, highlights.py).

Every entry point (the slash command, the App Home palette, a mention or a DM in plain words
through handlers/ask.py, and any later one) builds an
`Asker` and calls `dispatch`, so a command answers the same wherever it is asked; only where the
answer goes and how a form opens differ.

A runner either answers once, privately (`asker.private`), or is long-running: it posts and
edits messages itself (/job-slow, /playground, /highlights stats, /regressions), and answers
bad input privately. Either way the listener has acked before it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.render.blocks import error as error_message
from bot.render.blocks import usage
from bot.render.triage import faults_help_lines
from bot.slack_message import SlackMessage
from handlers import highlights, jobslow, playground, precursors, regressions, triage
from handlers.registry import Registry
from handlers.reply import Asker, Misread, respond_message, show_modal

S = TypeVar("S")
"""What a command's runner uses: its own service, picked from the composition root's."""

HELP_WORDS = {"help", "-h", "--help", "?"}


def _never(deps: Deps, text: str) -> bool:
    return False


@dataclass(frozen=True)
class Command(Generic[S]):
    name: str
    description: str
    usage_hint: str
    usage: tuple[str, ...]
    # The service the runner is handed (the triage, `FaultsService`, ...), never the whole
    # `Deps`; then the runner: (service, client, text, asker).
    service: Callable[[Deps], S]
    run: Callable[[S, AsyncWebClient, str, Asker], Awaitable[None]]
    # Alone (no text), the command answers with its usage rather than running.
    needs_argument: bool = False
    # What its help adds to the usage lines: the lists a person cannot guess.
    help_more: Callable[[], list[str]] | None = None
    # Whether `text` answers with a form (a modal) rather than a message: the palette then
    # lets the form replace its own modal instead of closing it.
    opens_form: Callable[[Deps, str], bool] = _never

    def help(self) -> SlackMessage:
        more = self.help_more() if self.help_more else []
        return usage(self.name, [*self.usage, *more], self.description)


COMMANDS = (  # not annotated: each entry's service type is checked against its runner
    Command(
        name="/node-health",
        description="Is this node fit to run work, and if not, why and what to do",
        usage_hint="<node | hostlist> [test] | help",
        usage=(
            "`/node-health gpu-0042`: verdict, failing checks with evidence, Slurm state, GPUs",
            "`/node-health gpu-[0001-0064]`: counts per verdict, unhealthy nodes first",
            "`/node-health gpu-0042 test`: run the validation suite on a drained node, resume "
            "it if every step passes",
        ),
        service=lambda d: d.node_health,
        run=triage.node_health,
        needs_argument=True,
    ),
    Command(
        name="/job-slow",
        description="Why is my job slower than yesterday; which node is the straggler",
        usage_hint="[job-id] | help",
        usage=(
            "`/job-slow 123456`: step time against yesterday, stragglers with their cause",
            "`/job-slow`: pick one of your running jobs",
        ),
        service=lambda d: d.job_slow,
        run=jobslow.command,
    ),
    Command(
        name="/hw-faults",
        description="Hardware faults across the fleet, grouped by cause and topology",
        usage_hint="[repeat] [node | hostlist | kind] [--since 24h] | why <kind> | help",
        usage=(
            "`/hw-faults`: faults of the last 24 h, worst first, grouped by cause and switch",
            "`/hw-faults xid --since 6h`: one kind of fault over a window",
            "`/hw-faults repeat`: repeat offenders, GPUs and nodes whose fault keeps coming back",
            "`/hw-faults why unexpected_reboot --since 7d`: what the nodes showed before them",
        ),
        service=lambda d: d.faults,
        run=triage.hw_faults,
        help_more=lambda: [*faults_help_lines(), *precursors.help_lines()],
    ),
    Command(
        name="/playground",
        description="Prompt in-training checkpoints side by side",
        usage_hint="[run prompt] | watches | unwatch <id> | help",
        usage=(
            "`/playground`: open the playground to pick a run, checkpoints and a prompt",
            "`/playground tiny-gpt Once upon a time`: newest two checkpoints, default settings",
            "`/playground tiny-gpt --steps 400,500 Once upon a time`: those checkpoints",
            "`/playground watches`, `/playground unwatch <id>`: prompts re-run on new checkpoints",
        ),
        service=lambda d: d.playground,
        run=playground.command,
        opens_form=playground.opens_form,
    ),
    Command(
        name="/highlights",
        description="The :meow_party: highlights digest",
        usage_hint="[last-week | stats | opt-out | opt-in] | help",
        usage=(
            "`/highlights`: this week's highlights so far (only you see it)",
            "`/highlights last-week`: the last complete week",
            "`/highlights stats`: totals, top channels and authors, a chart of every week",
            "`/highlights opt-out`, `/highlights opt-in`: whether your messages are shown",
        ),
        service=lambda d: d.highlights,
        run=highlights.command,
    ),
    Command(
        name="/regressions",
        description="Which software rollout made training slower, by how much, at what cost",
        usage_hint="[driver | kernel | firmware | <configured>] [--since 7d] | help",
        usage=(
            "`/regressions`: every rollout of the last 7 days, regressions worst first",
            "`/regressions kernel --since 14d`: one component over a longer window",
        ),
        service=lambda d: d.regressions,
        run=regressions.command,
        help_more=regressions.help_lines,
    ),
)

BY_NAME: dict[str, Command[Any]] = {c.name: c for c in COMMANDS}


def is_help(text: str) -> bool:
    words = text.split()
    return bool(words) and words[0].lower() in HELP_WORDS


def opens_a_form(deps: Deps, name: str, text: str) -> bool:
    """Whether `name text` answers with a form rather than a message (`/playground` alone)."""
    cmd = BY_NAME.get(name)
    return cmd is not None and cmd.opens_form(deps, text)


async def dispatch(deps: Deps, client: AsyncWebClient, name: str, text: str, asker: Asker) -> None:
    """Runs `name text` for `asker`; the caller has acked (or acks through `open_view`)."""
    deps.telemetry.commands.labels(command=name).inc()
    cmd = BY_NAME.get(name)
    if cmd is None:
        known = ", ".join(sorted(BY_NAME))
        await asker.private(error_message(f"I don't know {name}; I answer {known}."))
        return
    if is_help(text) or (cmd.needs_argument and not text.split()):
        await asker.private(cmd.help())
        return
    try:
        await cmd.run(cmd.service(deps), client, text, asker)
    except Misread as misread:
        await asker.private(error_message(misread.sentence))
        await asker.private(cmd.help())


def register(reg: Registry, deps: Deps) -> None:
    async def on_command(
        ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        # Ack before anything else: Slack gives up after 3 s.
        await ack()

        async def private(message: SlackMessage) -> None:
            await respond_message(respond, message)

        async def open_view(view: dict[str, Any]) -> dict[str, Any]:
            # views.open must use the trigger within 3 s of the command: nothing slow before.
            return await show_modal(client, str(command.get("trigger_id", "")), view)

        asker = Asker(
            user_id=str(command.get("user_id", "")),
            channel=str(command.get("channel_id", "")),
            team=str(command.get("team_id", "")),
            private=private,
            open_view=open_view,
        )
        await dispatch(
            deps, client, str(command.get("command", "")), str(command.get("text", "")), asker
        )

    reg.commands((cmd.name for cmd in COMMANDS), on_command)
