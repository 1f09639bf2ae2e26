"""A check is one entry named for its fault kind; the old check names still turn checks off;
every drain reason is built by one module within one limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot import drain_reason
from bot.models import Action, Evidence, Fault, FaultKind, Severity
from bot.triage.checks import CHECKS, OLD_NAMES, HealthConfig, enabled_checks

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_check_is_named_for_its_kind() -> None:
    assert all(c.name == c.kind.value and c.kinds == (c.kind,) for c in CHECKS)
    assert len({c.name for c in CHECKS}) == len(CHECKS)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("temperature", {"high_temperature"}),
        ("gpu_count", {"gpu_missing"}),
        ("ib_link", {"ib_link_down"}),
        ("reboot", {"unexpected_reboot"}),
        ("pcie_width", {"pcie_downtrained"}),
        ("pcie_gen", {"pcie_downtrained"}),
        ("nic_rx_errors", {"nic_errors"}),
        ("nic_tx_errors", {"nic_errors"}),
        (
            "throttle",
            {
                "throttle_power",
                "throttle_hw_slowdown",
                "throttle_sw_thermal",
                "throttle_hw_thermal",
                "power_brake",
            },
        ),
    ],
)
def test_old_check_names_turn_off_the_checks_they_became(old: str, new: set[str]) -> None:
    assert old in OLD_NAMES
    cfg = HealthConfig(disabled=frozenset({old}))
    assert cfg.disabled == new
    assert {c.name for c in CHECKS} - {c.name for c in enabled_checks(cfg)} == new


def test_the_name_in_a_drain_reason_is_a_name_health_disabled_takes() -> None:
    for check in CHECKS:
        fault = Fault(
            kind=check.kind,
            node="gpu-0001",
            gpu=2,
            since=NOW,
            severity=Severity.CRITICAL,
            action=Action.DRAIN,
            summary="x",
            evidence=(Evidence(series="s", labels={"xid": "79"}, value=1.0),),
        )
        reason = drain_reason.for_fault(fault)
        cause = reason.removeprefix("meowbot: ").split()[0]
        name = "xid" if check.kind is FaultKind.XID else cause
        assert check.name not in {c.name for c in enabled_checks(HealthConfig(disabled={name}))}


def test_drain_reasons_share_one_prefix_and_one_limit() -> None:
    assert drain_reason.by_user("meowbot: xid79 gpu3", "@ana") == "meowbot: xid79 gpu3 by @ana"
    assert drain_reason.by_user("xid79 gpu3", "ana") == "meowbot: xid79 gpu3 by @ana"
    assert drain_reason.for_straggler("4242", FaultKind.THROTTLE_POWER) == (
        "meowbot: slows job 4242 (throttle_power)"
    )
    assert drain_reason.for_straggler("4242", None) == "meowbot: slows job 4242 (straggler)"
    long = drain_reason.by_user("y" * 500, "a" * 20)
    assert len(long) == drain_reason.MAX_CHARS and long.endswith(" by @" + "a" * 20)
    assert drain_reason.check(long) == long
    with pytest.raises(ValueError):
        drain_reason.check(long + "z")
    assert drain_reason.is_ours(long) and not drain_reason.is_ours("fan replaced")
