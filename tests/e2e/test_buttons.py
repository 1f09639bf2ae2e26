"""Every button, select and form the bot shows, pressed and submitted as Slack would.

The bot (its real aiohttp server, real Redis, the simulated fleet and its scheduler, real
checkpoints behind a real server) is driven into every kind of message it sends: slash command
answers, an alert group of several nodes, the /job-slow picker and answers, the playground,
App Home and its palette. A crawler then presses every interactive element of every version of
every message and view (the second Drain of an answer too, whose id the renderer suffixed
`#2`), submits every modal, and keeps going through what those answers show, until nothing new
appears. Each press and submission must be acked (never Bolt's 404 "unhandled request") and
answered: something the person sees (a reply, an edit, a form) must follow.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.models import FaultKind
from bot.render.alerts import ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION, ALERT_RESUME_ANYWAY_ACTION
from bot.render.blocks import base_action_id
from bot.render.jobslow import PICK_ACTION
from bot.render.palette import PALETTE_COMMAND
from bot.render.triage import DRAIN_ACTION, RESUME_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.e2e.test_alerts import am_alert, leaf_nodes, webhook

CHANNEL = "C0GENERAL"
ALERTS = "C0ALERTS"
TOKEN = "e2e-webhook-token"
USER = "U0ADMIN"  # ana: an admin, so presses do what they say rather than all being refused
# Methods through which the bot shows someone something.
SHOWS = {
    "chat.postMessage",
    "chat.update",
    "chat.postEphemeral",
    "chat.delete",
    "views.open",
    "views.update",
    "views.push",
    "views.publish",
    "files.completeUploadExternal",
}
# What a person would type in a form's empty text fields.
SAMPLES = {"prompt": "Once upon a time", "hours": "2"}
# Selects whose every option is a different path through the bot (the palette's commands).
EVERY_OPTION = {PALETTE_COMMAND}
MAX_PRESSES = 400


@dataclass
class Surface:
    """One version of something on screen: a message (stored, edited, ephemeral) or a view."""

    kind: str  # "message", "ephemeral", "view", "home"
    where: str  # channel id, or view id
    blocks: list[dict[str, Any]]
    ts: str = ""
    view: dict[str, Any] | None = None


@dataclass
class Crawl:
    slack: Slack
    pressed: set[tuple[str, str, str, str]] = field(default_factory=set)
    submitted: set[tuple[str, str]] = field(default_factory=set)
    ids_pressed: set[str] = field(default_factory=set)  # action ids as sent, suffixes and all
    callbacks_submitted: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    presses: int = 0

    @property
    def emu(self) -> SlackEmulator:
        return self.slack.emulator

    def shown(self) -> int:
        calls = sum(1 for c in self.emu.calls if c.method in SHOWS and c.ok)
        return calls + len(self.emu.responses)

    async def settle(self, quiet_s: float = 0.3, timeout_s: float = 90) -> None:
        """Until the bot's work after its acks has ended and it has shown nothing new for
        `quiet_s`: a streaming playground answer or a notifier's edit then cannot pass for the
        answer to the next press."""
        inflight = self.slack.bot.deps.inflight
        deadline = time.monotonic() + timeout_s
        last, since = self.shown(), time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            now = self.shown()
            if now != last or inflight.count or inflight.acking:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
        raise TimeoutError("the bot never went quiet")

    async def answered(self, before: int, timeout_s: float = 30) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.shown() > before:
                return True
            await asyncio.sleep(0.05)
        return False

    # what is on screen --------------------------------------------------------------------

    def surfaces(self) -> list[Surface]:
        emu = self.emu
        out: list[Surface] = []
        for channel in list(emu.workspace.channels):
            for msg in emu.messages(channel):
                out.append(Surface("message", channel, msg.get("blocks") or [], ts=msg["ts"]))
        # Every version the bot sent, not only the last: a person presses what their client
        # shows while the message is being edited (a streaming answer's Cancel).
        for call in emu.calls:
            if not call.ok or call.method not in {"chat.postMessage", "chat.update"}:
                continue
            blocks = call.args.get("blocks")
            if isinstance(blocks, str):
                blocks = json.loads(blocks)
            channel = str(call.args.get("channel", ""))
            if channel.startswith("U"):
                channel = emu.workspace.im_with(channel).id
            # A posted version's ts is the stored message's; the handlers read the value, so
            # any ts of the channel serves.
            ts = str(call.args.get("ts") or "1.000001")
            out.append(Surface("message", channel, blocks or [], ts=ts))
        for i, (_url, body) in enumerate(emu.responses):
            out.append(Surface("ephemeral", str(i), body.get("blocks") or []))
        for e in emu.ephemerals:  # chat.postEphemeral: answers to a form, which has no reply url
            if e.get("via") == "chat.postEphemeral":
                out.append(Surface("message", e["channel"], e.get("blocks") or [], ts=e["ts"]))
        for view in list(emu.views.values()):
            kind = "home" if view.get("type") == "home" else "view"
            out.append(Surface(kind, view["id"], view.get("blocks") or [], view=view))
        return out

    # pressing -----------------------------------------------------------------------------

    def pressables(self, s: Surface) -> list[tuple[dict[str, Any], dict[str, Any], Any]]:
        """(block, element, option or None) for every element a press of which Slack sends."""
        found = []
        for block in s.blocks:
            elements: list[Any] = []
            if block.get("type") == "actions":
                elements = list(block.get("elements") or [])
            elif block.get("type") == "section" and isinstance(block.get("accessory"), dict):
                elements = [block["accessory"]]
            elif block.get("type") == "input" and block.get("dispatch_action"):
                elements = [block["element"]]
            for el in elements:
                if not isinstance(el, dict) or "action_id" not in el:
                    continue
                options = el.get("options") or [
                    o for g in el.get("option_groups") or [] for o in g.get("options", [])
                ]
                if el.get("type") == "button":
                    found.append((block, el, None))
                else:
                    found.extend((block, el, o) for o in options)
        return found

    def payload(
        self, s: Surface, block: dict[str, Any], el: dict[str, Any], option: Any
    ) -> dict[str, Any]:
        emu, action_id = self.emu, el["action_id"]
        press: dict[str, Any] = {
            "user": USER,
            "selected_value": None if option is None else option["value"],
            "block_id": block.get("block_id"),
        }
        if s.kind in {"view", "home"}:
            assert s.view is not None
            return emu.view_actions_payload(s.view, action_id, **press)
        if s.kind == "ephemeral":
            return emu.ephemeral_actions_payload(int(s.where), action_id, **press)
        return emu.block_actions_payload(s.where, s.ts, action_id, blocks=s.blocks, **press)

    async def press_all(self, s: Surface) -> int:
        done = 0
        for block, el, option in self.pressables(s):
            chosen = str((option or {}).get("value", el.get("value", "")))
            where = s.kind if s.kind in {"view", "home"} else "message"
            key = (where, base_action_id(el["action_id"]), chosen, el.get("url", ""))
            if key in self.pressed or self.presses >= MAX_PRESSES:
                continue
            self.pressed.add(key)
            self.presses += 1
            done += 1
            await self.settle()
            before = self.shown()
            status, text, _ = await self.slack.interactive(self.payload(s, block, el, option))
            self.ids_pressed.add(el["action_id"])
            label = f"{el['action_id']} ({chosen[:60]}) in {s.kind} {s.where}"
            if status != 200:
                self.failures.append(f"{label}: HTTP {status} {text[:120]}")
            elif "url" in el:
                continue  # a link: Slack opens it; the click is only acked
            elif not await self.answered(before):
                self.failures.append(f"{label}: acked, then nothing was shown")
        return done

    # forms --------------------------------------------------------------------------------

    def submissions(self, view: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(variant, state values): the form as first shown (text fields filled as a person
        would), and once for each other option of the selects whose options each lead
        somewhere else."""
        base: dict[str, Any] = {}
        vary: list[tuple[str, str, list[Any]]] = []
        for block in view.get("blocks") or []:
            if block.get("type") != "input":
                continue
            el, bid = block["element"], block["block_id"]
            aid, kind = el["action_id"], el["type"]
            if kind == "plain_text_input":
                value = el.get("initial_value") or SAMPLES.get(aid)
                if value is None and not block.get("optional"):
                    value = "1"
                entry: dict[str, Any] = {"type": kind, "value": value}
            elif kind.startswith("multi_") or kind == "checkboxes":
                chosen = el.get("initial_options") or (el.get("options") or [])[:1]
                entry = {"type": kind, "selected_options": chosen}
            else:
                options = el.get("options") or []
                entry = {"type": kind, "selected_option": el.get("initial_option") or options[0]}
                if aid in EVERY_OPTION:
                    vary.append((bid, aid, options))
            base[bid] = {aid: entry}
        out = [("as shown", base)]
        for bid, aid, options in vary:
            for o in options:
                values = {**base, bid: {aid: {**base[bid][aid], "selected_option": o}}}
                out.append((f"{aid}={o['value']}", values))
        return out

    async def submit_all(self, view: dict[str, Any]) -> int:
        if not view.get("submit") or view.get("type") != "modal":
            return 0  # no Submit button: nothing a person could send
        done = 0
        for variant, values in self.submissions(view):
            key = (f"{view['id']}:{view['hash']}", variant)
            if key in self.submitted:
                continue
            self.submitted.add(key)
            done += 1
            await self.settle()
            before = self.shown()
            body = self.emu.view_submission_payload(view, values, user=USER)
            status, text, _ = await self.slack.interactive(body)
            self.callbacks_submitted.add(view["callback_id"])
            label = f"form {view['callback_id']} ({variant})"
            ack = json.loads(text) if text.strip().startswith("{") else {}
            if status != 200:
                self.failures.append(f"{label}: HTTP {status} {text[:120]}")
            elif ack.get("response_action") == "errors":
                self.failures.append(f"{label}: refused a form filled as shown: {ack['errors']}")
            elif ack.get("response_action") in {"update", "push"}:
                continue  # the answer is the next form, shown in place of this one
            elif not await self.answered(before):
                self.failures.append(f"{label}: acked, then nothing was shown")
        return done

    async def run(self) -> None:
        """Presses and submits until a whole round finds nothing new."""
        for _ in range(30):
            done = 0
            await self.settle()
            for s in self.surfaces():
                done += await self.press_all(s)
                if s.kind == "view" and s.view is not None:
                    done += await self.submit_all(s.view)
            if not done:
                return
        raise AssertionError("the crawl never ran out of new buttons")


