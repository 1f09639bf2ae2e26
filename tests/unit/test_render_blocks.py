"""The Block Kit builders keep Slack's limits for any input, and escape what must be escaped.

`check_message` / `check_view` below restate Slack's limits on their own (they do not import
`bot.render.limits`), so a wrong constant there is caught here.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from bot import mrkdwn
from bot.render.blocks import (
    NO_OPTION_VALUE,
    HomeTab,
    Message,
    Modal,
    action_id_pattern,
    base_action_id,
    button,
    confirm_dialog,
    error,
    image_element,
    option,
    select,
    success,
    usage,
    working,
)
from bot.slack_message import SlackMessage

# --- an independent checker ------------------------------------------------------------

SLACK = {
    "message_blocks": 50,
    "view_blocks": 100,
    "message_text": 40_000,
    "blocks_text": 12_000,
    "section_text": 3000,
    "fields": 10,
    "field_text": 2000,
    "header": 150,
    "context_elements": 10,
    "actions_elements": 25,
    "button_text": 75,
    "button_value": 2000,
    "url": 3000,
    "id": 255,
    "options": 100,
    "option_text": 75,
    "option_value": 150,
    "placeholder": 150,
    "confirm_title": 100,
    "confirm_text": 300,
    "confirm_button": 30,
    "view_title": 24,
    "private_metadata": 3000,
    "input_label": 2000,
}


def slack_len(text: str) -> int:
    """UTF-16 code units: the strictest reading of Slack's "characters"."""
    return len(text.encode("utf-16-le")) // 2


def all_text(node: Any) -> int:
    if isinstance(node, dict):
        if node.get("type") in ("plain_text", "mrkdwn"):
            return slack_len(node["text"])
        return sum(all_text(value) for value in node.values())
    if isinstance(node, list):
        return sum(all_text(value) for value in node)
    return 0


def check_text(obj: Any, limit: int, *, kinds: tuple[str, ...] = ("plain_text", "mrkdwn")) -> None:
    assert isinstance(obj, dict), obj
    assert obj["type"] in kinds, obj
    assert isinstance(obj["text"], str)
    assert obj["text"].strip(), f"empty text object {obj}"
    assert slack_len(obj["text"]) <= limit, (slack_len(obj["text"]), limit)


def check_confirm(dialog: dict[str, Any]) -> None:
    check_text(dialog["title"], SLACK["confirm_title"], kinds=("plain_text",))
    check_text(dialog["text"], SLACK["confirm_text"])
    check_text(dialog["confirm"], SLACK["confirm_button"], kinds=("plain_text",))
    check_text(dialog["deny"], SLACK["confirm_button"], kinds=("plain_text",))


def check_element(element: dict[str, Any], action_ids: list[str]) -> None:
    kind = element["type"]
    if "action_id" in element:
        assert 0 < len(element["action_id"]) <= SLACK["id"]
        action_ids.append(element["action_id"])
    if kind == "button":
        check_text(element["text"], SLACK["button_text"], kinds=("plain_text",))
        if "value" in element:
            assert 0 < len(element["value"]) <= SLACK["button_value"]
        if "url" in element:
            assert len(element["url"]) <= SLACK["url"]
        assert element.get("style") in (None, "primary", "danger")
    if kind == "static_select":
        assert 1 <= len(element["options"]) <= SLACK["options"]
        check_text(element["placeholder"], SLACK["placeholder"], kinds=("plain_text",))
        values = [entry["value"] for entry in element["options"]]
        assert len(values) == len(set(values))
        for entry in element["options"]:
            check_text(entry["text"], SLACK["option_text"], kinds=("plain_text",))
            assert 0 < len(entry["value"]) <= SLACK["option_value"]
        if "initial_option" in element:
            assert element["initial_option"] in element["options"]
    if kind == "image":
        assert element["alt_text"].strip()
        assert len(element["image_url"]) <= SLACK["url"]
    if kind == "plain_text_input":
        assert element["max_length"] <= 3000
        assert len(element.get("initial_value", "")) <= element["max_length"]
    if "confirm" in element:
        check_confirm(element["confirm"])


