"""/hw-faults why through the real server, signed requests, on the simulated fleet's week (its
unexpected reboots hide a precursor: the Ethernet NIC past 30 Gbps before most of them): "looking
at…" posted and edited, then the answer with the counts, the detail with the alert rule in its
thread, the chart uploaded there; bad input answered privately in one sentence, nothing posted."""

from __future__ import annotations

import json
from typing import Any

from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.e2e.conftest import Slack

CHANNEL = "C0GENERAL"


def shown(emulator: SlackEmulator) -> list[str]:
    return [json.dumps(body) for _url, body in emulator.responses]


async def test_the_hidden_precursor_is_the_answer_with_its_rule_and_chart(
    slack: Slack, emulator: SlackEmulator
) -> None:
    status, _, _ = await slack.command("/hw-faults", "why unexpected_reboot --since 7d")
    assert status == 200
    detail = await emulator.wait_for_call("chat.postMessage", count=2, timeout=60)
    first = emulator.calls_to("chat.postMessage")[0]
    assert first.args["channel"] == CHANNEL
    assert "Looking at what preceded the unexpected reboots of the last 7 d" in first.args["text"]
    answer: dict[str, Any] = emulator.calls_to("chat.update")[-1].args
    text = json.dumps(answer["blocks"])
    assert "What preceded the unexpected reboots" in text
    assert "unexpected reboots followed *network transmit (eth0) above 3" in text
    assert "ordinary windows:" in text and "No difference:" in text
    assert validate_blocks(answer["blocks"]) == []
    assert detail.args["thread_ts"] == first.result["ts"]
    thread = json.dumps(detail.args["blocks"])
    assert "alert: UnexpectedRebootPrecursor" in thread
    assert "node_network_transmit_bytes_total" in thread
    upload = await emulator.wait_for_call("files.completeUploadExternal", timeout=30)
    assert upload.ok
    assert any(png.startswith(b"\x89PNG") for png in emulator.uploads.values())


async def test_a_kind_with_nothing_before_it_says_no_candidate_separates(
    slack: Slack, emulator: SlackEmulator
) -> None:
    await slack.command("/hw-faults", "why xid")
    await emulator.wait_for_call("chat.postMessage", count=2, timeout=60)
    answer = json.dumps(emulator.calls_to("chat.update")[-1].args["blocks"])
    assert "No candidate separates" in answer
    assert not emulator.uploads


async def test_bad_input_is_one_private_sentence_and_nothing_is_posted(
    slack: Slack, emulator: SlackEmulator
) -> None:
    asks = [
        ("why", "Name a kind of fault"),
        ("why temperature", "`temperature` names several kinds I can look back at"),
        ("why xid --since 90d", "`--since` must be between 1 h and 14 d"),
        ("why xid gpu-[0001-", "That hostlist is malformed"),
        ("why xid gpu-9999", "I don't know a node `gpu-9999`"),
    ]
    # Each answered before the next is asked: two commands' answers may interleave.
    for i, (text, _) in enumerate(asks):
        await slack.command("/hw-faults", text)
        await emulator.wait_for_responses(i + 1, timeout=20)
    said = shown(emulator)
    assert len(said) == len(asks)
    for (_, sentence), got in zip(asks, said, strict=True):
        assert sentence in got
    assert emulator.calls_to("chat.postMessage") == []


async def test_the_help_tells_of_why(slack: Slack, emulator: SlackEmulator) -> None:
    await slack.command("/hw-faults", "help")
    await emulator.wait_for_responses(1)
    (said,) = shown(emulator)
    assert "/hw-faults why unexpected_reboot" in said and "`ib_link_down`" in said
