"""Questions in plain words through the real aiohttp server: signed Events API requests for a
mention and a DM, answered in the thread through the command table; a follow-up; an unsure
question's buttons; what the bot must not answer; Slack's retries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import hostlist
import pytest

from bot.app import create_bot
from bot.render.picks import ASK_PICK_ACTION
from bot.render.triage import DRAIN_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.e2e.conftest import Slack, bot_settings

CHANNEL = "C0GENERAL"


def posts(emu: SlackEmulator, channel: str | None = None) -> list[dict[str, Any]]:
    return [
        c.args
        for c in emu.calls_to("chat.postMessage")
        if c.ok and (channel is None or c.args.get("channel") == channel)
    ]


def mention(
    slack: Slack, text: str, *, user: str = "U0USER", thread: str | None = None
) -> dict[str, Any]:
    """The person's message in the channel (so its thread exists) and its app_mention event."""
    return slack.emulator.mention(CHANNEL, user, text, thread=thread)


def direct(slack: Slack, text: str, *, user: str = "U0USER", **extra: Any) -> dict[str, Any]:
    emu = slack.emulator
    ws = emu.workspace
    dm = ws.im_with(user)
    ts = ws.next_ts()
    ws.add_message(dm.id, ts=ts, text=text, user=user)
    event = {
        "type": "message",
        "channel": dm.id,
        "channel_type": "im",
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        **extra,
    }
    return emu.event_payload(event)


async def wait_posts(emu: SlackEmulator, count: int, timeout: float = 10.0) -> None:
    await emu.wait_for_call("chat.postMessage", count=count, timeout=timeout, ok=True)


def a_node(slack: Slack, at: int = 41) -> str:
    return str(slack.bot.deps.triage.inventory.names()[at])


async def test_a_mention_is_answered_in_its_thread_as_node_health_would(slack: Slack) -> None:
    emu = slack.emulator
    node = a_node(slack)
    payload = mention(slack, f"is {node} ok?")
    status, _, _ = await slack.event(payload)
    assert status == 200
    await wait_posts(emu, 1)
    answer = posts(emu, CHANNEL)[0]
    assert answer["thread_ts"] == payload["event"]["ts"]
    assert node in answer["text"]
    assert validate_blocks(answer["blocks"]) == []
    # In so many words: what was measured, and what was checked and found fine.
    assert "Confirmed" in json.dumps(answer["blocks"])
    assert "Checked and fine" in json.dumps(answer["blocks"])
    # The same answer /node-health gives: its verdict's words.
    await slack.command("/node-health", node)
    await emu.wait_for_responses(1)
    assert emu.responses[0][1]["text"] == answer["text"]


async def test_a_dm_is_answered_in_the_dm(slack: Slack) -> None:
    emu = slack.emulator
    node = a_node(slack, 7)
    payload = direct(slack, f"is {node} healthy?")
    assert (await slack.event(payload))[0] == 200
    await wait_posts(emu, 1)
    answer = posts(emu)[0]
    assert answer["channel"] == payload["event"]["channel"]
    assert node in answer["text"]


async def test_a_follow_up_reads_against_the_thread(slack: Slack) -> None:
    emu = slack.emulator
    node = a_node(slack, 41)
    first = mention(slack, f"is {node} ok?")
    await slack.event(first)
    await wait_posts(emu, 1)
    thread = first["event"]["ts"]
    await slack.event(mention(slack, "what about its neighbours?", thread=thread))
    await wait_posts(emu, 2)
    second = posts(emu, CHANNEL)[1]
    assert second["thread_ts"] == thread
    # Every other node under the same leaf switch, counted per verdict.
    place = slack.bot.deps.triage.inventory.place(node)
    assert place is not None
    near = [
        n
        for n in slack.bot.deps.triage.inventory.names()
        if (p := slack.bot.deps.triage.inventory.place(n)) and p.leaf_switch == place.leaf_switch
    ]
    assert str(len(near) - 1) in second["text"], second["text"]
    # "drain it": the Drain button, which the press's admin check still guards.
    before = len(posts(emu, CHANNEL))
    await slack.event(mention(slack, "drain it", thread=thread))
    await wait_posts(emu, before + 1)
    offer = posts(emu, CHANNEL)[-1]
    assert offer["thread_ts"] == thread
    assert "meowbot_drain_node" in json.dumps(offer["blocks"])
    assert node in offer["text"]
    scheduler = slack.bot.deps.triage.scheduler
    assert scheduler is not None
    assert not (await scheduler.nodes([node]))[node].draining  # never drained on a message


