"""The simulated fleet: determinism, scale, every fault kind on the right series, healthy noise,
and both text formats."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text

from bot import metric_names as m
from bot.backends.sim import (
    ALL_NICS,
    KIND_SPECS,
    NODE_KINDS,
    XID_CODES,
    InjectedFault,
    Sample,
    SimFleet,
    Topology,
)
from bot.backends.sim.workload import JobSpec
from bot.models import JOB_LEVEL_KINDS, FaultKind, JobState

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(hours=2)
BEFORE = SINCE - timedelta(minutes=1)


def find(samples: Iterable[Sample], name: str, **labels: str) -> list[Sample]:
    return [
        s for s in samples if s.name == name and all(s.label(k) == v for k, v in labels.items())
    ]


def one(fleet: SimFleet, at: datetime, name: str, host: str, **labels: str) -> float:
    got = find(fleet.samples(at, nodes=[host], metrics=[name]), name, **labels)
    assert len(got) == 1, f"{name} {labels}: {got}"
    return got[0].value


def dcgm(fleet: SimFleet, at: datetime, name: str, node: str, gpu: int) -> float:
    return one(fleet, at, name, node, gpu=str(gpu))


def training_job(fleet: SimFleet, min_nodes: int = 4, stages: int = 1) -> JobSpec:
    for spec in fleet.job_specs:
        if (
            spec.running(fleet.now_s)
            and spec.exports_step_time
            and len(spec.nodes) >= min_nodes
            and spec.pipeline_stages >= stages
            and spec.start_s < SINCE.timestamp() - 3600
        ):
            return spec
    raise AssertionError("the fleet has no such training job")


def step_times(fleet: SimFleet, at: datetime, job_id: str) -> dict[str, list[float]]:
    """Step times per node of one job."""
    out: dict[str, list[float]] = {}
    for s in fleet.samples(at, metrics=[m.TRAINING_STEP_TIME_SECONDS]):
        if s.label(m.LABEL_JOB_ID) == job_id:
            out.setdefault(s.label(m.LABEL_NODE) or "", []).append(s.value)
    return out


@pytest.fixture(scope="module")
def fleet64() -> SimFleet:
    return SimFleet(64, seed=7, now=NOW, fault_rate=0.0)


# --- determinism, names, scale ------------------------------------------------------------------
def test_same_seed_gives_byte_identical_exposition() -> None:
    a = SimFleet.scenario(11, 96, now=NOW)
    b = SimFleet.scenario(11, 96, now=NOW)
    assert a.injected == b.injected
    assert a.jobs == b.jobs
    assert a.exposition() == b.exposition()
    assert "".join(a.openmetrics_history(hours=1, nodes=a.nodes[:3])) == "".join(
        b.openmetrics_history(hours=1, nodes=b.nodes[:3])
    )
    assert SimFleet.scenario(12, 96, now=NOW).exposition() != a.exposition()


def test_default_now_is_the_hour_and_values_follow_relative_time() -> None:
    fleet = SimFleet(4, fault_rate=0.0)
    assert fleet.now.minute == 0 and fleet.now.second == 0 and fleet.now.tzinfo is not None
    later = SimFleet(4, fault_rate=0.0, now=NOW + timedelta(days=3))
    here = SimFleet(4, fault_rate=0.0, now=NOW)
    # Noise follows time relative to `now`, so two worlds built at different hours look alike.
    a = here.snapshot().values(m.DCGM_FI_DEV_GPU_TEMP)
    b = later.snapshot().values(m.DCGM_FI_DEV_GPU_TEMP)
    assert a == b


def test_names_and_topology() -> None:
    fleet = SimFleet(512, now=NOW, fault_rate=0.0)
    assert fleet.nodes[0] == "gpu-0001" and fleet.nodes[-1] == "gpu-0512"
    wide = Topology(50_000)
    assert wide.names[0] == "gpu-00001" and wide.names[-1] == "gpu-50000"
    topo = fleet.topology
    assert len(topo.nodes_in_rack(topo.rack("gpu-0017"))) == 16
    leaf = topo.leaf_switch("gpu-0033")
    assert topo.nodes_on_leaf(leaf) == tuple(f"gpu-{i:04d}" for i in range(33, 65))
    assert topo.spine("gpu-0001") == topo.spine("gpu-0512")
    node = fleet.node("gpu-0042")
    assert (node.rack, node.leaf_switch) == (topo.rack("gpu-0042"), leaf)
    assert len(node.gpus) == node.expected_gpus == 8
    for gpu in node.gpus:
        nic = next(n for n in node.nics if n.name == gpu.nic)
        assert nic.numa_node == gpu.numa_node  # GPU-NIC affinity on a healthy node
    assert {g.numa_node for g in node.gpus} == {0, 1}
    assert len({g.uuid for g in node.gpus}) == 8
    with pytest.raises(KeyError):
        fleet.node("gpu-9999")


def test_fifty_thousand_nodes_construct_and_snapshot() -> None:
    started = time.perf_counter()
    fleet = SimFleet(50_000, seed=1, now=NOW)
    built = time.perf_counter() - started
    snap = fleet.snapshot()
    started = time.perf_counter()
    xid = snap.values(m.DCGM_FI_DEV_XID_ERRORS)
    temp = snap.values(m.DCGM_FI_DEV_GPU_TEMP)
    state = snap.values(m.NODE_INFINIBAND_STATE_ID)
    columns = time.perf_counter() - started
    print(f"\n50,000 nodes: construct {built:.2f} s, three columns {columns:.2f} s")
    assert xid is not None and temp is not None and state is not None
    assert len(xid) == len(temp) == 400_000
    assert len(state) == 50_000 * 8
    assert len(fleet.injected) == 1_000  # fault_rate 0.02
    with pytest.raises(ValueError):
        SimFleet(50_001)


# --- exposition ---------------------------------------------------------------------------------
def test_exposition_parses_and_has_help_and_type(fleet64: SimFleet) -> None:
    text = fleet64.exposition()
    families = {f.name: f for f in parse_text(text)}
    assert m.DCGM_FI_DEV_GPU_TEMP in families
    temps = families[m.DCGM_FI_DEV_GPU_TEMP].samples
    assert len(temps) == 64 * 8
    assert text.count("# HELP ") == text.count("# TYPE ") == len(fleet64.families())
    assert f"# TYPE {m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL} counter" in text
    first = temps[0].labels
    assert first[m.LABEL_HOSTNAME] == "gpu-0001"
    assert {m.LABEL_GPU, m.LABEL_UUID, m.LABEL_MODEL_NAME, m.LABEL_PCI_BUS_ID} <= set(first)
    assert first[m.LABEL_INSTANCE] == "gpu-0001:9400"
    ib = families[m.NODE_INFINIBAND_STATE_ID].samples[0].labels
    assert ib[m.LABEL_INSTANCE] == "gpu-0001:9100" and ib[m.LABEL_IB_DEVICE] == "mlx5_0"


def test_label_values_are_escaped() -> None:
    from bot.backends.sim.exposition import render_labels

    text = render_labels((("a", 'x"y\\z\nw'),))
    assert text == '{a="x\\"y\\\\z\\nw"}'
    fam = next(iter(parse_text(f"# TYPE t gauge\nt{text} 1\n")))
    assert fam.samples[0].labels["a"] == 'x"y\\z\nw'


def test_host_label_variants() -> None:
    new = SimFleet(4, now=NOW, fault_rate=0.0, host_label="hostname")
    s = next(iter(new.samples(metrics=[m.DCGM_FI_DEV_GPU_TEMP])))
    assert s.label(m.LABEL_HOSTNAME_NEW) == "gpu-0001" and s.label(m.LABEL_HOSTNAME) is None
    mixed = SimFleet(64, now=NOW, fault_rate=0.0, host_label="mixed")
    keys = {
        next(k for k, _ in s.labels if k in m.HOST_LABELS)
        for s in mixed.samples(metrics=[m.DCGM_FI_DEV_GPU_TEMP])
    }
    assert keys == {m.LABEL_HOSTNAME, m.LABEL_HOSTNAME_NEW}


def test_disabled_metrics_and_old_clock_name_are_absent() -> None:
    fleet = SimFleet(
        4,
        now=NOW,
        fault_rate=0.0,
        disabled_metrics=[m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, m.DCGM_EXP_XID_ERRORS_COUNT],
        clock_reasons_metric=m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS,
    )
    fleet.inject(FaultKind.XID, "gpu-0001", 0, SINCE, xid=79)
    snap = fleet.snapshot()
    assert snap.values(m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL) is None
    assert snap.values(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS) is None
    assert snap.values(m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS) is not None
    assert snap.xid_counts() == {}
    text = fleet.exposition()
    assert m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL not in text
    assert m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS not in text
    assert m.DCGM_EXP_XID_ERRORS_COUNT not in text


def test_columns_agree_with_samples_and_subsets() -> None:
    fleet = SimFleet.scenario(3, 96, now=NOW)
    at = NOW - timedelta(minutes=17)
    full = fleet.snapshot(at)
    picked = [fleet.nodes[i] for i in (90, 3, 40, 41, 77)]
    part = fleet.snapshot(at, nodes=picked)
    for family in fleet.families():
        if family.entity in ("xid", "step"):
            continue
        col = full.values(family.name)
        sub = part.values(family.name)
        assert col is not None and sub is not None
        mult = len(col) // 96
        for p, node in enumerate(picked):
            i = fleet.topology.index(node)
            want = col[i * mult : (i + 1) * mult]
            got = sub[p * mult : (p + 1) * mult]
            assert [str(v) for v in got] == [str(v) for v in want], family.name
    assert set(part.step_times()) <= set(full.step_times())
    pos = full.gpu_position("gpu-0042", 5)
    assert full.labels_at(m.DCGM_FI_DEV_GPU_TEMP, pos)[m.LABEL_GPU] == "5"
    assert full.labels_at(m.DCGM_FI_DEV_GPU_TEMP, pos)[m.LABEL_HOSTNAME] == "gpu-0042"
    ib = full.labels_at(m.NODE_INFINIBAND_STATE_ID, full.node_position("gpu-0042") * 8 + 3)
    assert ib[m.LABEL_IB_DEVICE] == "mlx5_3" and ib[m.LABEL_INSTANCE] == "gpu-0042:9100"
    assert list(part.samples()) == list(fleet.samples(at, nodes=picked))


# --- healthy nodes look healthy -----------------------------------------------------------------
def test_healthy_fleet_has_only_ordinary_noise() -> None:
    fleet = SimFleet(128, seed=4, now=NOW, fault_rate=0.0)
    assert fleet.injected == ()
    now = fleet.snapshot()
    hour_ago = fleet.snapshot(NOW - timedelta(hours=1))

    def col(snap_name: str, at_now: bool = True) -> list[float]:
        values = (now if at_now else hour_ago).values(snap_name)
        assert values is not None
        return values

    assert set(col(m.DCGM_FI_DEV_XID_ERRORS)) == {0.0}
    assert now.xid_counts() == {}
    assert set(col(m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)) == {0.0}
    assert set(col(m.DCGM_FI_DEV_ROW_REMAP_FAILURE)) == {0.0}
    assert set(col(m.DCGM_FI_DEV_ROW_REMAP_PENDING)) == {0.0}
    assert {int(v) & ~m.CLOCK_EVENT_GPU_IDLE for v in col(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS)} == {
        0
    }
    temps = col(m.DCGM_FI_DEV_GPU_TEMP)
    assert max(temps) < 80 and len(set(temps)) > 10  # they vary, and stay cool
    assert set(col(m.DCGM_FI_DEV_PCIE_LINK_WIDTH)) == {16.0}
    assert set(col(m.DCGM_FI_DEV_PCIE_LINK_GEN)) == {5.0}
    assert set(col(m.NODE_INFINIBAND_STATE_ID)) == {float(m.IB_STATE_ACTIVE)}
    assert set(col(m.NODE_INFINIBAND_PHYSICAL_STATE_ID)) == {float(m.IB_PHYSICAL_STATE_LINK_UP)}
    assert all(now.gpu_present())
    assert max(col(m.NODE_LOAD1)) < 20
    # Noise that must not be read as a fault: a few SBEs, old link-downs, old remapped rows.
    assert any(col(m.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL))
    assert any(col(m.NODE_INFINIBAND_LINK_DOWNED_TOTAL))
    assert any(col(m.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS))
    for name in (
        m.NODE_INFINIBAND_LINK_DOWNED_TOTAL,
        m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL,
        m.NODE_NETWORK_RECEIVE_ERRS_TOTAL,
        m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
    ):
        assert col(name) == col(name, at_now=False), f"{name} grew on a healthy fleet"
    boots = col(m.NODE_BOOT_TIME_SECONDS)
    assert max(boots) < (NOW - timedelta(days=20)).timestamp()
    versions = {
        (n.driver_version, n.kernel_version, n.firmware_version)
        for n in (fleet.node(x) for x in fleet.nodes)
    }
    assert len(versions) == 1
    # Step times: ordinary jitter, within 2 % of the job's median on every rank.
    for spec in fleet.job_specs:
        if spec.running(fleet.now_s) and spec.exports_step_time:
            values = [v for vs in step_times(fleet, NOW, spec.job.job_id).values() for v in vs]
            median = statistics.median(values)
            assert all(abs(v / median - 1) < 0.02 for v in values)


# --- every fault kind on the right node, GPU and series -----------------------------------------
def _ib(fleet: SimFleet, at: datetime, name: str, node: str, nic: str) -> float:
    return one(fleet, at, name, node, device=nic)


def _assert_shows(fleet: SimFleet, fault: InjectedFault, at: datetime) -> None:
    """The fault's own evidence is on its node (and GPU) at ``at``."""
    k = FaultKind
    kind, node, gpu = fault.kind, fault.node, fault.gpu
    hour_before = at - timedelta(minutes=60)
    if kind in JOB_LEVEL_KINDS:
        return _assert_job_cause(fleet, fault, at)
    assert node is not None
    if KIND_SPECS[kind].scope == "gpu":
        assert gpu is not None
    if kind is k.XID:
        code = fault.number("xid")
        assert dcgm(fleet, at, m.DCGM_FI_DEV_XID_ERRORS, node, gpu or 0) == code
        counts = find(
            fleet.samples(at, nodes=[node], metrics=[m.DCGM_EXP_XID_ERRORS_COUNT]),
            m.DCGM_EXP_XID_ERRORS_COUNT,
        )
        assert [(s.label("gpu"), s.label("xid"), s.value) for s in counts] == [
            (str(gpu), str(int(code)), 1.0)
        ]
    elif kind is k.ECC_DBE:
        assert dcgm(fleet, at, m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, node, gpu or 0) >= 1
    elif kind is k.ROW_REMAP_FAILURE:
        assert dcgm(fleet, at, m.DCGM_FI_DEV_ROW_REMAP_FAILURE, node, gpu or 0) == 1
    elif kind is k.ROW_REMAP_PENDING:
        assert dcgm(fleet, at, m.DCGM_FI_DEV_ROW_REMAP_PENDING, node, gpu or 0) == 1
    elif kind in _BITS:
        bits = int(dcgm(fleet, at, m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, node, gpu or 0))
        assert bits & _BITS[kind]
        held = {
            k.THROTTLE_POWER: m.DCGM_FI_DEV_POWER_VIOLATION,
            k.THROTTLE_SW_THERMAL: m.DCGM_FI_DEV_THERMAL_VIOLATION,
            k.THROTTLE_HW_THERMAL: m.DCGM_FI_DEV_THERMAL_VIOLATION,
        }.get(kind)
        if held is not None and held in fleet.exported:
            # Held back all of the last hour: 3,600 s of violation time, in nanoseconds.
            grown = dcgm(fleet, at, held, node, gpu or 0)
            assert grown - dcgm(fleet, hour_before, held, node, gpu or 0) >= 3600e9
        assert dcgm(fleet, at, m.DCGM_FI_DEV_SM_CLOCK, node, gpu or 0) <= fault.number(
            "sm_clock_mhz"
        )
    elif kind is k.HIGH_TEMPERATURE:
        assert dcgm(fleet, at, m.DCGM_FI_DEV_GPU_TEMP, node, gpu or 0) >= fault.number("temp_c")
    elif kind in _GPU_COUNTERS:
        name = _GPU_COUNTERS[kind]
        now_v = dcgm(fleet, at, name, node, gpu or 0)
        assert now_v > dcgm(fleet, hour_before, name, node, gpu or 0) > 0
    elif kind is k.PCIE_DOWNTRAINED:
        width = dcgm(fleet, at, m.DCGM_FI_DEV_PCIE_LINK_WIDTH, node, gpu or 0)
        gen = dcgm(fleet, at, m.DCGM_FI_DEV_PCIE_LINK_GEN, node, gpu or 0)
        assert width < 16 or gen < 5
    elif kind is k.LOW_SM_CLOCK:
        assert dcgm(fleet, at, m.DCGM_FI_DEV_SM_CLOCK, node, gpu or 0) <= fault.number(
            "sm_clock_mhz"
        )
    elif kind is k.GPU_MISSING:
        here = {
            s.label("gpu")
            for s in fleet.samples(at, nodes=[node], metrics=[m.DCGM_FI_DEV_GPU_TEMP])
        }
        assert here == {str(g) for g in range(8)} - {str(gpu)}
        assert len(fleet.node(node, at).gpus) == 7
    elif kind is k.NUMA_MISPLACEMENT:
        inv = fleet.node(node, at)
        g = next(x for x in inv.gpus if x.index == gpu)
        affine = next(n for n in inv.nics if n.name == g.nic)
        assert affine.numa_node != g.numa_node
        numa = str(fleet.hardware.gpu_numa(gpu or 0))
        miss = m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL
        grew = one(fleet, at, miss, node, **{m.LABEL_NUMA_NODE: numa}) - one(
            fleet, hour_before, miss, node, **{m.LABEL_NUMA_NODE: numa}
        )
        assert grew > 1_000_000
    elif kind in (k.IB_LINK_DOWN, k.IB_FLAPPING, k.IB_SYMBOL_ERRORS):
        nics = fleet.hardware.nics if fault.text("nic") == ALL_NICS else (fault.text("nic"),)
        for nic in nics:
            if kind is k.IB_LINK_DOWN:
                assert _ib(fleet, at, m.NODE_INFINIBAND_STATE_ID, node, nic) == m.IB_STATE_DOWN
                downed = _ib(fleet, at, m.NODE_INFINIBAND_LINK_DOWNED_TOTAL, node, nic)
                before = fault.since - timedelta(minutes=1)
                assert downed > _ib(fleet, before, m.NODE_INFINIBAND_LINK_DOWNED_TOTAL, node, nic)
            elif kind is k.IB_FLAPPING:
                name = m.NODE_INFINIBAND_LINK_DOWNED_TOTAL
                grew = _ib(fleet, at, name, node, nic) - _ib(fleet, hour_before, name, node, nic)
                assert grew >= 2
            else:
                name = m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL
                assert _ib(fleet, at, name, node, nic) > _ib(fleet, hour_before, name, node, nic)
    elif kind is k.NIC_ERRORS:
        name = m.NODE_NETWORK_RECEIVE_ERRS_TOTAL
        device = fault.text("device")
        assert one(fleet, at, name, node, device=device) > one(
            fleet, hour_before, name, node, device=device
        )
    elif kind is k.UNEXPECTED_REBOOT:
        assert one(fleet, at, m.NODE_BOOT_TIME_SECONDS, node) == fault.since.timestamp()
    elif kind is k.DRIVER_DRIFT:
        value = fault.text("version")
        temps = fleet.samples(at, nodes=[node], metrics=[m.DCGM_FI_DEV_GPU_TEMP])
        assert {s.label(m.LABEL_DRIVER_VERSION) for s in temps} == {value}
        assert fleet.node(node, at).driver_version == value
    elif kind is k.FIRMWARE_DRIFT:
        value = fault.text("version")
        temps = fleet.samples(at, nodes=[node], metrics=[m.DCGM_FI_DEV_GPU_TEMP])
        assert {s.label(m.LABEL_VBIOS_VERSION) for s in temps} == {value}
        assert fleet.node(node, at).firmware_version == value
    elif kind is k.KERNEL_DRIFT:
        uname = next(iter(fleet.samples(at, nodes=[node], metrics=[m.NODE_UNAME_INFO])))
        assert uname.label(m.LABEL_RELEASE) == fault.text("version")
        assert fleet.node(node, at).kernel_version == fault.text("version")
    elif kind is k.CPU_CONTENTION:
        assert one(fleet, at, m.NODE_LOAD1, node) > 50
    elif kind is k.DCGM_HEALTH:
        failing = _health(fleet, at, node)
        assert failing[(str(gpu), fault.text("watch"))] == (m.HEALTH_FAIL, fault.text("code"))
    else:  # pragma: no cover - every kind has a branch
        raise AssertionError(f"no check for {kind}")
    return None


