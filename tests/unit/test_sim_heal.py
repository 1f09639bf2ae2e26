"""SimFleet.heal: a mended node shows no trace of its faults to the next health read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import FaultKind
from bot.triage.service import Triage, fleet_faults

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def found(fleet: SimFleet) -> set[tuple[FaultKind, str]]:
    faults = await fleet_faults(Triage(SimMetrics(fleet), SimInventory(fleet)), 900)
    return {(f.kind, f.node) for f in faults.faults}


async def test_heal_removes_a_nodes_faults_and_only_those() -> None:
    fleet = SimFleet(64, seed=3, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.XID, "gpu-0001", gpu=1)
    fleet.inject(FaultKind.ECC_DBE, "gpu-0001", gpu=2)
    fleet.inject(FaultKind.XID, "gpu-0002", gpu=3)
    assert await found(fleet) >= {
        (FaultKind.XID, "gpu-0001"),
        (FaultKind.ECC_DBE, "gpu-0001"),
        (FaultKind.XID, "gpu-0002"),
    }

    gone = fleet.heal("gpu-0001", FaultKind.XID)
    assert [(f.kind, f.node) for f in gone] == [(FaultKind.XID, "gpu-0001")]
    now_found = await found(fleet)
    assert (FaultKind.XID, "gpu-0001") not in now_found
    assert {(FaultKind.ECC_DBE, "gpu-0001"), (FaultKind.XID, "gpu-0002")} <= now_found

    assert len(fleet.heal("gpu-0001")) == 1
    assert fleet.heal("gpu-0001") == ()  # nothing left to mend
    assert {n for _, n in await found(fleet)} == {"gpu-0002"}
    assert [f.node for f in fleet.injected] == ["gpu-0002"]


async def test_heal_of_a_leaf_outage_node_and_unknown_nodes() -> None:
    fleet = SimFleet(64, seed=3, now=NOW, fault_rate=0.0)
    leaf = fleet.topology.leaf_switches[1]
    nodes = fleet.topology.nodes_on_leaf(leaf)
    fleet.inject_leaf_outage(leaf)
    fleet.heal(nodes[0])
    down = {n for k, n in await found(fleet) if k is FaultKind.IB_LINK_DOWN}
    assert down == set(nodes[1:])
    with pytest.raises(KeyError):
        fleet.heal("gpu-9999")