async def test_an_unsure_question_asks_back_with_buttons_and_a_press_answers(
    slack: Slack,
) -> None:
    emu = slack.emulator
    first = mention(slack, "is everything slow or is it just me")
    await slack.event(first)
    await wait_posts(emu, 1)
    question = posts(emu, CHANNEL)[0]
    assert question["thread_ts"] == first["event"]["ts"]
    blocks = json.dumps(question["blocks"])
    assert blocks.count(ASK_PICK_ACTION) >= 2, blocks
    posted = [m for m in emu.workspace.messages(CHANNEL) if m.get("blocks")][-1]
    press = emu.block_actions_payload(CHANNEL, posted["ts"], ASK_PICK_ACTION, user="U0USER")
    assert (await slack.interactive(press))[0] == 200
    await wait_posts(emu, 2)
    answer = posts(emu, CHANNEL)[1]
    assert answer["thread_ts"] == first["event"]["ts"]
    # "why my job is slow": bob's running job, or a choice of them, in the thread.
    assert answer["text"].startswith(await my_job_answer(slack, "bob")), answer["text"]


async def test_a_question_it_cannot_answer_gets_the_menu(slack: Slack) -> None:
    emu = slack.emulator
    await slack.event(direct(slack, "what's the weather in Paris?"))
    await wait_posts(emu, 1)
    menu = posts(emu)[0]
    assert "is gpu-0042 ok?" in json.dumps(menu["blocks"])
    assert "can't answer that one" in json.dumps(menu["blocks"])  # said, not silence


async def my_job_answer(slack: Slack, user: str) -> str:
    """How the answer to "my job" begins for `user`, from the simulated scheduler."""
    scheduler = slack.bot.deps.triage.scheduler
    assert scheduler is not None
    running = [j for j in await scheduler.jobs(user=user) if j.state.value == "running"]
    if len(running) > 1:
        return "Which of your jobs?"
    if running:
        return f"Your running job is `{running[0].job_id}`"
    if await scheduler.last_finished(user) is not None:
        return "You have no running job, so I am looking at the last one that finished"
    return "I could not find your jobs"


async def test_my_job_is_the_askers_running_job(slack: Slack) -> None:
    """None: said so; one: that one; several: a choice; none running: the last that ended."""
    emu = slack.emulator
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    names = slack.bot.deps.triage.inventory.names()

    async def ask() -> dict[str, Any]:
        before = len(posts(emu))
        await slack.event(direct(slack, "why is my job slow?"))  # bob (U0USER)
        await wait_posts(emu, before + 1)
        return posts(emu)[before]

    assert (await ask())["text"].startswith("I could not find your jobs")
    one = fleet.add_job(list(names[100:104]), user="bob")
    said = await ask()
    assert said["text"].startswith(f"Your running job is `{one.job_id}`"), said["text"]
    two = fleet.add_job(list(names[110:114]), user="bob")
    choice = await ask()
    assert choice["text"] == "Which of your jobs?"
    assert one.job_id in json.dumps(choice["blocks"]) and two.job_id in json.dumps(choice["blocks"])
    # Both preempted by alice's jobs a day ago: bob's last job that ended is looked at.
    later = datetime.now(UTC) - timedelta(days=1)
    fleet.add_job(list(names[100:104]), user="alice", start=later)
    fleet.add_job(list(names[110:114]), user="alice", start=later + timedelta(hours=1))
    ended = await ask()
    assert ended["text"].startswith("You have no running job"), ended["text"]
    assert two.job_id in ended["text"]


