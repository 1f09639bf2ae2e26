"""An alert's buttons against the real Slurm of scripts/testenv.py: a node an operator drained
with scontrol shows neither Drain nor Resume and says who holds it (Slurm's own record of who
set the reason), a node in service shows Drain, and once meowbot drained it, Resume."""

from __future__ import annotations

import asyncio
import json

from bot.render.alerts import ALERT_DRAIN_ACTION, ALERT_RESUME_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator, validate_blocks
from handlers.alertmanager import ALERTMANAGER_PATH
from tests.e2e.conftest import Slack
from tests.e2e.test_alerts import am_alert, webhook
from tests.e2e.test_slurm_notices import CHANNEL, TOKEN, cli, nodes_back, three

__all__ = ["nodes_back", "three"]  # fixtures, used by name


async def drawn_with(emulator: SlackEmulator, ts: str, needle: str, timeout_s: float = 15) -> str:
    for _ in range(int(timeout_s / 0.1)):
        text = json.dumps(emulator.message(CHANNEL, ts)["blocks"])
        if needle in text:
            return text
        await asyncio.sleep(0.1)
    raise AssertionError(f"{needle!r} never drawn: {emulator.message(CHANNEL, ts)['blocks']}")


async def test_slurm_state_decides_each_nodes_button(
    three: list[Slack], emulator: SlackEmulator, nodes_back: list[str]
) -> None:
    held, free = "gpu-0014", "gpu-0015"
    nodes_back.extend([held, free])
    # An operator drains gpu-0014 by hand: Slurm records root as who set the reason.
    cli("scontrol", "update", f"nodename={held}", "state=drain", "reason=rack maintenance")
    url = three[0].url.removesuffix(SLACK_EVENTS_PATH) + ALERTMANAGER_PATH
    alert = webhook([am_alert(n, "NvlinkReplayErrors", severity="warning") for n in (held, free)])
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with three[0].http.post(url, data=json.dumps(alert), headers=headers) as resp:
        assert resp.status == 200
    await emulator.wait_for_call("chat.postMessage", timeout=15)
    [msg] = [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") in (None, m["ts"])]
    ts = msg["ts"]
    assert validate_blocks(msg["blocks"]) == []
    text = json.dumps(msg["blocks"])
    assert f"Drain {free} after jobs" in text and ALERT_RESUME_ACTION not in text
    assert f"Drain {held}" not in text
    assert f"`{held}` drained by root in Slurm (`rack maintenance`)" in text, text

    # meowbot drains gpu-0015 from the alert: the message offers Resume in Drain's place.
    await three[0].interactive(emulator.block_actions_payload(CHANNEL, ts, ALERT_DRAIN_ACTION))
    await emulator.wait_for_responses(1, timeout=20)
    assert f"Draining `{free}`" in emulator.responses[-1][1]["text"]
    text = await drawn_with(emulator, ts, f"Resume {free}")
    assert f"`{free}` drained by meowbot in Slurm" in text
    assert f"Drain {free}" not in text and f"Resume {held}" not in text