def rank_values(fleet: SimFleet, at: datetime, job_id: str, which: int) -> dict[str, list[float]]:
    """Per node, its ranks' iteration (0), compute (1) or collective wait (2) times, from the
    engine (whether or not the job exports the last two)."""
    index = fleet.job_position(job_id)
    assert index is not None
    out: dict[str, list[float]] = {}
    for _, n, _, _, *values in fleet.snapshot(at).rank_times(index):
        out.setdefault(fleet.topology.names[n], []).append(values[which])
    return out


def _assert_job_cause(fleet: SimFleet, fault: InjectedFault, at: datetime) -> None:
    assert fault.job_id is not None
    spec = fleet.job_spec(fault.job_id)
    if fault.kind is FaultKind.JOB_SLOWDOWN:
        for values in step_times(fleet, at, fault.job_id).values():
            assert all(v > spec.base_step_s * 1.1 for v in values)
    elif fault.kind is FaultKind.PIPELINE_IMBALANCE:
        # The slow stage computes longer; every rank still reports the same iteration.
        stage = int(fault.number("stage"))
        index = fleet.job_position(fault.job_id)
        assert index is not None
        slow: list[float] = []
        fast: list[float] = []
        for _, _, _, st, _, compute, _ in fleet.snapshot(at).rank_times(index):
            (slow if st == stage else fast).append(compute)
        assert slow and fast and min(slow) > max(fast)
    elif fault.kind is FaultKind.GC_STALLS:
        # Over an hour, some minutes are stalls on every rank together, the rest are not.
        series = fleet.series_history(
            m.TRAINING_STEP_TIME_SECONDS,
            at - timedelta(hours=1),
            at,
            nodes=fleet.job(fault.job_id).nodes,
        )
        minutes: dict[int, list[float]] = {}
        for labels, points in series.items():
            if dict(labels)[m.LABEL_JOB_ID] == fault.job_id:
                for t, v in points:
                    minutes.setdefault(t, []).append(v)
        stalled = [t for t, vs in minutes.items() if min(vs) > spec.base_step_s * 1.5]
        calm = [t for t, vs in minutes.items() if max(vs) < spec.base_step_s * 1.05]
        assert stalled and calm
        assert len(stalled) <= len(minutes) // int(fault.number("period_min")) + 1