def check_blocks(blocks: list[dict[str, Any]], max_blocks: int) -> None:
    assert 1 <= len(blocks) <= max_blocks, len(blocks)
    block_ids = [block["block_id"] for block in blocks if "block_id" in block]
    assert len(block_ids) == len(set(block_ids)), block_ids
    assert all(0 < len(block_id) <= SLACK["id"] for block_id in block_ids)
    action_ids: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "header":
            check_text(block["text"], SLACK["header"], kinds=("plain_text",))
        elif kind == "section":
            assert "text" in block or "fields" in block, block
            if "text" in block:
                check_text(block["text"], SLACK["section_text"])
            if "fields" in block:
                assert 1 <= len(block["fields"]) <= SLACK["fields"]
                for item in block["fields"]:
                    check_text(item, SLACK["field_text"])
            if "accessory" in block:
                check_element(block["accessory"], action_ids)
        elif kind == "context":
            assert 1 <= len(block["elements"]) <= SLACK["context_elements"]
            for element in block["elements"]:
                if element["type"] == "image":
                    check_element(element, action_ids)
                else:
                    check_text(element, SLACK["field_text"])
        elif kind == "actions":
            assert 1 <= len(block["elements"]) <= SLACK["actions_elements"]
            for element in block["elements"]:
                assert element["type"] != "image"
                check_element(element, action_ids)
        elif kind == "input":
            check_text(block["label"], SLACK["input_label"], kinds=("plain_text",))
            check_element(block["element"], action_ids)
        elif kind == "image":
            check_element(block, action_ids)
        else:
            assert kind == "divider", kind
    assert len(action_ids) == len(set(action_ids)), action_ids


def check_message(message: SlackMessage) -> None:
    assert message.text.strip(), "fallback text must always be set"
    assert slack_len(message.text) <= SLACK["message_text"]
    for blocks in [message.blocks, *message.overflow]:
        check_blocks(blocks, SLACK["message_blocks"])
        assert all_text(blocks) < SLACK["blocks_text"], all_text(blocks)
    for reply in message.replies():
        assert reply.text.strip()
        assert slack_len(reply.text) <= SLACK["message_text"]


def check_view(view: dict[str, Any]) -> None:
    check_blocks(view["blocks"], SLACK["view_blocks"])
    assert view["type"] in ("modal", "home")
    if view["type"] == "modal":
        check_text(view["title"], SLACK["view_title"], kinds=("plain_text",))
        for key in ("submit", "close"):
            if key in view:
                check_text(view[key], SLACK["view_title"], kinds=("plain_text",))
        if any(block["type"] == "input" for block in view["blocks"]):
            assert "submit" in view
    assert len(view.get("private_metadata", "")) <= SLACK["private_metadata"]
    assert len(view.get("callback_id", "")) <= SLACK["id"]


def all_blocks(message: SlackMessage) -> list[dict[str, Any]]:
    return [block for blocks in [message.blocks, *message.overflow] for block in blocks]


def section_texts(message: SlackMessage) -> list[str]:
    blocks = all_blocks(message)
    return [b["text"]["text"] for b in blocks if b["type"] == "section" and "text" in b]


# --- limits under adversarial input -----------------------------------------------------


def test_sixty_sections_overflow_into_the_thread() -> None:
    message = Message("sixty").header("Many")
    for index in range(60):
        message.section(f"section {index}")
    built = message.build()
    check_message(built)
    assert len(built.blocks) == 50
    notice = built.blocks[-1]
    assert notice["type"] == "context"
    assert "more in the thread" in notice["elements"][0]["text"]
    shown = [text for text in section_texts(built)]
    assert shown == [f"section {index}" for index in range(60)]  # nothing lost, order kept
    hidden = 60 - sum(1 for b in built.blocks if b["type"] == "section")
    assert f"and {hidden} more" in notice["elements"][0]["text"]
    assert built.overflow and all(len(chunk) <= 50 for chunk in built.overflow)


def test_a_few_blocks_do_not_overflow() -> None:
    built = Message("few").header("Title").section("one").divider().section("two").build()
    check_message(built)
    assert built.overflow == []
    assert [b["type"] for b in built.blocks] == ["header", "section", "divider", "section"]


