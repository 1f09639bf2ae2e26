"""A cluster's topology from MEOWBOT_CONFIG: hostlists per leaf switch and rack, so that a
real-backend /hw-faults and the alerts group a broken switch as one fault."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.alerts.config import AlertsConfig
from bot.alerts.dispatch import group_key
from bot.alerts.models import Alert, AlertSource, AlertStatus, Scope
from bot.app import make_triage
from bot.backends.prometheus import PrometheusInventory, PrometheusMetrics
from bot.config import ConfigError, load_settings
from bot.models import Action, Fault, FaultKind, Severity
from bot.triage.service import group_faults
from bot.triage.topology import Topology, TopologyConfig

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
CFG = TopologyConfig(
    leaf_switches={"leaf-01": "gpu-[0001-0032]", "leaf-02": "gpu-[0033-0064]"},
    racks={"r01": "gpu-[0001-0016]"},
)


def ib_down(node: str) -> Fault:
    return Fault(
        kind=FaultKind.IB_LINK_DOWN,
        node=node,
        since=NOW,
        evidence=(),
        severity=Severity.CRITICAL,
        action=Action.DRAIN,
        summary="IB port down",
    )


def test_hostlists_place_nodes_and_the_first_mention_wins() -> None:
    topo = Topology(CFG)
    assert topo.leaf_switch("gpu-0032") == "leaf-01" and topo.leaf_switch("gpu-0033") == "leaf-02"
    place = topo.place("gpu-0007")
    assert place is not None and (place.leaf_switch, place.rack) == ("leaf-01", "r01")
    other = topo.place("gpu-0040")
    assert other is not None and other.rack == ""
    assert topo.place("gpu-9999") is None
    with pytest.raises(ValueError, match="leaf-x"):
        TopologyConfig(leaf_switches={"leaf-x": "gpu-[0001-"})


def test_a_prometheus_fleet_groups_one_switch_as_one_fault() -> None:
    inventory = PrometheusInventory(PrometheusMetrics("http://127.0.0.1:9"), Topology(CFG))
    faults = [ib_down(f"gpu-{i:04d}") for i in range(1, 33)] + [ib_down("gpu-0040")]
    groups = group_faults(faults, inventory)
    switch = [g for g in groups if g.leaf_switch == "leaf-01"]
    assert len(switch) == 1 and len(switch[0].faults) == 32
    alert = Alert(
        fingerprint="f",
        source=AlertSource.SWEEP,
        status=AlertStatus.FIRING,
        cause="ib_link_down",
        node="gpu-0005",
        severity=Severity.CRITICAL,
        starts_at=NOW,
    )
    # An IB fault is one event by default; configured to group by switch, the topology says which.
    cfg = AlertsConfig(group_scope={"ib_link_down": Scope.LEAF_SWITCH})
    key = group_key(alert, inventory.place, cfg)
    assert key.scope is Scope.LEAF_SWITCH and key.scope_value == "leaf-01"


def test_topology_comes_from_meowbot_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "meowbot.yaml"
    cfg.write_text('topology:\n  leaf_switches: {leaf-07: "gpu-[0100-0131]"}\n')
    triage = make_triage(
        load_settings(PROMETHEUS_URL="http://127.0.0.1:9", MEOWBOT_CONFIG=str(cfg))
    )
    assert triage.inventory.leaf_switch("gpu-0120") == "leaf-07"
    cfg.write_text('topology:\n  racks: {r1: "gpu-[1-999999999]"}\n')
    with pytest.raises(ConfigError, match="topology"):
        make_triage(load_settings(PROMETHEUS_URL="http://127.0.0.1:9", MEOWBOT_CONFIG=str(cfg)))