_BITS = {
    FaultKind.THROTTLE_POWER: m.CLOCK_EVENT_SW_POWER_CAP,
    FaultKind.THROTTLE_HW_SLOWDOWN: m.CLOCK_EVENT_HW_SLOWDOWN,
    FaultKind.THROTTLE_SW_THERMAL: m.CLOCK_EVENT_SW_THERMAL,
    FaultKind.THROTTLE_HW_THERMAL: m.CLOCK_EVENT_HW_THERMAL,
    FaultKind.POWER_BRAKE: m.CLOCK_EVENT_HW_POWER_BRAKE,
}
_GPU_COUNTERS = {
    FaultKind.NVLINK_CRC: m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
    FaultKind.NVLINK_REPLAY: m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
    FaultKind.PCIE_REPLAY: m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
}


def _health(fleet: SimFleet, at: datetime, node: str) -> dict[tuple[str, str], tuple[float, str]]:
    """(GPU, watch) -> (result, error code) of the node's health watches that do not pass."""
    rows = fleet.samples(at, nodes=[node], metrics=[m.DCGM_EXP_GPU_HEALTH_STATUS])
    return {
        (str(s.label(m.LABEL_GPU)), str(s.label(m.LABEL_HEALTH_WATCH))): (
            s.value,
            str(s.label(m.LABEL_HEALTH_ERROR_CODE)),
        )
        for s in rows
        if s.value != m.HEALTH_PASS
    }


