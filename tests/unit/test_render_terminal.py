"""The terminal renderer: readable, numbered like `button_targets`, no escapes without colour."""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Any

from bot import mrkdwn
from bot.render.blocks import HomeTab, Message, Modal, button, image_element, select
from bot.shell.terminal import (
    button_targets,
    message_targets,
    render_message,
    render_mrkdwn,
    render_terminal,
    render_view,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
NUMBERED = re.compile(r"\[(\d+): ([^\]]*?)(?: ▾| ↗)?\]")


def cells(line: str) -> int:
    plain = ANSI.sub("", line)
    return sum(
        0
        if unicodedata.combining(c) or c in "\u200d\ufe0f"
        else 2
        if unicodedata.east_asian_width(c) in ("W", "F")
        else 1
        for c in plain
    )


def node_report() -> list[dict[str, Any]]:
    return (
        Message("gpu-a17 should be drained")
        .header("Node gpu-a17: drain")
        .section(
            "*Verdict:* drain, XID 79 on _GPU 3_ (~ok~) `nvidia-smi -q` see "
            "<https://grafana.example/d/x?a=1&amp;b=2|the dashboard>, ask <@U123> or "
            "<#C42|gpu-ops>; 3 &lt; 4 &amp;&amp; 5 &gt; 4"
        )
        .fields([("Node", "gpu-a17"), ("State", "drain"), ("Reachable since", "2 h")])
        .context("updated 3 min ago", image_element("https://x/cat.png", "a cat"))
        .divider()
        .actions(
            button("Drain node", "drain", "gpu-a17", style="danger"),
            button("Silence", "silence", "gpu-a17"),
            select("Pick a node", "pick", [("gpu-a17", "gpu-a17"), ("gpu-a18", "gpu-a18")]),
        )
        .section("Grafana", accessory=button("Open", "open", url="https://grafana.example"))
        .image("https://x/chart.png", "step time per node")
        .build()
        .blocks
    )


def test_no_escape_bytes_without_colour_and_some_with() -> None:
    blocks = node_report()
    plain = render_terminal(blocks, color=False)
    assert "\x1b" not in plain
    coloured = render_terminal(blocks, color=True)
    assert "\x1b[1m" in coloured and "\x1b[2m" in coloured
    assert ANSI.sub("", coloured).replace("\n", "").replace(" ", "") != ""


def test_escape_bytes_hidden_in_text_never_reach_the_terminal() -> None:
    blocks = Message("x").header("evil\x1b]0;pwned\x07").section("red \x1b[31mtext\x9b").build()
    for color in (False, True):
        output = render_terminal(blocks.blocks, color=color)
        assert "\x07" not in output and "\x9b" not in output and "]0;" in output
        assert "\x1b]" not in output and "\x1b[31m" not in output


def test_header_is_underlined_without_colour_and_bold_with() -> None:
    lines = render_terminal(node_report(), color=False).splitlines()
    assert lines[0] == "Node gpu-a17: drain"
    assert lines[1] == "─" * len("Node gpu-a17: drain")
    assert render_terminal(node_report(), color=True).startswith("\x1b[1mNode gpu-a17: drain")


def test_mrkdwn_is_made_readable() -> None:
    output = render_terminal(node_report(), color=False, width=200)
    assert "Verdict: drain, XID 79 on GPU 3 (ok) `nvidia-smi -q` see" in output
    assert "the dashboard (https://grafana.example/d/x?a=1&b=2)" in output
    assert "ask @U123 or #gpu-ops; 3 < 4 && 5 > 4" in output
    assert "*" not in output and "&amp;" not in output and "&lt;" not in output


def test_mentions_and_specials() -> None:
    text = (
        "<@U1> <@U2|bob> <!here> <!channel> <!subteam^S1|@ops> <!date^1^{date}|Jan 1> "
        "<mailto:a@b.c|a@b.c>"
    )
    expected = "@U1 @bob @here @channel @ops Jan 1 a@b.c (mailto:a@b.c)"
    assert render_mrkdwn(text, color=False) == expected


def test_escaped_text_shows_exactly_what_was_typed() -> None:
    typed = "<!channel> @here look at <http://x|y> & `tick` *not bold*"
    output = render_mrkdwn(mrkdwn.escape(typed), color=False)
    assert "<!channel> @here look at <http://x|y> &" in output
    assert "\u2060" not in output


def test_fields_are_aligned_rows() -> None:
    lines = render_terminal(node_report(), color=False).splitlines()
    rows = [line for line in lines if line.startswith(("Node  ", "State ", "Reachable since "))]
    assert rows == ["Node             gpu-a17", "State            drain", "Reachable since  2 h"]
    coloured = render_terminal(node_report(), color=True).splitlines()
    value_columns = {
        ANSI.sub("", line).index(value)
        for line, value in zip(
            [c for c in coloured if ANSI.sub("", c).startswith(("Node  ", "State ", "Reachable"))],
            ["gpu-a17", "drain", "2 h"],
            strict=True,
        )
    }
    assert value_columns == {17}


def test_fields_split_over_sections_share_one_column_and_long_values_wrap() -> None:
    pairs = [(f"k{index}", "v") for index in range(12)] + [("a much longer key", "w " * 80)]
    lines = render_terminal(Message("f").fields(pairs).build().blocks, color=False).splitlines()
    assert lines[0] == "k0                 v"
    assert lines[-2].startswith("a much longer key  w w")
    assert lines[-1].startswith(" " * 19 + "w")
    assert all(cells(line) <= 100 for line in lines)


def test_context_is_prefixed_or_dimmed() -> None:
    plain = render_terminal(node_report(), color=False)
    assert "  · updated 3 min ago  [image: a cat]" in plain.splitlines()
    coloured = render_terminal(node_report(), color=True)
    assert "\x1b[2mupdated 3 min ago  [image: a cat]\x1b[0m" in coloured


def test_divider_image_and_accessory() -> None:
    lines = render_terminal(node_report(), color=False).splitlines()
    assert "─" * 100 in lines
    assert "[image: step time per node]" in lines
    assert "[4: Open ↗]" in lines


def test_buttons_are_numbered_as_button_targets() -> None:
    blocks = node_report()
    output = render_terminal(blocks, color=False)
    assert "[1: Drain node] [2: Silence] [3: Pick a node ▾]" in output.splitlines()
    shown = [(int(number), label) for number, label in NUMBERED.findall(output)]
    targets = button_targets(blocks)
    assert shown == [(target["number"], target["text"]) for target in targets]
    drain, silence, pick, link = targets
    assert (drain["action_id"], drain["value"], drain["type"]) == ("drain", "gpu-a17", "button")
    assert silence["value"] == "gpu-a17"
    assert pick["type"] == "static_select" and pick["value"] is None
    assert [entry["value"] for entry in pick["options"]] == ["gpu-a17", "gpu-a18"]
    assert link["url"] == "https://grafana.example"
    assert all("block_id" in target and target["element"]["action_id"] for target in targets)


def test_targets_carry_block_ids_and_deduplicated_action_ids() -> None:
    blocks = (
        Message("b")
        .actions(button("A", "go", "1"), block_id="row")
        .actions(button("B", "go", "2"), block_id="row")
        .build()
        .blocks
    )
    targets = button_targets(blocks)
    assert [(t["block_id"], t["action_id"], t["value"]) for t in targets] == [
        ("row", "go", "1"),
        ("row#2", "go#2", "2"),
    ]


def test_select_shows_its_initial_choice() -> None:
    element = select("Pick", "pick", [("one", "1"), ("two", "2")], initial="2")
    output = render_terminal(Message("s").actions(element).build().blocks, color=False)
    assert output == "[1: two ▾]"


def test_text_is_shown_when_there_are_no_blocks() -> None:
    assert render_terminal([], "*hello* <@U1>", color=False) == "hello @U1"


def test_code_blocks_are_indented_and_kept_verbatim() -> None:
    text = "Log:\n```\n  x = *not bold* &lt;y&gt;\nnext\n```\nafter"
    assert render_mrkdwn(text, color=False).splitlines() == [
        "Log:",
        "      x = *not bold* <y>",
        "    next",
        "after",
    ]


def test_quotes_and_long_words_wrap_within_width() -> None:
    text = "&gt; quoted " + "word " * 40 + "\n" + "x" * 250
    lines = render_mrkdwn(text, color=False, width=60).splitlines()
    assert lines[0].startswith("│ quoted word")
    assert all(cells(line) <= 60 for line in lines)
    assert "".join(line for line in lines if line.startswith("x")) == "x" * 250


def test_random_messages_fit_in_100_columns_in_both_modes() -> None:
    rng = random.Random(7)
    alphabet = "ab cd *_~`<>&\n🐱é|@:"
    for _ in range(40):
        message = Message("r")
        for _ in range(rng.randint(1, 20)):
            word = "".join(rng.choices(alphabet, k=rng.randint(0, 600)))
            choice = rng.randrange(5)
            if choice == 0:
                message.section(word)
            elif choice == 1:
                message.fields([(word[:30], word)] * rng.randint(1, 4))
            elif choice == 2:
                message.context(word)
            elif choice == 3:
                message.header(word)
            else:
                message.actions(*[button(word[:20] or "b", f"b{i}") for i in range(6)])
        blocks = message.build().blocks
        plain = render_terminal(blocks, color=False)
        assert "\x1b" not in plain
        assert all(cells(line) <= 100 for line in plain.splitlines())
        coloured = render_terminal(blocks, color=True)
        assert all(cells(line) <= 100 for line in coloured.splitlines())
        assert len(NUMBERED.findall(plain)) == len(button_targets(blocks))


def test_modal_and_home_views() -> None:
    modal = Modal("Silence alert", callback_id="silence", submit="Silence")
    modal.section("Silence *XidErrors* on gpu-a17")
    modal.text_input("Reason", "reason", placeholder="why?", hint="Shown in Alertmanager")
    modal.select_input("Duration", "duration", [("1 h", "1h"), ("4 h", "4h")], initial="4h")
    modal.input("Notes", {"type": "plain_text_input", "action_id": "notes"}, optional=True)
    modal.actions(button("Preview", "preview"))
    output = render_view(modal.build(), color=False)
    assert output.splitlines() == [
        "Silence alert",
        "─────────────",
        "Silence XidErrors on gpu-a17",
        "Reason",
        "  [text box: why?]",
        "  · Shown in Alertmanager",
        "Duration",
        "  [4 h ▾]",
        "Notes (optional)",
        "  [text box]",
        "[1: Preview]",
        "[Cancel]  [Silence]",
    ]
    home = render_view(HomeTab().header("meowbot").section("hi").build(), color=False)
    assert home.splitlines()[:2] == ["Home", "────"]


def test_render_message_numbers_thread_replies_on() -> None:
    message = Message("many")
    for index in range(60):
        message.section(f"s{index}", accessory=button(f"b{index}", "press", str(index)))
    built = message.build()
    output = render_message(built, color=False)
    assert "↳ in the thread (1/1)" in output
    targets = message_targets(built)
    assert len(targets) == 60
    assert [t["number"] for t in targets] == list(range(1, 61))
    shown = [(int(n), label) for n, label in NUMBERED.findall(output)]
    assert shown == [(t["number"], t["text"]) for t in targets]
    assert [t["value"] for t in targets] == [str(index) for index in range(60)]


def test_rich_text_blocks_from_events() -> None:
    block = {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_section",
                "elements": [
                    {"type": "text", "text": "hi "},
                    {"type": "user", "user_id": "U1"},
                    {"type": "text", "text": " look", "style": {"bold": True}},
                    {"type": "link", "url": "https://x", "text": "here"},
                ],
            },
            {
                "type": "rich_text_list",
                "style": "bullet",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": "one"}]}
                ],
            },
            {
                "type": "rich_text_preformatted",
                "elements": [{"type": "text", "text": "code"}],
            },
        ],
    }
    assert render_terminal([block], color=False).splitlines() == [
        "hi @U1 lookhere (https://x)",
        "• one",
        "    code",
    ]
    assert render_terminal([{"type": "video"}], color=False) == "[video block]"


def test_list_items_wrap_with_a_hanging_indent() -> None:
    blocks = Message("l").lines(["word " * 30, "short"]).build().blocks
    lines = render_terminal(blocks, color=False, width=60).splitlines()
    assert lines[0].startswith("• word")
    assert lines[1].startswith("  word")
    assert lines[-1] == "• short"