async def test_own_messages_edits_and_bot_posts_are_not_answered(slack: Slack) -> None:
    emu = slack.emulator
    ws = emu.workspace
    own = mention(slack, "is gpu-0001 ok?", user=ws.bot_user_id)
    own["event"]["bot_id"] = ws.bot_id
    statuses = [(await slack.event(own))[0]]
    edit = direct(slack, "is gpu-0001 ok?", subtype="message_changed")
    bot_post = direct(slack, "is gpu-0001 ok?", subtype="bot_message", bot_id="B0OTHER")
    statuses += [(await slack.event(edit))[0], (await slack.event(bot_post))[0]]
    channel_message = emu.event_payload(
        {"type": "message", "channel": CHANNEL, "channel_type": "channel", "user": "U0USER",
         "text": "is gpu-0001 ok?", "ts": ws.next_ts()}
    )  # fmt: skip
    statuses.append((await slack.event(channel_message))[0])
    assert statuses == [200, 200, 200, 200]
    await asyncio.sleep(0.5)
    assert posts(emu) == []


async def test_slack_retries_are_answered_once(slack: Slack) -> None:
    emu = slack.emulator
    node = a_node(slack, 3)
    asked = mention(slack, f"is {node} ok?")
    dm = direct(slack, f"is {node} ok?")
    for payload in (asked, dm):
        assert (await slack.event(payload))[0] == 200
        for retry in (1, 2):
            assert (await slack.event(payload, retry=retry))[0] == 200
    await wait_posts(emu, 2)
    await asyncio.sleep(0.5)
    assert len(posts(emu)) == 2


# --- a conversation is a thread ---------------------------------------------------------------