@pytest.fixture
async def bot_slack(
    emulator: SlackEmulator, redis_url: str, redis_client: Any, tmp_path: Path
) -> AsyncIterator[Slack]:
    emulator.add_channel(ALERTS, "gpu-alerts")
    config = tmp_path / "meowbot.yaml"
    config.write_text(
        json.dumps(
            {
                "health": {"dashboard_url": "https://grafana.example.org/d/node?var-node={node}"},
                # Past one drain an hour a second person must confirm: its message is pressed too.
                "alerts": {
                    "drain_share_per_hour": 0.000001,
                    "runbook_template": "https://runbooks.example.org/{cause}",
                },
                "playground": {"discovery_ttl_s": 0, "max_tokens": 8, "temperature": 0},
            }
        )
    )
    settings = bot_settings(
        emulator,
        redis_url,
        MEOWBOT_ADMINS=USER,
        MEOWBOT_CONFIG=str(config),
        ALERTMANAGER_WEBHOOK_TOKEN=TOKEN,
        MEOWBOT_ALERT_CHANNEL=ALERTS,
        ALERTMANAGER_URL=None,
        PLAYGROUND_ENDPOINTS=need_service("PLAYGROUND_TEST_URL"),
        PLAYGROUND_CHECKPOINT_DIRS=need_service("PLAYGROUND_TEST_DIR"),
    )
    async with AsyncExitStack() as stack:
        bot = await create_bot(settings)
        stack.push_async_callback(bot.close)
        port = await bot.start_http("127.0.0.1", 0)
        bot.start_background(sweep=False)
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
        # Redis is shared by the session: leave no alert groups for the next test.
        keys = [k async for k in redis_client.scan_iter("meowbot:_:alerts:*")]
        if keys:
            await redis_client.delete(*keys)


