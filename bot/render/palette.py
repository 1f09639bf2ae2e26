"""The App Home tab and the command palette modal opened from it.

The palette lets someone run a command without remembering its syntax; its submission goes
through the same dispatch as the slash command. The commands are handlers/commands.py's table,
passed in: this module renders them and declares none.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from bot.mrkdwn import code
from bot.render.blocks import HomeTab, Modal, button
from bot.render.doctor import SETUP_ACTION
from bot.render.validation import TestOffer

OPEN_PALETTE_ACTION = "meowbot_open_palette"
PALETTE_CALLBACK = "meowbot_palette"
PALETTE_COMMAND = "palette_command"
PALETTE_TEXT = "palette_text"
MAX_PALETTE_TEXT = 500


class Listed(Protocol):
    """What the home tab and the palette show of a command."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def usage_hint(self) -> str: ...


MAX_TO_TEST = 10
"""Drained nodes listed with their button in App Home; the rest are counted."""


def home_view(
    commands: Sequence[Listed],
    backends: dict[str, str],
    glance: list[str] | None = None,
    jobs: list[str] | None = None,
    to_test: Sequence[tuple[str, str]] = (),
    test: TestOffer | None = None,
    *,
    may_check: bool = False,
    setup: Sequence[str] = (),
) -> dict[str, Any]:
    """The home tab: the fleet at a glance and the viewer's jobs, when they could be read;
    for those who may act, the nodes meowbot drained (node, reason) with "Test and resume",
    and the setup check (`may_check`) with its report or progress (`setup`, mrkdwn blocks)."""
    home = HomeTab(callback_id="meowbot_home")
    home.header("meowbot")
    if setup and not may_check:  # a refusal: said first, where the press was
        home.lines(setup, bullet="")
    if glance:
        home.section("*The fleet at a glance*")
        home.lines(glance)
    if jobs:
        home.section("*Your jobs*")
        home.lines(jobs)
    if to_test and test is not None:
        home.section("*Drained by meowbot*: test one once it is repaired")
        for node, reason in to_test[:MAX_TO_TEST]:
            home.section(f"{code(node)} {code(reason)}", accessory=test.button(node))
        if len(to_test) > MAX_TO_TEST:
            home.lines([f"and {len(to_test) - MAX_TO_TEST} more: `/node-health <node> test`"])
    if may_check:
        home.section(
            "*Setup check*: each configured part against what meowbot needs, as "
            "`meowbot doctor` prints it",
            accessory=button("Check the setup", SETUP_ACTION),
        )
        for block in setup:
            home.section(block)
    if glance or jobs or (to_test and test is not None) or may_check:
        home.divider()
    home.section("GPU cluster triage and the model playground. Commands:")
    home.lines([f"{code(c.name + ' ' + c.usage_hint)}: {c.description}" for c in commands])
    home.actions(button("Run a command", OPEN_PALETTE_ACTION, style="primary"))
    home.divider()
    home.fields([(name, state) for name, state in backends.items()])
    return home.build()


def palette_modal(commands: Sequence[Listed]) -> dict[str, Any]:
    modal = Modal("Run a command", callback_id=PALETTE_CALLBACK, submit="Run")
    modal.select_input(
        "Command", PALETTE_COMMAND, [(c.name, c.name) for c in commands], initial=commands[0].name
    )
    modal.text_input(
        "Arguments",
        PALETTE_TEXT,
        placeholder="e.g. gpu-0042, or help",
        optional=True,
        max_length=MAX_PALETTE_TEXT,
    )
    modal.context("The answer arrives in your messages with meowbot.")
    return modal.build()


def parse_palette(view: dict[str, Any], names: Collection[str]) -> tuple[str, str] | dict[str, str]:
    """(command, text) from a submitted palette (`names`: the commands it offers), or field
    errors keyed by block id."""
    values = view.get("state", {}).get("values", {})
    chosen = values.get(PALETTE_COMMAND, {}).get(PALETTE_COMMAND, {}).get("selected_option")
    name = str(chosen.get("value", "")) if isinstance(chosen, dict) else ""
    text = str(values.get(PALETTE_TEXT, {}).get(PALETTE_TEXT, {}).get("value") or "")
    if name not in names:
        return {PALETTE_COMMAND: "Pick one of the commands."}
    if len(text) > MAX_PALETTE_TEXT:
        return {PALETTE_TEXT: f"At most {MAX_PALETTE_TEXT} characters."}
    if "\n" in text:
        return {PALETTE_TEXT: f"One line, as you would type after {name}."}
    return name, text.strip()