def _assert_absent(fleet: SimFleet, fault: InjectedFault, at: datetime) -> None:
    """Before ``since`` the fault's node looks like every healthy node."""
    if fault.node is None:
        return
    snap = fleet.snapshot(at, nodes=[fault.node])
    assert list(snap.values(m.DCGM_FI_DEV_XID_ERRORS) or ()) == [0.0] * 8
    assert snap.xid_counts() == {}
    for name in (
        m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
        m.DCGM_FI_DEV_ROW_REMAP_FAILURE,
        m.DCGM_FI_DEV_ROW_REMAP_PENDING,
        m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
        m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
    ):
        assert list(snap.values(name) or ()) == [0.0] * 8, name
    assert all(snap.gpu_present())
    reasons = snap.values(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS) or []
    assert all(int(v) & ~m.CLOCK_EVENT_GPU_IDLE == 0 for v in reasons)
    assert max(snap.values(m.DCGM_FI_DEV_GPU_TEMP) or [0]) < 80
    assert set(snap.values(m.NODE_INFINIBAND_STATE_ID) or []) == {float(m.IB_STATE_ACTIVE)}
    assert snap.versions(0) == fleet.default_versions
    assert list(snap.values(m.NODE_BOOT_TIME_SECONDS) or ()) != [fault.since.timestamp()]
    # DCGM's watches pass, but for the power watch of GPUs that touch their cap (DCGM #285).
    assert {w for _, w in _health(fleet, at, fault.node)} <= {"POWER"}