async def test_every_button_and_form_of_every_message_answers(bot_slack: Slack) -> None:
    slack, emu = bot_slack, bot_slack.emulator
    deps = slack.bot.deps
    fleet = deps.triage.inventory.fleet  # type: ignore[attr-defined]
    sched = deps.triage.scheduler
    assert sched is not None
    crawl = Crawl(slack)

    # /node-health of a node to drain, of one an operator took out (Resume, then "anyway"),
    # of a range; /hw-faults; help of every command.
    drained_kinds = {FaultKind.XID, FaultKind.ECC_DBE, FaultKind.GPU_MISSING}
    faulty = next(f.node for f in fleet.injected if f.kind in drained_kinds)
    # Nodes under one switch: an alert group names them together.
    leaf, nodes = leaf_nodes(slack.bot, 5)
    operators = nodes[0]
    await sched.drain(operators, "bad DIMM (ops ticket 12)")
    for command, text in [
        ("/node-health", faulty),
        ("/node-health", operators),
        ("/node-health", "gpu-[0001-0032]"),
        ("/node-health", "gpu-00x2"),  # "Did you mean ...?": a button per suggestion
        ("/hw-faults", ""),
        ("/hw-faults", "--since 6h"),
        ("/node-health", "help"),
        ("/job-slow", "help"),
        ("/hw-faults", "help"),
        ("/playground", "help"),
        ("/highlights", "help"),
        ("/highlights", ""),
    ]:
        assert (await slack.command(command, text))[0] == 200

    # /job-slow: two of ana's jobs for the picker, one slowed by two nodes (two Drains).
    two = fleet.add_job([f"gpu-{i:04d}" for i in range(481, 497)], user="ana")
    fleet.inject_straggler(two.job_id, FaultKind.THROTTLE_HW_THERMAL, node="gpu-0484")
    fleet.inject_straggler(two.job_id, FaultKind.THROTTLE_HW_THERMAL, node="gpu-0490")
    one = fleet.add_job([f"gpu-{i:04d}" for i in range(465, 481)], user="ana")
    fleet.inject_straggler(one.job_id, FaultKind.THROTTLE_HW_THERMAL, node="gpu-0470")
    await slack.command("/job-slow", "")
    await slack.command("/job-slow", two.job_id)

    # Questions in plain words: one read two ways (a button per reading), and "my job" with
    # two of ana's running (a button per job).
    for question in ("is everything slow or is it just me", "why is my job slow?"):
        ts = emu.workspace.next_ts()
        said = f"<@{emu.workspace.bot_user_id}> {question}"
        emu.workspace.add_message(CHANNEL, ts=ts, text=said, user=USER)
        event = {"type": "app_mention", "user": USER, "text": said, "ts": ts, "channel": CHANNEL}
        assert (await slack.event(emu.event_payload(event)))[0] == 200

    # An alert group of several nodes (a Drain and a Resume per node, one of them taken out by
    # an operator), and a warning group (drain after jobs).
    # Both nodes of the warning group are out of scheduling already, by meowbot: it offers
    # Resume twice (an alert offers Resume only on nodes meowbot took out), the critical group
    # Drain twice.
    await sched.drain(nodes[3], "meowbot: InfinibandLinkDown by @ana")
    await sched.drain(nodes[4], "meowbot: InfinibandLinkDown by @bo")
    alerts = [am_alert(n, "GpuXid79", severity="critical", leaf_switch=leaf) for n in nodes[:3]]
    warning = [am_alert(n, "InfinibandLinkDown", leaf_switch=leaf) for n in nodes[3:]]
    async with aiohttp.ClientSession() as http:
        url = slack.url.replace(SLACK_EVENTS_PATH, ALERTMANAGER_PATH)
        for batch in (alerts, warning):
            payload = webhook(batch)
            payload["groupKey"] = f'{{}}:{{alertname="{batch[0]["labels"]["alertname"]}"}}'
            async with http.post(
                url, json=payload, headers={"Authorization": f"Bearer {TOKEN}"}
            ) as resp:
                assert resp.status == 200

    # The playground: its form, and an answer from real checkpoints.
    await slack.command("/playground", "")
    await slack.command("/playground", f"{need_service('PLAYGROUND_TEST_RUN')} Hello")
    await slack.command("/playground", "watches")

    # App Home, whose "Run a command" opens the palette.
    home = {"type": "app_home_opened", "user": USER, "channel": "D0ADMIN", "tab": "home"}
    assert (await slack.event(emu.event_payload(home)))[0] == 200

    await crawl.run()

    assert crawl.failures == [], "\n".join(crawl.failures)
    registered = slack.bot.registered
    pressed = {base_action_id(a) for a in crawl.ids_pressed}
    # An alert offers Resume only on a node meowbot drained, so its "Resume anyway" appears only
    # when someone else took the node between the drawing and the press: tests/e2e/test_alerts.py
    # makes that happen and presses it.
    pressed.add(ALERT_RESUME_ANYWAY_ACTION)
    assert registered.actions <= pressed, registered.actions - pressed
    assert registered.views <= crawl.callbacks_submitted, (
        registered.views - crawl.callbacks_submitted
    )
    # The second of a kind: the answers this once 404ed on.
    for action in (DRAIN_ACTION, PICK_ACTION, ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION):
        assert f"{action}#2" in crawl.ids_pressed, (action, sorted(crawl.ids_pressed))
    assert RESUME_ACTION in crawl.ids_pressed
    # The palette ran every command, /playground with its form in the palette's place.
    palette = [c for c in emu.calls_to("views.update") if "Playground" in json.dumps(c.args)]
    assert palette, "the palette's /playground opened no form"
    dm = json.dumps(emu.messages(emu.workspace.im_with(USER).id))
    assert "is not built yet" not in dm and "issue" not in dm.lower()
    # What a press of an id nobody listens for gets: the 404 the crawl would have reported.
    nobody = {
        "type": "button",
        "action_id": "meowbot_nobody_listens",
        "text": {"type": "plain_text", "text": "x"},
    }
    blocks = [{"type": "actions", "block_id": "b", "elements": [nobody]}]
    stray = emu.block_actions_payload(CHANNEL, "1.000001", nobody["action_id"], blocks=blocks)
    assert (await slack.interactive(stray))[0] == 404