@pytest.fixture
async def admin_slack(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[Slack]:
    """The bot with ana (U0ADMIN) allowed to drain: bob (U0USER) is not."""
    bot = await create_bot(bot_settings(emulator, redis_url, MEOWBOT_ADMINS="U0ADMIN"))
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


async def ask_in(
    slack: Slack, payload: dict[str, Any], channel: str | None = None
) -> dict[str, Any]:
    """Sends a question's event and returns the bot's first post in answer."""
    emu = slack.emulator
    before = len(posts(emu, channel))
    assert (await slack.event(payload))[0] == 200
    await wait_posts(emu, len(posts(emu)) + 1)
    return posts(emu, channel)[before]


def neighbours(slack: Slack, node: str) -> str:
    """The other nodes under `node`'s leaf switch, as one hostlist."""
    inventory = slack.bot.deps.triage.inventory
    place = inventory.place(node)
    assert place is not None
    near = [
        n
        for n in inventory.names()
        if n != node and (p := inventory.place(n)) and p.leaf_switch == place.leaf_switch
    ]
    return str(hostlist.collect_hostlist(near))


async def command_text(slack: Slack, command: str, text: str) -> str:
    emu = slack.emulator
    before = len(emu.responses)
    await slack.command(command, text)
    await emu.wait_for_responses(before + 1)
    return str(emu.responses[-1][1]["text"])


async def test_the_readme_follow_ups_in_a_thread_and_a_new_mention_starts_afresh(
    admin_slack: Slack,
) -> None:
    slack, emu = admin_slack, admin_slack.emulator
    first = mention(slack, "any xid errors today?")
    answer = await ask_in(slack, first, CHANNEL)
    thread = first["event"]["ts"]
    assert answer["thread_ts"] == thread
    assert answer["text"] == await command_text(slack, "/hw-faults", "xid --since 24h")
    # "and yesterday?" in the thread: the thread's question over two days.
    later = await ask_in(slack, mention(slack, "and yesterday?", thread=thread), CHANNEL)
    assert later["thread_ts"] == thread
    assert later["text"] == await command_text(slack, "/hw-faults", "xid --since 2d")
    # The same words in a new top-level mention: nothing before them, so the menu.
    fresh = mention(slack, "and yesterday?")
    alone = await ask_in(slack, fresh, CHANNEL)
    assert alone["thread_ts"] == fresh["event"]["ts"]
    assert "is gpu-0042 ok?" in json.dumps(alone["blocks"])  # the menu's examples

    # A node's thread: its neighbours, then "drain it": the Drain button, behind the admin check.
    node = a_node(slack, 41)
    asked = mention(slack, f"is {node} ok?")
    await ask_in(slack, asked, CHANNEL)
    node_thread = asked["event"]["ts"]
    near = await ask_in(
        slack, mention(slack, "what about its neighbours?", thread=node_thread), CHANNEL
    )
    assert near["thread_ts"] == node_thread
    assert near["text"] == await command_text(slack, "/node-health", neighbours(slack, node))
    offer = await ask_in(slack, mention(slack, "drain it", thread=node_thread), CHANNEL)
    assert offer["thread_ts"] == node_thread and node in offer["text"]
    assert DRAIN_ACTION in json.dumps(offer["blocks"])
    # A top-level "drain it" names no node and has no thread before it: which node?
    which = await ask_in(slack, mention(slack, "drain it"), CHANNEL)
    assert which["text"].startswith("Drain which node?")
    assert DRAIN_ACTION not in json.dumps(which.get("blocks") or [])

    scheduler = slack.bot.deps.triage.scheduler
    assert scheduler is not None
    posted = [m for m in emu.workspace.messages(CHANNEL) if DRAIN_ACTION in json.dumps(m)][-1]
    # Bob may not drain: refused, nothing changes.
    before = len(emu.responses)
    press = emu.block_actions_payload(CHANNEL, posted["ts"], DRAIN_ACTION, user="U0USER")
    assert (await slack.interactive(press))[0] == 200
    await emu.wait_for_responses(before + 1)
    assert emu.responses[-1][1]["text"].startswith(":no_entry: Only the cluster admins")
    assert not (await scheduler.nodes([node]))[node].out_of_service
    # Ana may: the node drains.
    press = emu.block_actions_payload(CHANNEL, posted["ts"], DRAIN_ACTION, user="U0ADMIN")
    assert (await slack.interactive(press))[0] == 200
    await emu.wait_for_responses(before + 2)
    assert (await scheduler.nodes([node]))[node].out_of_service


async def test_a_dm_carries_its_last_question_only_into_a_follow_up(slack: Slack) -> None:
    emu = slack.emulator
    # A playground question, then an unrelated one: answered as itself, not as the playground.
    await ask_in(slack, direct(slack, "compare step 400 and 500 of tiny-zen on 'Once upon a time'"))
    unrelated = await ask_in(slack, direct(slack, "are there any hardware faults right now?"))
    assert unrelated["text"] == await command_text(slack, "/hw-faults", "")
    # A node, then "drain it" and "what about its neighbours?": follow-ups of it.
    node = a_node(slack, 41)
    health = await ask_in(slack, direct(slack, f"is {node} ok?"))
    offer = await ask_in(slack, direct(slack, "drain it"))
    assert node in offer["text"] and DRAIN_ACTION in json.dumps(offer["blocks"])
    # A reply in the thread of the bot's answer goes on from it, and is answered there.
    dm = health["channel"]
    answer_ts = next(m["ts"] for m in emu.workspace.messages(dm) if m.get("text") == health["text"])
    reply = direct(slack, "what about its neighbours?", thread_ts=answer_ts)
    near = await ask_in(slack, reply)
    assert near["thread_ts"] == answer_ts
    assert near["text"] == await command_text(slack, "/node-health", neighbours(slack, node))
    # The thread of a message nothing was kept for (a slow answer's own post, say) reads as
    # the DM's top: a follow-up of the last question there, else afresh.
    stray = emu.workspace.next_ts()
    emu.workspace.add_message(dm, ts=stray, text="looking at…", user=emu.workspace.bot_user_id)
    again = await ask_in(slack, direct(slack, "drain it", thread_ts=stray))
    assert again["thread_ts"] == stray and node in again["text"]


async def test_a_cause_naming_a_kernel_and_a_rate_is_asked_of_what_precedes_the_fault(
    slack: Slack,
) -> None:
    """The question /hw-faults why exists for, asked alone in plain words."""
    emu = slack.emulator
    asked = mention(slack, "Do I cause a kernel panic when I send more than 30 Gbps over the NIC?")
    first = await ask_in(slack, asked, CHANNEL)
    assert first["thread_ts"] == asked["event"]["ts"]
    assert "Looking at what preceded the unexpected reboots" in first["text"], first["text"]
    await emu.wait_for_call("chat.postMessage", count=2, timeout=60)
    answer = json.dumps(emu.calls_to("chat.update")[-1].args["blocks"])
    assert "unexpected reboots followed *network transmit (eth0) above 3" in answer