@pytest.mark.parametrize("kind", list(FaultKind), ids=lambda k: str(k.value))
def test_every_fault_kind_shows_on_its_node_and_gpu(kind: FaultKind) -> None:
    # The newer exporter's host label: its families (health watches, violation counters,
    # the cumulative Xid counter) are exported too.
    fleet = SimFleet(64, seed=5, now=NOW, fault_rate=0.0, host_label="hostname")
    if kind in JOB_LEVEL_KINDS:
        spec = training_job(fleet, stages=2 if kind is FaultKind.PIPELINE_IMBALANCE else 1)
        fault = fleet.inject(kind, since=SINCE, job_id=spec.job.job_id)
        assert fault.node is None and fault.gpu is None
    else:
        scope = KIND_SPECS[kind].scope
        fault = fleet.inject(kind, "gpu-0010", 3 if scope == "gpu" else None, SINCE)
        assert fault.node == "gpu-0010"
        assert fault.gpu == (3 if scope == "gpu" else None)
    assert fleet.injected == (fault,)
    _assert_shows(fleet, fault, NOW)
    _assert_absent(fleet, fault, BEFORE)
    # Only the fault's own node changed: its neighbour's hardware and compute are as they were.
    # Its iteration time and collective wait are not, where the fault slows their job: a
    # synchronous rank waits for the slowest, so it reports the straggler's pace.
    healthy = SimFleet(64, seed=5, now=NOW, fault_rate=0.0, host_label="hostname")
    waits = (m.TRAINING_STEP_TIME_SECONDS, m.TRAINING_COLLECTIVE_WAIT_SECONDS)

    def own(f: SimFleet) -> list[object]:
        return [s for s in f.samples(NOW, nodes=["gpu-0011"]) if s.name not in waits]

    assert own(fleet) == own(healthy)
    steps = [m.TRAINING_STEP_TIME_SECONDS]
    now = {s.labels: s.value for s in fleet.samples(NOW, nodes=["gpu-0011"], metrics=steps)}
    then = {s.labels: s.value for s in healthy.samples(NOW, nodes=["gpu-0011"], metrics=steps)}
    assert now.keys() == then.keys()
    assert all(now[k] >= then[k] * 0.99 for k in now)