@pytest.fixture
async def admin_slack(
    emulator: SlackEmulator, redis_url: str, redis_client: Any
) -> AsyncIterator[Slack]:
    bot = await create_bot(bot_settings(emulator, redis_url, MEOWBOT_ADMINS=USER))
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()


async def test_node_health_drain_reads_right_before_and_after(admin_slack: Slack) -> None:
    slack, emu = admin_slack, admin_slack.emulator
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    sched = slack.bot.deps.triage.scheduler
    assert sched is not None
    faulty = {f.node for f in fleet.injected}
    node, healthy = [n for n in fleet.topology.names if n not in faulty][:2]
    fleet.inject(FaultKind.ECC_DBE, node, 3)  # a double-bit ECC error: drain it

    async def node_health(name: str = node) -> tuple[dict[str, Any], str]:
        n = len(emu.responses)
        await slack.command("/node-health", name)
        await emu.wait_for_responses(n + 1)
        answer = emu.responses[-1][1]
        return answer, json.dumps(answer["blocks"])

    def the_button(answer: dict[str, Any]) -> dict[str, Any]:
        [button] = [
            el
            for b in answer["blocks"]
            if b["type"] == "actions"
            for el in b["elements"]
            if el["action_id"] in {DRAIN_ACTION, RESUME_ACTION}
        ]
        return button

    # Before any drain: the reason is a proposal, and Drain asks first (as an alert's does).
    answer, text = await node_health()
    assert "Proposed drain reason" in text and '"Drain reason"' not in text
    assert "take it out of scheduling" in text
    drain = the_button(answer)
    assert drain["action_id"] == DRAIN_ACTION and drain["style"] == "danger"
    assert drain["confirm"]["title"]["text"] == f"Drain {node}?"
    assert "meowbot:" in drain["confirm"]["text"]["text"]  # the reason Slurm will be given

    # Bob may not: told whom to ask, never the setting; nothing changes.
    before = len(emu.responses)
    press = emu.ephemeral_actions_payload(before - 1, DRAIN_ACTION, user="U0USER")
    assert (await slack.interactive(press))[0] == 200
    await emu.wait_for_responses(before + 1)
    refused = emu.responses[-1][1]["text"]
    assert refused.startswith(":no_entry: Only the cluster admins may drain nodes (ask <@U0ADMIN>)")
    assert "MEOWBOT_ADMINS" not in refused
    assert not (await sched.nodes([node]))[node].out_of_service

    # Ana drains it.
    await slack.interactive(emu.ephemeral_actions_payload(before - 1, DRAIN_ACTION))
    await emu.wait_for_responses(before + 2)
    assert "Draining" in emu.responses[-1][1]["text"]
    assert (await sched.nodes([node]))[node].draining

    # Drained: Slurm's own state and reason, Resume (confirmed: the node still fails its
    # checks), no Drain, no proposal.
    answer, text = await node_health()
    assert DRAIN_ACTION not in text and "Proposed" not in text
    [slurm] = [
        f["text"]
        for b in answer["blocks"]
        for f in b.get("fields", [])
        if f["text"].startswith("*Slurm*")
    ]
    # Slurm's state and the reason it holds (mentions escaped: `@` and a word joiner).
    assert "+DRAIN" in slurm and "meowbot: ecc_dbe gpu3 by @\u2060ana" in slurm, slurm
    assert "out of scheduling already" in text and "take it out" not in text
    resume = the_button(answer)
    assert resume["action_id"] == RESUME_ACTION and "confirm" in resume
    assert "still fails its checks" in resume["confirm"]["text"]["text"]
    n = len(emu.responses)
    await slack.interactive(emu.ephemeral_actions_payload(n - 1, RESUME_ACTION))
    await emu.wait_for_responses(n + 1)
    assert "Resumed" in emu.responses[-1][1]["text"]

    # Back in service: Drain again.
    answer, _ = await node_health()
    assert the_button(answer)["action_id"] == DRAIN_ACTION

    # A healthy node someone drained: Resume, without a dialog (nothing is wrong with it).
    await sched.drain(healthy, "meowbot: test by @ana")
    answer, text = await node_health(healthy)
    resume = the_button(answer)
    assert resume["action_id"] == RESUME_ACTION and "confirm" not in resume
    assert "Proposed" not in text and "fit to run work" in text


async def test_job_slow_offers_no_drain_of_a_straggler_drained_already(admin_slack: Slack) -> None:
    slack, emu = admin_slack, admin_slack.emulator
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    sched = slack.bot.deps.triage.scheduler
    assert sched is not None
    job = fleet.add_job([f"gpu-{i:04d}" for i in range(481, 497)], user="ana")
    fleet.inject_straggler(job.job_id, FaultKind.THROTTLE_HW_THERMAL, node="gpu-0484")
    fleet.inject_straggler(job.job_id, FaultKind.THROTTLE_HW_THERMAL, node="gpu-0490")
    await sched.drain("gpu-0484", "meowbot: slows job by @ana")
    assert (await slack.command("/job-slow", job.job_id))[0] == 200
    update = await emu.wait_for_call("chat.update", timeout=30)
    blocks = update.args["blocks"]
    drains = [
        el["value"].partition("|")[0]
        for b in blocks
        if b["type"] == "actions"
        for el in b["elements"]
        if el["action_id"].startswith(DRAIN_ACTION)
    ]
    assert drains == ["gpu-0490"], blocks  # both hold the job back; one is drained already
    text = json.dumps(blocks)
    assert "gpu-0484" in text and "out of scheduling already" in text, text