def test_long_section_is_cut_visibly() -> None:
    built = Message("long").section("x" * 5000).build()
    check_message(built)
    text = built.blocks[0]["text"]["text"]
    assert len(text) == 3000
    assert text.endswith("…")


def test_thirty_fields_become_three_sections() -> None:
    pairs = [(f"label {index}", f"value {index}") for index in range(30)]
    built = Message("fields").fields(pairs).build()
    check_message(built)
    sections = [b for b in built.blocks if b["type"] == "section"]
    assert [len(s["fields"]) for s in sections] == [10, 10, 10]
    assert sections[0]["fields"][0]["text"] == "*label 0*\nvalue 0"


def test_section_with_thirty_raw_fields_and_oversized_values() -> None:
    built = Message("f").section("intro", fields=["y" * 2500] * 30).build()
    check_message(built)
    fields = [f for b in all_blocks(built) for f in b.get("fields", [])]
    assert len(fields) == 30
    assert all(f["text"].endswith("…") for f in fields)


def test_two_hundred_options_are_cut_to_one_hundred_and_said_so() -> None:
    options = [(f"gpu-{index:04d}", f"gpu-{index:04d}") for index in range(200)]
    element = select("Pick a node", "pick_node", options, initial="gpu-0150")
    assert len(element["options"]) == 100
    assert "100 of 200" in element["placeholder"]["text"]
    assert "initial_option" not in element  # the initial one was not kept
    built = Message("select").actions(element).build()
    check_message(built)


def test_select_keeps_an_initial_option_and_copes_with_nothing_to_choose() -> None:
    element = select("Pick", "pick", [("a", "1"), ("b", "2"), ("again", "1")], initial="2")
    assert element["initial_option"]["value"] == "2"
    assert [entry["value"] for entry in element["options"]] == ["1", "2"]
    empty = select("Pick", "pick", [])
    assert empty["options"][0]["value"] == NO_OPTION_VALUE
    check_message(Message("s").actions(element, empty).build())


def test_long_header_is_cut_to_150() -> None:
    built = Message("h").header("h" * 200).build()
    check_message(built)
    text = built.blocks[0]["text"]["text"]
    assert len(text) == 150
    assert text.endswith("…")


def test_header_is_one_line_and_empty_one_is_left_out() -> None:
    built = Message("h").header("two\nlines").header("   ").section("body").build()
    assert built.blocks[0]["text"]["text"] == "two lines"
    assert [b["type"] for b in built.blocks] == ["header", "section"]


def test_duplicate_action_ids_are_made_unique_and_still_routable() -> None:
    message = Message("dup")
    message.actions(button("Drain", "drain", "a"), button("Drain", "drain", "b"))
    message.section("more", accessory=button("Drain", "drain", "c"))
    message.actions(select("Pick", "drain", [("x", "x")]))
    built = message.build()
    check_message(built)
    ids = [b["action_id"] for b in built.blocks[0]["elements"]]
    ids += [built.blocks[1]["accessory"]["action_id"], built.blocks[2]["elements"][0]["action_id"]]
    assert ids[0] == "drain"
    assert len(set(ids)) == 4
    pattern = action_id_pattern("drain")
    assert all(pattern.match(action_id) for action_id in ids)
    assert not pattern.match("drain_node")
    assert {base_action_id(action_id) for action_id in ids} == {"drain"}


def test_duplicate_block_ids_are_made_unique() -> None:
    built = (
        Message("ids")
        .section("a", block_id="node")
        .section("b", block_id="node")
        .fields([(str(i), "v") for i in range(25)], block_id="node")
        .build()
    )
    check_message(built)


def test_twenty_thousand_characters_overflow_on_text_not_blocks() -> None:
    message = Message("big")
    for index in range(10):
        message.section(f"{index} " + "z" * 1998)
    built = message.build()
    check_message(built)
    assert len(built.blocks) < 50
    assert all_text(built.blocks) <= 11_000
    assert built.overflow
    assert "more in the thread" in built.blocks[-1]["elements"][0]["text"]
    starts = [text.split(" ")[0] for text in section_texts(built)]
    assert starts == [str(index) for index in range(10)]


