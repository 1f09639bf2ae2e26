"""Alerts through the real Alertmanager: its webhooks reach three bot replicas, one message is
posted per event, and Silence from Slack becomes silences in Alertmanager."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.backends.alertmanager import AlertmanagerClient
from bot.errors import BackendError
from bot.render.alerts import ALERT_SILENCE_ACTION
from bot.shell.emulator import SlackEmulator
from tests.conftest import need_service
from tests.e2e.test_alerts import CHANNEL, StartReplica, settle, start_replica, team, top_level

__all__ = ["start_replica", "team"]  # fixtures, used by name


@pytest.fixture
def am() -> tuple[str, list[int], str]:
    url = need_service("ALERTMANAGER_URL")
    ports = [int(p) for p in need_service("MEOWBOT_TEST_AM_WEBHOOK_PORTS").split(",")]
    return url, ports, need_service("MEOWBOT_TEST_AM_TOKEN")


def am_post(node: str, name: str, **labels: str) -> dict[str, Any]:
    """An alert as a Prometheus server posts it to Alertmanager's API."""
    return {
        "labels": {"alertname": name, "Hostname": node, "severity": "critical", **labels},
        "annotations": {"summary": f"{name} on {node} <!channel>"},
        "startsAt": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
    }


async def test_alertmanager_webhooks_to_three_replicas_give_one_message_per_group(
    start_replica: StartReplica, emulator: SlackEmulator, am: tuple[str, list[int], str]
) -> None:
    url, ports, token = am
    replicas = [
        await start_replica(port=p, ALERTMANAGER_URL=url, ALERTMANAGER_WEBHOOK_TOKEN=token)
        for p in ports
    ]
    name = f"GpuFellOffTheBus{int(time.time() * 1000)}"  # apart from other tests' alerts
    client = AlertmanagerClient(url)
    try:
        await client.post_alerts([am_post(f"gpu-{i:04d}", name, xid="79") for i in (21, 22)])
        deadline = time.monotonic() + 20
        while not top_level(emulator):
            assert time.monotonic() < deadline, "no message from Alertmanager's webhook"
            await asyncio.sleep(0.2)
        await settle(replicas[0])
        # Both nodes lost a GPU at once: one event, one message naming both.
        stored = top_level(emulator)
        assert len(stored) == 1 and "Xid 79 on 2 nodes" in json.dumps(stored[0]["blocks"])
        assert len(emulator.calls_to("chat.postMessage")) == 1
        assert "<!channel>" not in json.dumps(stored)  # nobody is pinged by an annotation

        # Ana silences it for 1 h from Slack: Alertmanager holds a silence per node, by her.
        msg = stored[0]
        gid_value = next(
            o["value"]
            for b in msg["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e.get("action_id") == ALERT_SILENCE_ACTION
            for o in e["options"]
            if o["value"].endswith("|3600")
        )
        press = emulator.block_actions_payload(
            CHANNEL, msg["ts"], ALERT_SILENCE_ACTION, selected_value=gid_value
        )
        await replicas[1].slack.interactive(press)
        await emulator.wait_for_responses(1, timeout=10)
        said = emulator.responses[-1][1]["text"]
        assert said.startswith("Silenced for 1 h (2 silences in Alertmanager): silent until ")
        silences = await client.silences({"alertname": name})
        active = [s for s in silences if s["status"]["state"] == "active"]
        assert len(active) == 2 and {s["createdBy"] for s in active} == {"ana"}
        # The answer's end is the one Alertmanager holds (read back), to the minute.
        ends = [await client.silence_until(s["id"]) for s in active]
        assert all(e is not None for e in ends)
        first = min(e for e in ends if e is not None)
        assert f"{first:%Y-%m-%d %H:%M} UTC" in said
        hosts = set()
        for silence in active:
            matchers = {m["name"]: m["value"] for m in silence["matchers"]}
            assert matchers["alertname"] == name  # the rule's name, not meowbot's cause
            hosts.add(matchers["Hostname"])
        assert hosts == {"gpu-0021", "gpu-0022"}
        await settle(replicas[0])
        assert "silenced" in json.dumps(emulator.message(CHANNEL, msg["ts"])["blocks"]).lower()
        for silence in active:
            await client.expire_silence(silence["id"])
    finally:
        await client.close()


async def test_alertmanager_down_is_a_sentence_naming_it() -> None:
    client = AlertmanagerClient("http://127.0.0.1:9", timeout_s=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(BackendError) as err:
            await client.create_silence({"alertname": "x"}, 3600, "ana", "test")
    finally:
        await client.close()
    assert time.monotonic() - started < 2.0
    assert err.value.user_text().startswith("Alertmanager ")