@pytest.mark.parametrize("code", XID_CODES)
def test_every_xid_code(code: int, fleet64: SimFleet) -> None:
    fleet = SimFleet(8, now=NOW, fault_rate=0.0)
    fleet.inject("xid", "gpu-0002", 6, SINCE, xid=code)
    assert dcgm(fleet, NOW, m.DCGM_FI_DEV_XID_ERRORS, "gpu-0002", 6) == code


def test_fault_until_ends_gauges_and_keeps_counters() -> None:
    fleet = SimFleet(4, now=NOW, fault_rate=0.0)
    fleet.inject("throttle_hw_thermal", "gpu-0001", 1, SINCE, until=NOW - timedelta(hours=1))
    fleet.inject("pcie_replay", "gpu-0001", 2, SINCE, until=NOW - timedelta(hours=1))
    mid = NOW - timedelta(hours=1, minutes=30)
    assert int(dcgm(fleet, mid, m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, "gpu-0001", 1)) & 0x40
    assert not int(dcgm(fleet, NOW, m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, "gpu-0001", 1)) & 0x40
    ended = dcgm(fleet, NOW - timedelta(hours=1), m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, "gpu-0001", 2)
    assert ended > 0
    assert dcgm(fleet, NOW, m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, "gpu-0001", 2) == ended