def test_one_block_over_the_text_budget_is_split() -> None:
    built = Message("wide").section("t" * 3000, fields=["f" * 2000] * 10).build()
    check_message(built)
    fields = [f for b in all_blocks(built) for f in b.get("fields", [])]
    assert len(fields) == 10


def test_many_buttons_and_context_items_are_chunked() -> None:
    buttons = [button(f"b{index}" * 40, f"b{index}", "v" * 2000) for index in range(30)]
    built = Message("b").actions(*buttons).context(*[f"c{index}" for index in range(15)]).build()
    check_message(built)
    actions = [b for b in all_blocks(built) if b["type"] == "actions"]
    assert sum(len(b["elements"]) for b in actions) == 30
    contexts = [b for b in all_blocks(built) if b["type"] == "context"]
    assert [len(b["elements"]) for b in contexts] == [10, 5]


def test_button_label_and_confirm_dialog_are_clamped() -> None:
    dialog = confirm_dialog("t" * 200, "x" * 400, confirm="c" * 40, deny="d" * 40)
    element = button("L" * 100, "go", style="danger", confirm=dialog)
    assert len(element["text"]["text"]) == 75
    check_message(Message("b").actions(element).build())


def test_identifiers_and_values_are_never_cut_silently() -> None:
    with pytest.raises(ValueError):
        button("ok", "a" * 256)
    with pytest.raises(ValueError):
        button("ok", "go", "v" * 2001)
    with pytest.raises(ValueError):
        option("ok", "v" * 151)
    with pytest.raises(ValueError):
        button("ok", "go", style="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Modal("t", private_metadata="m" * 3001)
    with pytest.raises(ValueError):
        Message("x").section("a", block_id="b" * 256)


def test_hand_made_accessory_is_clamped() -> None:
    accessory: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": "x" * 300},
        "action_id": "raw",
    }
    built = Message("raw").section("text", accessory=accessory).build()
    check_message(built)
    assert accessory["text"]["text"] == "x" * 300  # the caller's dict is not changed
    with pytest.raises(ValueError):
        Message("raw").actions(image_element("https://x/y.png", "alt"))


def test_accessory_without_text_is_not_lost() -> None:
    built = Message("only a button").section("", accessory=button("Go", "go")).build()
    check_message(built)
    assert built.blocks[0]["type"] == "actions"


def test_lines_show_and_more_with_a_hint() -> None:
    items = [f"`gpu-{index:04d}` xid 79" for index in range(40)]
    built = Message("faults").lines(items, max_items=3, more_hint="`/hw-faults --all`").build()
    check_message(built)
    assert built.blocks[0]["text"]["text"].count("\n") == 2
    assert built.blocks[-1]["elements"][0]["text"] == "…and 37 more — `/hw-faults --all`"


def test_thousands_of_lines_stay_within_every_limit_and_lose_nothing() -> None:
    items = [f"line {index} " + "w" * (index % 300) for index in range(2000)]
    built = Message("lines").lines(items).build()
    check_message(built)
    shown = "\n".join(section_texts(built)).split("\n")
    assert [line.split(" ")[2] for line in shown] == [str(index) for index in range(2000)]


def test_fallback_text_is_always_set_and_bounded() -> None:
    assert Message("").header("From the header").build().text == "From the header"
    assert Message("").build().text.strip()
    assert len(Message("t" * 50_000).build().text) <= 40_000
    text_only = Message("just text").build()
    check_message(text_only)
    assert text_only.blocks[0]["text"]["text"] == "just text"


def test_emoji_are_counted_strictly_and_never_split() -> None:
    built = Message("cats").section("🐱" * 3000).section("👩\u200d💻" * 2000).build()
    check_message(built)
    for text in section_texts(built):
        body = text.removesuffix("…")
        assert not body.endswith("\u200d")
        assert body.count("👩") == body.count("💻")


