"""The slash commands: one catalogue read by the handlers, the manifest test and the shell."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlashCommand:
    name: str
    description: str
    usage_hint: str
    usage: tuple[str, ...]


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand(
        name="/node-health",
        description="Is this node fit to run work, and if not, why and what to do",
        usage_hint="<node | hostlist> | help",
        usage=(
            "`/node-health gpu-0042`: verdict, failing checks with evidence, Slurm state, GPUs",
            "`/node-health gpu-[0001-0064]`: counts per verdict, unhealthy nodes first",
        ),
    ),
    SlashCommand(
        name="/job-slow",
        description="Why is my job slower than yesterday; which node is the straggler",
        usage_hint="[job-id] | help",
        usage=(
            "`/job-slow 123456`: step time against yesterday, stragglers with their cause",
            "`/job-slow`: pick one of your running jobs",
        ),
    ),
    SlashCommand(
        name="/hw-faults",
        description="Hardware faults across the fleet, grouped by cause and topology",
        usage_hint="[node | hostlist | kind] [--since 24h] | help",
        usage=(
            "`/hw-faults`: faults of the last 24 h, worst first, grouped by cause and switch",
            "`/hw-faults xid --since 6h`: one kind of fault over a window",
        ),
    ),
    SlashCommand(
        name="/playground",
        description="Prompt in-training checkpoints side by side",
        usage_hint="[run prompt] | watches | unwatch <id> | help",
        usage=(
            "`/playground`: open the playground to pick a run, checkpoints and a prompt",
            "`/playground tiny-gpt Once upon a time`: newest two checkpoints, default settings",
            "`/playground watches`, `/playground unwatch <id>`: prompts re-run on new checkpoints",
        ),
    ),
    SlashCommand(
        name="/highlights",
        description="The :meow_party: highlights digest",
        usage_hint="[last-week | stats | opt-out | opt-in] | help",
        usage=(
            "`/highlights`: this week's highlights so far (only you see it)",
            "`/highlights last-week`: the last complete week",
            "`/highlights stats`: totals, top channels and authors, a chart of every week",
            "`/highlights opt-out`, `/highlights opt-in`: whether your messages are shown",
        ),
    ),
)

BY_NAME: dict[str, SlashCommand] = {c.name: c for c in COMMANDS}
