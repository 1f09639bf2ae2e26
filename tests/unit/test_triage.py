"""Health checks, verdicts and the triage services on the simulated fleet (no I/O)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from bot import metric_names as m
from bot.backends.promql import InvalidNodeName, query_for, selector
from bot.backends.sim.faults import KIND_SPECS
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import JOB_LEVEL_KINDS, Action, FaultKind, VerdictLevel
from bot.triage import service
from bot.triage.checks import CHECKS, HealthConfig, enabled_checks, requests_for, run_checks
from bot.triage.service import FaultsReport, FleetSummary, NodeReport, Triage, UserError
from bot.triage.table import MetricRequest, Reading
from bot.triage.targets import BadInput, expand_nodes, parse_duration
from bot.triage.verdict import verdicts
from bot.triage.xid import CONTACT_SUPPORT, RESTART_BM, XID_CATALOG, describe

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# Kinds the straggler analysis (issue #4) finds from job metrics, not node health checks.
NOT_NODE_HEALTH = JOB_LEVEL_KINDS | {
    FaultKind.LOW_SM_CLOCK,
    FaultKind.CPU_CONTENTION,
    FaultKind.NUMA_MISPLACEMENT,
}
NODE_KINDS = [k for k in FaultKind if k not in NOT_NODE_HEALTH]
# A symptom that the service folds into the fault explaining it.
SYMPTOMS = {FaultKind.HIGH_TEMPERATURE, FaultKind.IB_LINK_DOWN}


def every_kind_fleet(host_label: str = "Hostname") -> SimFleet:
    fleet = SimFleet(128, seed=11, now=NOW, fault_rate=0.0, host_label=host_label)  # type: ignore[arg-type]
    since = NOW - timedelta(minutes=30)
    for i, kind in enumerate(NODE_KINDS):
        node = f"gpu-{i * 4 + 2:04d}"
        if kind is FaultKind.DCGM_HEALTH:
            node = "gpu-0115"  # a rack of the newer exporter under "mixed": it has the watches
        gpu = i % 8 if KIND_SPECS[kind].scope == "gpu" else None
        detail = {"xid": 79} if kind is FaultKind.XID else {}
        fleet.inject(kind, node, gpu, since, **detail)
    return fleet


def triage_for(fleet: SimFleet, **cfg: object) -> Triage:
    return Triage(SimMetrics(fleet), SimInventory(fleet), None, HealthConfig(**cfg))  # type: ignore[arg-type]


@pytest.mark.parametrize("host_label", ["Hostname", "hostname", "mixed"])
def test_every_injected_node_fault_is_found_on_its_node_and_gpu(host_label: str) -> None:
    fleet = every_kind_fleet(host_label)
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(
        requests_for(enabled_checks(cfg)), nodes=None, window_s=cfg.window_s
    )
    run = run_checks(table, cfg)
    found = {(f.kind, f.node, f.gpu) for f in run.faults}
    # Only the newer exporter has DCGM's health watches: without it, said not checked.
    watched = host_label != "Hostname"
    for injected in fleet.injected:
        if injected.kind is FaultKind.DCGM_HEALTH and not watched:
            continue
        gpu = injected.gpu if (injected.kind, injected.node, injected.gpu) in found else None
        assert (injected.kind, injected.node, gpu) in found, injected
    faulty = {i.node for i in fleet.injected if watched or i.kind is not FaultKind.DCGM_HEALTH}
    flagged = {
        v.node
        for v in verdicts(fleet.nodes, run.faults).values()
        if v.level is not VerdictLevel.HEALTHY
    }
    assert flagged == faulty  # healthy nodes with ordinary noise are not flagged
    assert run.not_run == ({} if watched else {"dcgm_health": [m.DCGM_EXP_GPU_HEALTH_STATUS]})


def test_absent_metrics_are_said_not_called_healthy() -> None:
    disabled = ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"]
    fleet = SimFleet(16, seed=1, now=NOW, fault_rate=0.0, disabled_metrics=disabled)
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    run = run_checks(table, cfg)
    assert run.not_run == {
        "ecc_dbe": ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"],
        "nvlink_crc": ["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"],
        # The released exporter has no DCGM health watches: said, not assumed to pass.
        "dcgm_health": ["DCGM_EXP_GPU_HEALTH_STATUS"],
    }


def test_old_throttle_metric_name_is_read_too() -> None:
    fleet = SimFleet(
        16,
        seed=2,
        now=NOW,
        fault_rate=0.0,
        clock_reasons_metric="DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    )
    fleet.inject(FaultKind.THROTTLE_HW_SLOWDOWN, "gpu-0003", 2, NOW - timedelta(minutes=5))
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    run = run_checks(table, cfg)
    assert [(f.kind, f.node, f.gpu) for f in run.faults] == [
        (FaultKind.THROTTLE_HW_SLOWDOWN, "gpu-0003", 2)
    ]
    assert "throttle" not in run.not_run
    assert "throttle_hw_slowdown" not in run.not_run  # the clock-event checks are named by kind


@pytest.mark.parametrize("host_label", ["Hostname", "hostname"])
def test_without_the_clock_event_bitmask_the_kinds_it_alone_shows_are_said_unchecked(
    host_label: str,
) -> None:
    """The newer exporter's violation counters still measure a power cap and a software
    thermal slowdown; a hardware reason held since before the window shows only in the
    bitmask (its clock-event counter sees one come on). The released exporter has neither."""
    fleet = SimFleet(
        16,
        seed=2,
        now=NOW,
        fault_rate=0.0,
        host_label=host_label,  # type: ignore[arg-type]
        disabled_metrics=[m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS],
    )
    fleet.inject(FaultKind.THROTTLE_POWER, "gpu-0003", 1, NOW - timedelta(hours=2))
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    run = run_checks(table, cfg)
    hardware = {"throttle_hw_slowdown", "throttle_hw_thermal", "power_brake"}
    clocks = {n: v for n, v in run.not_run.items() if n.startswith("throttle") or n in hardware}
    bitmask = [m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS]
    if host_label == "hostname":
        assert clocks == {name: bitmask for name in hardware}
        # The power cap is still found, by its violation counter.
        assert [(f.kind, f.node) for f in run.faults] == [(FaultKind.THROTTLE_POWER, "gpu-0003")]
    else:
        unchecked = [*hardware, "throttle_power", "throttle_sw_thermal"]
        assert clocks == {name: bitmask for name in unchecked}
        assert run.faults == []


def test_a_check_can_be_turned_off() -> None:
    fleet = SimFleet(16, seed=3, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.XID, "gpu-0004", 1, NOW - timedelta(minutes=5), xid=79)
    cfg = HealthConfig(disabled=frozenset({"xid"}))
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    assert run_checks(table, cfg).faults == []
    assert "xid" not in {c.name for c in enabled_checks(cfg)}


def test_xid_catalog_and_xid79_verdict() -> None:
    assert {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120} <= XID_CATALOG.keys()
    x79 = describe(79)
    assert (x79.immediate, x79.investigatory) == (RESTART_BM, CONTACT_SUPPORT)
    assert describe(9999).meaning.startswith("Xid not in")
    fleet = SimFleet(16, seed=4, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.XID, "gpu-0005", 3, NOW - timedelta(minutes=5), xid=79)
    fleet.inject(FaultKind.XID, "gpu-0006", 0, NOW - timedelta(minutes=5), xid=13)
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    by_node = verdicts(fleet.nodes, run_checks(table, cfg).faults)
    assert by_node["gpu-0005"].level is VerdictLevel.DRAIN
    assert by_node["gpu-0005"].drain_reason == "meowbot: xid79 gpu3"
    # Xid 13 is the application's fault: the node stays fit for work.
    assert by_node["gpu-0006"].level is VerdictLevel.HEALTHY


def test_row_remap_failure_is_rma() -> None:
    fleet = SimFleet(16, seed=5, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.ROW_REMAP_FAILURE, "gpu-0007", 6, NOW - timedelta(minutes=5))
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    run = run_checks(table, cfg)
    assert verdicts(["gpu-0007"], run.faults)["gpu-0007"].level is VerdictLevel.RMA
    assert any(f.action is Action.RMA for f in run.faults)


async def test_node_health_one_node_and_hostlist_and_unknown() -> None:
    fleet = SimFleet(64, seed=6, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.ECC_DBE, "gpu-0010", 4, NOW - timedelta(minutes=20))
    triage = triage_for(fleet)
    report = await service.node_health(triage, "gpu-0010")
    assert isinstance(report, NodeReport)
    assert report.verdict.level is VerdictLevel.DRAIN
    assert report.faults[0].evidence[0].series == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
    assert report.info is not None and report.info.leaf_switch
    assert report.scheduler_note and "No scheduler" in report.scheduler_note
    summary = await service.node_health(triage, "gpu-[0001-0032]")
    assert isinstance(summary, FleetSummary)
    assert summary.verdicts[0].node == "gpu-0010"
    assert summary.counts[VerdictLevel.HEALTHY] == 31
    unknown = await service.node_health(triage, "gpu-0100")
    assert (
        isinstance(unknown, UserError) and "`gpu-0010`" in unknown.sentence
    ) or "Did you mean" in unknown.sentence  # type: ignore[union-attr]


async def test_hw_faults_groups_a_leaf_switch_outage_into_one() -> None:
    fleet = SimFleet(128, seed=8, now=NOW, fault_rate=0.0)
    leaf = fleet.node("gpu-0040").leaf_switch
    outage = fleet.inject_leaf_outage(leaf, NOW - timedelta(minutes=10))
    fleet.inject(FaultKind.XID, "gpu-0100", 2, NOW - timedelta(minutes=5), xid=79)
    report = await service.hw_faults(triage_for(fleet), "--since 6h")
    assert isinstance(report, FaultsReport)
    switch = [g for g in report.groups if g.leaf_switch is not None]
    assert len(switch) == 1 and switch[0].leaf_switch == leaf
    assert switch[0].nodes == sorted({f.node for f in outage})
    assert any(g.kind is FaultKind.XID and g.nodes == ["gpu-0100"] for g in report.groups)
    only_xid = await service.hw_faults(triage_for(fleet), "xid")
    assert isinstance(only_xid, FaultsReport) and set(only_xid.counts) == {FaultKind.XID}


@pytest.mark.parametrize(
    "text",
    ['gpu-1"} or vector(1) #', "gpu-[0-999999999]", "gpu-0001; rm -rf /", "--since", "--since 99y"],
)
async def test_bad_input_is_a_sentence_and_reads_nothing(text: str) -> None:
    fleet = SimFleet(16, seed=9, now=NOW, fault_rate=0.0)
    triage = triage_for(fleet)
    for answer in (await service.node_health(triage, text), await service.hw_faults(triage, text)):
        assert isinstance(answer, UserError)
        assert answer.sentence.endswith((".", "?")) and "\n" not in answer.sentence
    assert triage.metrics.queries == 0  # type: ignore[attr-defined]


def test_hostlists_and_durations() -> None:
    assert expand_nodes("gpu-[0001-0003,0010]") == ["gpu-0001", "gpu-0002", "gpu-0003", "gpu-0010"]
    with pytest.raises(BadInput):
        expand_nodes("gpu-[0001-0003")
    with pytest.raises(BadInput, match="more than 50,000"):
        expand_nodes("a[0-9999]b[0-9999]")
    assert parse_duration("24h") == 86400
    with pytest.raises(BadInput):
        parse_duration("0m")


def test_promql_is_escaped_and_query_count_is_constant() -> None:
    with pytest.raises(InvalidNodeName):
        selector("DCGM_FI_DEV_GPU_TEMP", ['gpu-1"} or vector(1) #'], "node")
    q = selector("DCGM_FI_DEV_GPU_TEMP", ["gpu-0001", "a.b"], "node")
    assert 'Hostname=~"(gpu\\\\-0001|a\\\\.b)"' in q and "hostname=~" in q and "instance=~" in q
    inc = query_for(
        MetricRequest("node_infiniband_link_downed_total", Reading.INCREASE), None, 3600, "node"
    )
    m_ = "node_infiniband_link_downed_total"
    assert inc == (
        f"clamp_min({m_} - {m_} offset 3600s, 0) or clamp_min({m_} - min_over_time({m_}[3600s]), 0)"
    )
    requests = requests_for(CHECKS)
    assert len(requests) == len({r.key for r in requests})  # each column read once


def test_counters_over_a_day_read_a_few_instants_not_every_sample() -> None:
    m_ = "node_infiniband_link_downed_total"
    q = query_for(MetricRequest(m_, Reading.INCREASE), None, 86400, "node")
    offsets = ["86400s", "43200s", "21600s", "10800s", "5400s"]
    assert q == " or ".join(
        [f"clamp_min({m_} - {m_} offset {o}, 0)" for o in offsets]
        + [f"clamp_min({m_} - min_over_time({m_}[3600s]), 0)"]
    )
    boot = query_for(MetricRequest("node_boot_time_seconds", Reading.CHANGES), None, 7200, "node")
    b = "node_boot_time_seconds"
    assert boot == (
        f"{b} * ({b} != bool {b} offset 7200s) or {b} * ({b} != bool {b} offset 3600s) "
        f"or {b} * (max_over_time({b}[3600s]) > bool min_over_time({b}[3600s]))"
    )


def test_per_node_and_short_node_reads_aggregate_in_prometheus() -> None:
    t = "DCGM_FI_DEV_GPU_TEMP"
    host = "Hostname, hostname, instance, node"
    per_node = MetricRequest(t, per_node=True, by=("DCGM_FI_DRIVER_VERSION",))
    assert query_for(per_node, None, 60, "node") == (
        f"count by ({host}, DCGM_FI_DRIVER_VERSION) ({t})"
    )
    short = MetricRequest(t, fewer_per_node="8")
    assert query_for(short, None, 60, "node") == (
        f"({t}) and on ({host}) (count by ({host}) ({t}) < 8)"
    )
    assert per_node.key != short.key != t
    with pytest.raises(ValueError):
        query_for(MetricRequest(t, per_node=True, by=('x"} or vector(1)',)), None, 60, "node")
    with pytest.raises(ValueError):
        query_for(MetricRequest(t, fewer_per_node="8 or vector(1)"), None, 60, "node")


async def test_node_report_marks_drift_and_links_the_dashboard() -> None:
    from bot.render.triage import render_node

    fleet = SimFleet(32, seed=12, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.DRIVER_DRIFT, "gpu-0011", None, NOW - timedelta(minutes=20))
    report = await service.node_health(triage_for(fleet), "gpu-0011")
    assert isinstance(report, NodeReport)
    blocks = render_node(report, dashboard_url="https://dash.example.org/d?node={node}").blocks
    text = str(blocks)
    assert "driver" in text and "differs from the fleet" in text
    assert "https://dash.example.org/d?node=gpu-0011" in text


def test_a_selections_drift_without_the_fleets_counts_is_not_checked_not_healthy() -> None:
    """A node is judged against the fleet's majority: when the fleet's counts did not come
    back, the selection alone proves nothing, and the check says it did not run."""
    fleet = SimFleet(32, seed=12, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.DRIVER_DRIFT, "gpu-0011", None, NOW - timedelta(minutes=20))
    cfg = HealthConfig()
    read = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=["gpu-0011"],
                                      window_s=3600)  # fmt: skip
    assert read.fleet_versions  # a selection's read carries the fleet's counts
    found = run_checks(read, cfg)
    assert FaultKind.DRIVER_DRIFT in {f.kind for f in found.faults}
    lost = dataclasses.replace(read, fleet_versions={k: {} for k in read.fleet_versions})
    run = run_checks(lost, cfg)
    assert FaultKind.DRIVER_DRIFT not in {f.kind for f in run.faults}
    unseen = [name for name, missing in run.not_run.items() if any("fleet" in x for x in missing)]
    assert "driver_drift" in unseen, run.not_run


def test_xid_per_code_counter_is_used_and_shows_repeats() -> None:
    # Only the per-code counter exported: the checks use what is present.
    fleet = SimFleet(
        16, seed=13, now=NOW, fault_rate=0.0, disabled_metrics=["DCGM_FI_DEV_XID_ERRORS"]
    )
    fleet.inject(FaultKind.XID, "gpu-0003", 5, NOW - timedelta(minutes=50), xid=79)
    fleet.inject(FaultKind.XID, "gpu-0003", 5, NOW - timedelta(minutes=10), xid=79)
    cfg = HealthConfig()
    table = SimMetrics(fleet).read_now(requests_for(enabled_checks(cfg)), nodes=None, window_s=3600)
    run = run_checks(table, cfg)
    xids = [f for f in run.faults if f.kind is FaultKind.XID]
    assert [(f.node, f.gpu) for f in xids] == [("gpu-0003", 5)]
    assert "2 times in the last hour" in xids[0].summary  # the window named
    assert verdicts(["gpu-0003"], xids)["gpu-0003"].drain_reason == "meowbot: xid79 gpu5"
    assert "xid" not in run.not_run


def test_backend_side_filters_are_comparisons_only() -> None:
    requests = {r.name: r for r in requests_for(CHECKS, HealthConfig(expected_pcie_width=8))}
    assert requests["DCGM_FI_DEV_PCIE_LINK_WIDTH"].keep == "< 8"
    assert requests["DCGM_FI_DEV_GPU_TEMP"].keep == ""  # read whole: counts and versions
    q = query_for(requests["node_infiniband_state_id"], None, 3600, "node")
    assert q == "(node_infiniband_state_id) != 4"
    with pytest.raises(ValueError):
        query_for(MetricRequest("up", Reading.VALUE, "> 0 or vector(1)"), None, 60, "node")


def test_missing_gpus_found_from_short_nodes_and_nan_rows_with_node_rows() -> None:
    """The per-node count reads only short nodes and nodes with a NaN row; a full node with
    every GPU present is not a fault, wherever its rows sit."""
    from bot.triage.checks import GPU_COUNT_REQUEST
    from bot.triage.table import Column, Table

    nan = float("nan")
    full = [40.0] * 8
    one_gone = [40.0] * 5 + [nan] + [40.0] * 2
    short = [40.0] * 7
    values = [*full, *one_gone, *short, *full]
    nodes = ["n1"] * 8 + ["n2"] * 8 + ["n3"] * 7 + ["n4"] * 8
    gpus = [*range(8), *range(8), *range(7), *range(8)]
    col = Column(
        name=m.DCGM_FI_DEV_GPU_TEMP,
        values=values,
        node=lambda i: nodes[i],
        labels=lambda i: {"gpu": str(gpus[i]), "Hostname": nodes[i]},
        node_rows=[0, 8, 16, 23],
    )
    table = Table(
        at=datetime(2026, 1, 1, tzinfo=UTC),
        window_s=600,
        columns={GPU_COUNT_REQUEST.key: col},
    )
    check = next(c for c in CHECKS if c.kind is FaultKind.GPU_MISSING)
    run = run_checks(table, HealthConfig(), [check])
    found = {(f.node, f.gpu) for f in run.faults}
    assert found == {("n2", 5), ("n3", 7)}


def test_since_is_read_the_same_by_every_command_that_takes_it() -> None:
    from bot.precursors.ask import parse_why
    from bot.triage.service import parse_faults_args
    from bot.triage.targets import take_since

    assert take_since("gpu-[01-02] --since 3d", "7d") == (["gpu-[01-02]"], "3d")
    assert take_since("-s 2h xid", "7d") == (["xid"], "2h")
    assert take_since("--since=36h", "7d") == ([], "36h")
    assert take_since("xid", "7d") == (["xid"], None)
    with pytest.raises(BadInput, match=r"`--since` needs a duration, e\.g\. `--since 24h`"):
        parse_faults_args("xid --since")
    with pytest.raises(BadInput, match="`--since 7d`"):
        parse_why("unexpected_reboot --since", ("unexpected_reboot",))
    assert parse_faults_args("--since 2h gpu-0001")[0] == ["gpu-0001"]
    assert parse_faults_args("--since 2h gpu-0001")[2] == 7200.0
    why = parse_why("unexpected_reboot -s 3d gpu-[0001-0002]", ("unexpected_reboot",))
    assert (why.nodes, why.window_s) == (("gpu-0001", "gpu-0002"), 3 * 86400.0)
    with pytest.raises(BadInput, match="second hostlist"):
        parse_why("unexpected_reboot gpu-0001 gpu-0002", ("unexpected_reboot",))
    with pytest.raises(BadInput, match="second hostlist"):
        parse_faults_args("gpu-0001 gpu-0002")