def test_random_messages_keep_every_limit() -> None:
    rng = random.Random(20240601)
    alphabet = "abc <>&*_`~\n🐱👩\u200d💻@here é"
    pool = "".join(rng.choices(alphabet, k=100_000))

    def words(most: int) -> str:
        start = rng.randrange(len(pool) - most)
        return pool[start : start + rng.randint(0, most)]

    for _ in range(60):
        message = Message(words(50))
        for _ in range(rng.randint(0, 80)):
            word = words(4000)
            step = rng.randrange(8)
            if step == 0:
                message.header(word)
            elif step == 1:
                message.section(word, fields=[word[:2500]] * rng.randint(0, 12))
            elif step == 2:
                message.fields([(word[:50], word)] * rng.randint(0, 25))
            elif step == 3:
                message.context(*[word[:2500]] * rng.randint(0, 14))
            elif step == 4:
                message.divider()
            elif step == 5:
                message.actions(*[button(word[:100], "act", word[:1000]) for _ in range(30)])
            elif step == 6:
                message.lines(word.split("\n"), max_items=rng.choice([None, 5]))
            else:
                message.code(word, tail=rng.random() < 0.5)
        check_message(message.build())


# --- modal and home tab -----------------------------------------------------------------


def test_modal_title_and_buttons_are_cut_to_24() -> None:
    modal = Modal("A title much longer than Slack allows", callback_id="cb", submit="S" * 40)
    modal.text_input("Reason", "reason", initial="r" * 5000, max_length=500)
    view = modal.build()
    check_view(view)
    assert len(view["title"]["text"]) == 24
    assert view["blocks"][0]["block_id"] == "reason"  # state lookups are predictable
    assert len(view["blocks"][0]["element"]["initial_value"]) == 500


def test_modal_with_inputs_always_has_a_submit_button() -> None:
    view = Modal("Pick").select_input("Node", "node", [("a", "a")]).build()
    check_view(view)
    assert view["submit"]["text"] == "Submit"


def test_modal_and_home_keep_100_blocks() -> None:
    modal = Modal("Many", callback_id="many")
    home = HomeTab()
    for index in range(150):
        modal.section(f"s{index}")
        home.section(f"s{index}")
    for view in (modal.build(), home.build()):
        check_view(view)
        assert len(view["blocks"]) == 100
        assert "and 51 more" in view["blocks"][-1]["elements"][0]["text"]
    assert home.build()["type"] == "home"


def test_empty_views_are_still_valid() -> None:
    check_view(Modal("").build())
    check_view(HomeTab().build())


# --- ready-made messages -----------------------------------------------------------------


def test_error_success_working_and_usage() -> None:
    failed = error("Prometheus at http://prom:9090 did not answer within 5 s.")
    check_message(failed)
    assert failed.blocks[0]["text"]["text"].startswith(":warning: ")
    assert failed.text == "Prometheus at http://prom:9090 did not answer within 5 s."
    check_message(success("Drained gpu-a17."))
    placeholder = working("Looking at gpu-a17…")
    check_message(placeholder)
    assert placeholder.blocks[0]["type"] == "context"
    helped = usage(
        "/node-health",
        ["`/node-health gpu-0042`: one node", "`/node-health help`"],
        "Is this node fit to run work?",
    )
    check_message(helped)
    assert "/node-health" in helped.text
    listed = helped.blocks[1]["text"]["text"]  # usage lines are mrkdwn, one bullet each
    assert listed.splitlines() == ["• `/node-health gpu-0042`: one node", "• `/node-health help`"]


def test_to_dict_and_replies() -> None:
    message = Message("report")
    for index in range(70):
        message.section(f"s{index}")
    built = message.build()
    assert built.to_dict() == {"text": "report", "blocks": built.blocks}
    replies = built.replies()
    assert len(replies) == len(built.overflow)
    assert replies[0].text == f"report (continued 1/{len(replies)})"
    assert all(reply.overflow == [] for reply in replies)


def test_build_does_not_consume_the_builder() -> None:
    message = Message("twice").actions(button("a", "a"), button("b", "a"))
    assert message.build() == message.build()


