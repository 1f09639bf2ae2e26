"""A repeat offender through the bot: real Redis, the simulated fleet, the Slack emulator.

A GPU that fell off the bus twice in the past weeks (in the fault history, as the sweeps of
those weeks recorded it) falls off again: the sweep records the third occurrence once however
often it runs, its alert says so, /node-health shows the history and the escalated verdict
(RMA), `/hw-faults repeat` lists it, and App Home counts it. Alertmanager reporting the third
one instead is recorded once however often it is delivered, and its alert is marked the same.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.alerts.runtime import SWEEP_LOCK, Alerting
from bot.alerts.sweep import REPEAT_LABEL
from bot.app import create_bot
from bot.backends.alert_store import RedisAlertStore
from bot.backends.fault_history import RedisFaultHistory
from bot.backends.sim.metrics import SimMetrics
from bot.backends.state import key
from bot.models import FaultKind, VerdictLevel
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from bot.triage.repeats import Occurrence
from bot.triage.service import FleetGlance, fleet_glance
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.e2e.conftest import Slack, bot_settings

CHANNEL = "C0REPEAT"
GPU = 3


@pytest.fixture
async def slack(
    emulator: SlackEmulator, redis_url: str, redis_client: aioredis.Redis
) -> AsyncIterator[Slack]:
    """The bot on a simulated fleet of 64, alerting into CHANNEL; the sweep run by hand."""
    emulator.add_channel(CHANNEL, "gpu-alerts")
    settings = bot_settings(
        emulator,
        redis_url,
        MEOWBOT_FLEET="sim:64",
        MEOWBOT_ALERT_CHANNEL=CHANNEL,
        ALERTMANAGER_WEBHOOK_TOKEN="e2e-token",
        ALERTMANAGER_URL=None,
    )
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    bot.start_background(sweep=False)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()
    await redis_client.flushdb()  # the history and the alerts of this test, for the next


def alerting(slack: Slack) -> Alerting:
    assert slack.bot.deps.alerting is not None
    return slack.bot.deps.alerting


async def answer(slack: Slack, command: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    emu = slack.emulator
    before = len(emu.responses)
    status, _, _ = await slack.command(command, text)
    assert status == 200
    await emu.wait_for_responses(before + 1)
    body = emu.responses[before][1]
    assert validate_blocks(body["blocks"]) == []
    return str(body["text"]), body["blocks"]


async def test_a_gpu_failing_a_third_time_in_a_month_is_escalated_everywhere(
    slack: Slack,
) -> None:
    triage = slack.bot.deps.triage
    history = triage.history
    assert isinstance(history, RedisFaultHistory)
    metrics = triage.metrics
    assert isinstance(metrics, SimMetrics)
    fleet = metrics.fleet
    node = next(n for n in fleet.nodes if n not in {f.node for f in fleet.injected})

    # The two earlier times, as the sweeps of those days left them in the history.
    now = datetime.now(UTC).replace(microsecond=0)
    earlier = [now - timedelta(days=18), now - timedelta(days=9)]
    await history.save(
        {
            node: [
                Occurrence("xid79", FaultKind.XID, node, GPU, t, t + timedelta(hours=3))
                for t in earlier
            ]
        },
        now,
    )
    fleet.inject(FaultKind.XID, node, GPU, xid=79)

    # Three sweeps see it: one occurrence more, not three.
    sweeper = alerting(slack)
    store = sweeper.store
    assert isinstance(store, RedisAlertStore)
    for _ in range(3):
        await store.redis.delete(key("", "alerts", "lock", SWEEP_LOCK))  # the interval passes
        assert await sweeper.sweep_once() is not None
    stored = await history.occurrences([node])
    assert [o.first_seen for o in stored][:2] == earlier and len(stored) == 3
    days = ", ".join(t.strftime("%d %b") for t in earlier)
    history_line = f"3rd Xid 79 on GPU {GPU} in 30 days: {days}, today"

    # Its alert names it a repeat offender, with the history.
    for _ in range(100):
        channel = json.dumps(slack.emulator.messages(CHANNEL))
        if node in channel and "repeat offender" in channel:
            break
        await asyncio.sleep(0.1)  # the notifier posts from its own task
    assert f"repeat offender: {history_line}" in channel

    # /node-health: the history beside the fault, and RMA.
    text, blocks = await answer(slack, "/node-health", node)
    shown = json.dumps(blocks)
    assert text == f"{node}: advice rma"
    assert "Repeat offender" in shown and history_line in shown
    assert "meowbot: xid79 gpu3" in shown  # the proposed drain reason

    # /node-health of a hostlist: the node among the RMAs, its history in its reasons.
    _, blocks = await answer(slack, "/node-health", "gpu-[0001-0064]")
    assert f"repeat offender: {history_line}" in json.dumps(blocks)

    # `/hw-faults repeat` lists it; `/hw-faults help` says the word.
    text, blocks = await answer(slack, "/hw-faults", "repeat")
    shown = json.dumps(blocks)
    assert "Repeat offenders: the fleet" in shown
    assert f"`{node}`: {history_line} (rma)" in shown
    _, blocks = await answer(slack, "/hw-faults", "help")
    assert "/hw-faults repeat" in json.dumps(blocks)

    # App Home's glance counts it, as /node-health judges it.
    glance = await fleet_glance(triage)
    assert isinstance(glance, FleetGlance)
    assert [o.node for o in glance.offenders] == [node]
    assert glance.per_verdict[VerdictLevel.RMA] >= 1
    # Asked again and again, the history holds three occurrences.
    assert len(await history.occurrences([node])) == 3


def xid79_webhook(node: str, starts: datetime) -> dict[str, Any]:
    """Alertmanager's webhook for one Xid 79 on `node` GPU 3 (what it posts, version 4)."""
    return {
        "version": "4",
        "status": "firing",
        "groupLabels": {"alertname": "GpuXidError"},
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "GpuXidError",
                    "Hostname": node,
                    "gpu": str(GPU),
                    "xid": "79",
                    "severity": "critical",
                },
                "annotations": {"summary": f"Xid 79 on {node}"},
                "startsAt": starts.isoformat(),
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": f"am-xid79-{node}",
            }
        ],
    }


