"""One answer whichever command asks, through signed Slack requests into the real server:
App Home's counts against /node-health of the whole fleet, and one node's faults in
/node-health against /hw-faults over the same window."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from bot.models import FaultKind, VerdictLevel
from bot.render.triage import DRAIN_ACTION
from bot.triage.targets import compress
from tests.e2e.conftest import Slack

COUNT_RE = re.compile(r"\b(healthy|degraded|drain|rma) (\d+)\b")


def verdict_counts(line: str) -> dict[str, int]:
    return {level: int(n) for level, n in COUNT_RE.findall(line)}


async def test_app_home_and_node_health_agree_on_the_fleet_and_a_node(slack: Slack) -> None:
    emu = slack.emulator
    fleet = slack.bot.deps.triage.inventory.fleet  # type: ignore[attr-defined]
    faulty = {f.node for f in fleet.injected}
    remap, drift = [n for n in fleet.nodes if n not in faulty][:2]
    fleet.inject(FaultKind.ROW_REMAP_PENDING, remap, 4, fleet.now - timedelta(minutes=30))
    fleet.inject(FaultKind.DRIVER_DRIFT, drift, None, fleet.now - timedelta(minutes=30))

    await slack.command("/node-health", compress(list(fleet.nodes)))
    await emu.wait_for_responses(1)
    summary = emu.responses[0][1]["text"]
    event = {"type": "app_home_opened", "user": "U0ADMIN", "channel": "D0ADMIN", "tab": "home"}
    assert (await slack.event(emu.event_payload(event)))[0] == 200
    call = await emu.wait_for_call("views.publish")
    home_text = json.dumps(call.args["view"]["blocks"])
    home_line = next(line for line in home_text.split("\\n") if "nodes:" in line)
    assert set(verdict_counts(summary)) == {lv.value for lv in VerdictLevel}
    assert verdict_counts(home_line) == verdict_counts(summary)
    assert "counters in the last hour" in home_text

    for node, words in (
        (remap, "(`row_remap_pending`) (warning; advice: drain)"),
        (drift, "(`driver_drift`) (warning; advice: degraded)"),
    ):
        seen = len(emu.responses)
        await slack.command("/node-health", node)
        await slack.command("/hw-faults", f"{node} --since 1h")
        await emu.wait_for_responses(seen + 2)
        texts = [json.dumps(body["blocks"]) for _, body in emu.responses[seen:]]
        assert all(words in text for text in texts), (node, texts)
        assert all("counters in the last hour" in text for text in texts)
        node_answer = next(t for t in texts if "Hardware faults" not in t)
        assert (DRAIN_ACTION in node_answer) is (node == remap)
