"""/node-health's buttons follow the node's scheduler state: Drain (confirmed) with a proposed
reason before a drain, Resume after; on the simulated fleet and its scheduler, no services."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.backends.sim.scheduler import SimScheduler
from bot.models import FaultKind
from bot.render.triage import DRAIN_ACTION, RESUME_ACTION, render_node
from bot.triage import service
from bot.triage.checks import HealthConfig
from bot.triage.service import NodeReport, Triage

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def answer(triage: Triage, node: str) -> dict[str, Any]:
    report = await service.node_health(triage, node)
    assert isinstance(report, NodeReport)
    return render_node(report).to_dict()


def buttons(msg: dict[str, Any]) -> list[dict[str, Any]]:
    return [el for b in msg["blocks"] if b["type"] == "actions" for el in b["elements"]]


async def test_drain_then_resume_as_the_scheduler_says() -> None:
    fleet = SimFleet(16, seed=3, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.ECC_DBE, "gpu-0004", 2, NOW - timedelta(minutes=10))
    scheduler = SimScheduler(fleet)
    triage = Triage(SimMetrics(fleet), SimInventory(fleet), scheduler, HealthConfig())

    before = await answer(triage, "gpu-0004")
    text = json.dumps(before["blocks"])
    assert "Proposed drain reason" in text and "meowbot: ecc_dbe gpu2" in text
    [drain] = buttons(before)
    assert drain["action_id"] == DRAIN_ACTION and drain["value"] == "gpu-0004|meowbot: ecc_dbe gpu2"
    assert drain["confirm"]["confirm"]["text"] == "Drain" and drain["confirm"]["style"] == "danger"

    await scheduler.drain("gpu-0004", "meowbot: ecc_dbe gpu2 by @ana")
    after = await answer(triage, "gpu-0004")
    text = json.dumps(after["blocks"])
    assert "Proposed" not in text and "out of scheduling already" in text
    [resume] = buttons(after)
    assert resume["action_id"] == RESUME_ACTION and resume["value"] == "gpu-0004"
    assert "still fails its checks" in resume["confirm"]["text"]["text"]

    # Set down rather than drained: out of scheduling too, so Resume as well.
    await scheduler.drain("gpu-0004", "meowbot: ecc_dbe gpu2 by @ana", now=True)
    assert [b["action_id"] for b in buttons(await answer(triage, "gpu-0004"))] == [RESUME_ACTION]

    # A healthy node in service offers nothing to press.
    assert buttons(await answer(triage, "gpu-0005")) == []