def test_leaf_switch_outage_takes_32_nodes_at_one_minute() -> None:
    fleet = SimFleet(128, now=NOW, fault_rate=0.0)
    leaf = fleet.topology.leaf_switch("gpu-0040")
    faults = fleet.inject_leaf_outage(leaf, SINCE)
    assert len(faults) == 32
    assert {f.since for f in faults} == {SINCE}
    assert {f.node for f in faults} == set(fleet.topology.nodes_on_leaf(leaf))
    assert all(f.kind is FaultKind.IB_LINK_DOWN and f.detail["nic"] == ALL_NICS for f in faults)
    snap = fleet.snapshot()
    states = snap.values(m.NODE_INFINIBAND_STATE_ID)
    assert states is not None
    down = {i // 8 for i, v in enumerate(states) if v == m.IB_STATE_DOWN}
    assert down == set(range(32, 64))
    # Received bytes stop on the ports that went down, and keep growing elsewhere.
    rx = m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL
    later = fleet.snapshot(NOW + timedelta(minutes=10)).values(rx)
    before = snap.values(rx)
    assert later is not None and before is not None
    assert later[40 * 8] == before[40 * 8]
    assert later[0] > before[0]


def test_random_default_faults_and_scenario_cover_every_kind() -> None:
    fleet = SimFleet(512, seed=2, now=NOW)
    assert len(fleet.injected) == round(0.02 * 512)
    assert all(f.kind in NODE_KINDS for f in fleet.injected)
    scenario = SimFleet.scenario(9, 512, now=NOW)
    kinds = {f.kind for f in scenario.injected}
    # A DCGM health-watch fault shows only where the newer exporter runs: never drawn at
    # random, so that every seeded fleet stays what it was (injected by hand instead).
    assert kinds == set(FaultKind) - {FaultKind.DCGM_HEALTH}
    per_node: dict[str, int] = {}
    for f in scenario.injected:
        if f.node is not None:
            per_node[f.node] = per_node.get(f.node, 0) + 1
    assert max(per_node.values()) == 1  # one fault a node: scoring stays unambiguous
    leaf_down = [f for f in scenario.injected if "leaf_switch" in f.detail]
    assert len(leaf_down) == 32
    for f in scenario.injected:
        _assert_shows(scenario, f, NOW) if f.since <= NOW else None


# --- jobs, stragglers, runs ---------------------------------------------------------------------
def test_jobs_are_slurm_like() -> None:
    fleet = SimFleet(512, seed=3, now=NOW, fault_rate=0.0)
    jobs = fleet.jobs
    assert [int(j.job_id) for j in jobs] == sorted(int(j.job_id) for j in jobs)
    running = [j for j in jobs if j.state is JobState.RUNNING]
    assert running and all(j.end is None and j.start < NOW for j in running)
    busy: set[str] = set()
    for j in running:
        assert not busy.intersection(j.nodes)  # a node runs one job at a time
        busy.update(j.nodes)
        assert fleet.running_job(j.nodes[0]) == j
    assert len(busy) > 0.8 * 512
    requeued = [j for j in running if j.prev_job_id]
    assert requeued
    for j in requeued:
        prev = fleet.job(j.prev_job_id or "")
        assert prev.name == j.name and prev.end is not None and prev.end <= j.start
    long = [j for j in running if j.start < NOW - timedelta(hours=48)]
    assert long  # long jobs have 48 h of step times


def test_step_times_have_yesterday_and_per_rank_values() -> None:
    fleet = SimFleet(128, seed=3, now=NOW, fault_rate=0.0)
    spec = next(
        s
        for s in fleet.job_specs
        if s.running(fleet.now_s)
        and s.exports_step_time
        and s.start_s < (NOW - timedelta(hours=30)).timestamp()
        and len(s.nodes) >= 2
    )
    today = step_times(fleet, NOW, spec.job.job_id)
    yesterday = step_times(fleet, NOW - timedelta(hours=24), spec.job.job_id)
    assert set(today) == set(yesterday) == set(spec.job.nodes)
    assert all(len(v) == 8 for v in today.values())
    med_today = statistics.median(v for vs in today.values() for v in vs)
    med_yesterday = statistics.median(v for vs in yesterday.values() for v in vs)
    assert abs(med_today / med_yesterday - 1) < 0.01


@pytest.mark.parametrize("cause", [k for k in FaultKind if KIND_SPECS[k].slowdown > 0])
def test_straggler_causes_slow_their_node_only(cause: FaultKind) -> None:
    fleet = SimFleet(128, seed=6, now=NOW, fault_rate=0.0)
    job = fleet.add_job(fleet.nodes[:64], name="llama-straggle", pipeline_stages=4)
    assert fleet.job(job.job_id) == job
    fault = fleet.inject_straggler(job.job_id, cause, since=SINCE)
    assert fault.job_id == job.job_id
    per_node = step_times(fleet, NOW, job.job_id)
    assert len(per_node) == 64
    if cause in JOB_LEVEL_KINDS:
        _assert_job_cause(fleet, fault, NOW)
        return
    assert fault.node is not None
    # Synchronous: every rank reports the slowest rank's pace, the straggler's own too ...
    steps = [v for vs in per_node.values() for v in vs]
    assert max(steps) < min(steps) * 1.01
    # ... and is slower than before the fault; the straggler computes longest, waits least.
    before_steps = [v for vs in step_times(fleet, BEFORE, job.job_id).values() for v in vs]
    assert statistics.median(steps) > statistics.median(before_steps) * 1.02
    compute = rank_values(fleet, NOW, job.job_id, 1)
    wait = rank_values(fleet, NOW, job.job_id, 2)
    median = statistics.median(v for vs in compute.values() for v in vs)
    slow = {n for n, vs in compute.items() if statistics.median(vs) > median * 1.03}
    assert slow == {fault.node}
    assert max(wait[fault.node]) < min(v for n, vs in wait.items() if n != fault.node for v in vs)
    _assert_shows(fleet, fault, NOW)
    before = rank_values(fleet, BEFORE, job.job_id, 1)
    assert statistics.median(before[fault.node]) < median * 1.03


def test_added_job_preempts_what_ran_there() -> None:
    fleet = SimFleet(64, seed=6, now=NOW, fault_rate=0.0)
    old = fleet.running_job("gpu-0001")
    job = fleet.add_job(["gpu-0001", "gpu-0002"], start=NOW - timedelta(hours=5))
    assert fleet.running_job("gpu-0001") == job
    if old is not None:
        assert fleet.job(old.job_id).state is JobState.CANCELLED


def test_runs_have_checkpoints_with_falling_loss() -> None:
    fleet = SimFleet(256, seed=3, now=NOW, fault_rate=0.0)
    runs = fleet.runs
    assert runs
    for run in runs:
        assert run.job_ids[-1] in {j.job_id for j in fleet.jobs if j.state is JobState.RUNNING}
        steps = [c.step for c in run.checkpoints]
        assert steps == sorted(steps) and all(s % run.checkpoint_every_steps == 0 for s in steps)
        assert all(c.created <= NOW for c in run.checkpoints)
        assert [c.created for c in run.checkpoints] == sorted(c.created for c in run.checkpoints)
        losses = [c.loss for c in run.checkpoints if c.loss is not None]
        if len(losses) > 10:
            assert losses[-1] < losses[0]
        assert all(c.model_id.startswith(run.name + "/") for c in run.checkpoints)
    assert any(len(r.job_ids) == 2 for r in runs)  # a requeued run resumes its checkpoints


# --- OpenMetrics history ------------------------------------------------------------------------
def test_openmetrics_history_is_backfillable_and_counters_grow() -> None:
    fleet = SimFleet(16, seed=2, now=NOW, fault_rate=0.0)
    since = NOW - timedelta(hours=1, minutes=30)
    fleet.inject("xid", "gpu-0003", 4, since, xid=79)
    fleet.inject("nvlink_crc", "gpu-0003", 2, since)
    fleet.inject("ib_flapping", "gpu-0003", since=since, nic="mlx5_1", period_s=300)
    metrics = [
        m.DCGM_FI_DEV_XID_ERRORS,
        m.DCGM_EXP_XID_ERRORS_COUNT,
        m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        m.NODE_INFINIBAND_LINK_DOWNED_TOTAL,
        m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL,
        m.TRAINING_STEP_TIME_SECONDS,
        m.NODE_UNAME_INFO,
    ]
    chunks = list(
        fleet.openmetrics_history(hours=3, nodes=["gpu-0003", "gpu-0004"], metrics=metrics)
    )
    text = "".join(chunks)
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    families = {f.name: f for f in parse_openmetrics(text)}  # type: ignore[no-untyped-call]
    points: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
    for family in families.values():
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert s.timestamp is not None
            points.setdefault(key, []).append((float(s.timestamp), s.value))
    for (name, _), series in points.items():
        times = [t for t, _ in series]
        assert times == sorted(times) and len(set(times)) == len(times)
        assert times[-1] == NOW.timestamp()
        if name in m.COUNTERS:
            values = [v for _, v in series]
            assert values == sorted(values), f"{name} went down"
    xid = [v for (name, labels), v in points.items() if name == m.DCGM_EXP_XID_ERRORS_COUNT]
    assert len(xid) == 1 and xid[0][0][0] == since.timestamp()  # appears at since, not before
    crc = next(
        series
        for (name, labels), series in points.items()
        if name == m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
        and ("Hostname", "gpu-0003") in labels
        and ("gpu", "2") in labels
    )
    assert all(v == 0 for t, v in crc if t < since.timestamp())
    assert all(v > 0 for t, v in crc if t >= since.timestamp())
    last_xid = next(
        series
        for (name, labels), series in points.items()
        if name == m.DCGM_FI_DEV_XID_ERRORS
        and ("gpu", "4") in labels
        and ("Hostname", "gpu-0003") in labels
    )
    assert {v for t, v in last_xid if t < since.timestamp()} == {0}
    assert {v for t, v in last_xid if t >= since.timestamp()} == {79}
    # The history's last point is the snapshot at its end.
    snap = fleet.snapshot(nodes=["gpu-0003", "gpu-0004"])
    crc_now = snap.values(m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL)
    assert crc_now is not None and crc[-1][1] == crc_now[2]


def test_openmetrics_history_is_bounded() -> None:
    fleet = SimFleet(512, now=NOW, fault_rate=0.0)
    with pytest.raises(ValueError, match="series"):
        fleet.openmetrics_history()
    assert next(
        iter(fleet.openmetrics_history(hours=1, nodes=["gpu-0001"], metrics=[m.NODE_LOAD1]))
    )


# --- injection API --------------------------------------------------------------------------------
def test_inject_validates_its_arguments() -> None:
    fleet = SimFleet(8, now=NOW, fault_rate=0.0)
    with pytest.raises(ValueError, match="aware"):
        fleet.inject("xid", "gpu-0001", 0, datetime(2026, 3, 10, 10, 0))
    with pytest.raises(ValueError):
        fleet.inject("xid", "gpu-0001", 8)
    with pytest.raises(ValueError):
        fleet.inject("cpu_contention", "gpu-0001", 2)
    with pytest.raises(ValueError):
        fleet.inject("gc_stalls", "gpu-0001")
    with pytest.raises(ValueError):
        fleet.inject("ib_link_down", "gpu-0001", nic="mlx5_9")
    with pytest.raises(KeyError):
        fleet.inject("xid", "gpu-0099", 0)
    with pytest.raises(ValueError):
        fleet.inject("no_such_kind", "gpu-0001")
    fault = fleet.inject("xid", "gpu-0001")  # everything else drawn from the seed
    assert fault.gpu is not None and int(fault.detail["xid"]) in XID_CODES
    assert fault.since <= NOW and fault.since.tzinfo is not None
    again = SimFleet(8, now=NOW, fault_rate=0.0).inject("xid", "gpu-0001")
    assert again == fault


def test_future_fault_is_not_shown_yet() -> None:
    fleet = SimFleet(4, now=NOW, fault_rate=0.0)
    fleet.inject("ecc_dbe", "gpu-0001", 0, NOW + timedelta(hours=1))
    assert dcgm(fleet, NOW, m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, "gpu-0001", 0) == 0
    later = NOW + timedelta(hours=2)
    assert dcgm(fleet, later, m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, "gpu-0001", 0) >= 1
    assert not math.isnan(dcgm(fleet, later, m.DCGM_FI_DEV_GPU_TEMP, "gpu-0001", 0))