# --- mrkdwn -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    ["<!channel> wake up", "<!here>", "<@U1> look", "<http://x|y>", "<!subteam^S1|@ops>"],
)
def test_escape_neutralises_mentions_and_links(raw: str) -> None:
    escaped = mrkdwn.escape(raw)
    assert "<" not in escaped and ">" not in escaped
    assert re.search(r"<[!@#]", escaped) is None


@pytest.mark.parametrize("word", ["@here", "@channel", "@everyone", "@alice"])
def test_escape_neutralises_plain_broadcast_words(word: str) -> None:
    escaped = mrkdwn.escape(f"ping {word}!")
    assert word not in escaped
    assert escaped.replace(mrkdwn.WORD_JOINER, "") == f"ping {word}!"


def test_escape_leaves_addresses_and_escapes_ampersands() -> None:
    assert mrkdwn.escape("ops@example.com") == "ops@example.com"
    assert mrkdwn.escape("a & b") == "a &amp; b"


def test_truncate_marks_the_cut_and_respects_markup() -> None:
    assert mrkdwn.truncate("short", 10) == "short"
    assert mrkdwn.truncate("abcdefghij", 5) == "abcd…"
    cut = mrkdwn.truncate("see x &amp; y", 10)
    assert cut == "see x…"  # "&amp;" is kept whole or not at all
    link = mrkdwn.truncate("go <https://example.com/long/path|the dashboard> now", 30)
    assert link == "go…"
    fenced = mrkdwn.truncate("```\n" + "log line\n" * 100 + "```", 60, mrkdwn.TRUNCATED)
    assert len(fenced) <= 60 and fenced.endswith("```") and fenced.count("```") == 2
    assert mrkdwn.truncate("🇩🇪🇫🇷", 7) == "🇩🇪…"  # a flag is two indicators, never one
    assert mrkdwn.truncate("anything", 0) == ""
    assert mrkdwn.and_more(37) == "…and 37 more"


def test_code_helpers() -> None:
    assert mrkdwn.code("a`b <@U1>") == "`a\u02cbb &lt;@\u2060U1&gt;`"
    block = mrkdwn.code_block("x" * 5000, limit=3000)
    assert len(block) <= 3000 and block.startswith("```\n") and block.endswith("\n```")
    tail = mrkdwn.code_block("\n".join(f"line {i}" for i in range(1000)), limit=200, tail=True)
    assert len(tail) <= 200 and "line 999" in tail and "line 0\n" not in tail
    assert mrkdwn.code_block("a ``` b").count("```") == 2
    assert mrkdwn.link("https://x/?a=1&b=2", "<label>") == "<https://x/?a=1&amp;b=2|&lt;label&gt;>"
    assert mrkdwn.user_mention("U123") == "<@U123>"
    assert "<" not in mrkdwn.user_mention("<!channel>")


def test_hand_made_menus_are_clamped_to_their_own_limits() -> None:
    options = [{"text": {"type": "plain_text", "text": f"o{i}"}, "value": str(i)} for i in range(8)]
    overflow = {"type": "overflow", "action_id": "more", "options": options}
    picker = {
        "type": "static_select",
        "action_id": "pick",
        "placeholder": {"type": "plain_text", "text": "p" * 200},
        "options": options * 30,
        "initial_option": options[0],
    }
    built = Message("menus").actions(overflow, picker).build()
    elements = built.blocks[0]["elements"]
    assert len(elements[0]["options"]) == 5
    assert len(elements[1]["options"]) == 8  # duplicate values dropped
    assert len(elements[1]["placeholder"]["text"]) == 150
    assert elements[1]["initial_option"] == elements[1]["options"][0]
    assert elements[1]["initial_option"]["value"] == "0"
    check_message(built)
    many = [{"text": {"type": "plain_text", "text": "x"}, "value": str(i)} for i in range(300)]
    big = {
        "type": "static_select",
        "action_id": "big",
        "options": many,
        "initial_option": many[250],
        "placeholder": {"type": "plain_text", "text": "p"},
    }
    element = Message("big").actions(big).build().blocks[0]["elements"][0]
    assert len(element["options"]) == 100 and "initial_option" not in element