async def test_an_alertmanager_xid_on_a_repeat_offender_is_recorded_once_and_marked(
    slack: Slack,
) -> None:
    triage = slack.bot.deps.triage
    history = triage.history
    assert isinstance(history, RedisFaultHistory)
    metrics = triage.metrics
    assert isinstance(metrics, SimMetrics)
    fleet = metrics.fleet
    node = next(n for n in fleet.nodes if n not in {f.node for f in fleet.injected})
    now = datetime.now(UTC).replace(microsecond=0)
    earlier = [now - timedelta(days=18), now - timedelta(days=9)]
    await history.save(
        {
            node: [
                Occurrence("xid79", FaultKind.XID, node, GPU, t, t + timedelta(hours=3))
                for t in earlier
            ]
        },
        now,
    )

    # Alertmanager (not the sweep, which sees nothing on this node) reports the third Xid 79,
    # and delivers it twice (as it does to each replica, and again every repeat interval).
    body = json.dumps(xid79_webhook(node, now - timedelta(minutes=2)))
    url = slack.url.replace(SLACK_EVENTS_PATH, ALERTMANAGER_PATH)
    auth = {"Authorization": "Bearer e2e-token", "Content-Type": "application/json"}
    for _ in range(2):
        async with slack.http.post(url, data=body, headers=auth) as resp:
            assert resp.status == 200, await resp.text()

    # Recorded once: the two earlier and this one, from when it began.
    stored = await history.occurrences([node])
    assert len(stored) == 3 and [o.first_seen for o in stored][:2] == earlier
    assert stored[2].cause == "xid79" and stored[2].gpu == GPU
    assert stored[2].first_seen == now - timedelta(minutes=2)
    days = ", ".join(t.strftime("%d %b") for t in earlier)
    history_line = f"3rd Xid 79 on GPU {GPU} in 30 days: {days}, today"

    # Its alert is marked as the sweep marks its own: in the group, and in the channel.
    store = alerting(slack).store
    group = await store.group("xid_79|event|")
    assert group is not None
    (alert,) = group.alerts
    assert alert.labels[REPEAT_LABEL] == history_line
    assert alert.summary == f"Xid 79 on {node}; repeat offender: {history_line}"
    for _ in range(100):
        channel = json.dumps(slack.emulator.messages(CHANNEL))
        if node in channel and "repeat offender" in channel:
            break
        await asyncio.sleep(0.1)  # the notifier posts from its own task
    assert f"repeat offender: {history_line}" in channel

    # The sweep then seeing the same Xid adds no occurrence: one fault, whichever source.
    fleet.inject(FaultKind.XID, node, GPU, xid=79)
    assert await alerting(slack).sweep_once() is not None
    assert len(await history.occurrences([node])) == 3
    group = await store.group("xid_79|event|")
    assert group is not None and {a.source.value for a in group.firing} == {
        "sweep",
        "alertmanager",
    }
