"""The recording rules meowbot generates, and how the adapter picks recorded or raw reads."""

from __future__ import annotations

import pytest
import yaml

from bot import metric_names as m
from bot.backends.prometheus import MAX_QUERY_CHARS, PrometheusMetrics, fresh_rules, moved_query
from bot.backends.prometheus_precursors import candidate_expr
from bot.backends.prometheus_rules import (
    PRECURSOR_GROUP,
    SENTINEL_LABEL,
    candidate_record,
    recorded_name,
    rule_groups,
    rules_yaml,
    windows_for,
    worth_recording,
)
from bot.backends.promql import query_for
from bot.cli import main
from bot.precursors.config import CandidateConfig, PrecursorsConfig
from bot.triage.checks import CHECKS, HealthConfig, requests_for
from bot.triage.stragglers import StragglerConfig
from bot.triage.table import MetricRequest, Reading

HEALTH = HealthConfig()
REQUESTS = requests_for(CHECKS, HEALTH)


def _records(groups: list[dict[str, object]]) -> dict[str, str]:
    out = {}
    for group in groups:
        for rule in group["rules"]:  # type: ignore[attr-defined]
            out[rule["record"]] = rule["expr"]
    return out


def test_every_filtered_read_and_window_has_a_rule_recording_the_adapters_own_query() -> None:
    groups = rule_groups(HEALTH, StragglerConfig(), windows=windows_for(HEALTH))
    doc = yaml.safe_load(rules_yaml(groups))
    records = _records(doc["groups"])
    adapter = PrometheusMetrics("http://prometheus.invalid")
    for window in (3600.0, 86400.0):
        for request in REQUESTS:
            query, name, _ = adapter.plan(request, None, window, frozenset(records))
            if not worth_recording(request):
                assert name is None
                continue
            assert name is not None, request
            assert query == name
            raw = query_for(request, None, window, "node")
            assert records[name].startswith(f"({raw}) or label_replace(vector(time())")


def test_a_rule_for_other_thresholds_or_windows_is_not_used() -> None:
    other = HealthConfig(nvlink_crc_per_window=5, max_gpu_temp_c=80)
    groups = rule_groups(other, windows=[7200])
    records = frozenset(_records(yaml.safe_load(rules_yaml(groups))["groups"]))
    adapter = PrometheusMetrics("http://prometheus.invalid")
    temp = next(r for r in REQUESTS if r.name == m.DCGM_FI_DEV_GPU_TEMP and r.keep)
    assert adapter.plan(temp, None, 3600, records)[1] is None  # "> 87" is not "> 80"
    crc = next(r for r in REQUESTS if r.name == m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER)
    assert adapter.plan(crc, None, 3600, records)[1] is None  # 1 h is not recorded
    assert adapter.plan(crc, None, 7200, records)[1] is not None


def test_a_node_selection_reads_the_recorded_series_through_the_host_labels() -> None:
    request = MetricRequest(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, Reading.INCREASE, "> 0")
    name = recorded_name(query_for(request, None, 3600, "node"), request.name)
    adapter = PrometheusMetrics("http://prometheus.invalid")
    query, used, _ = adapter.plan(request, ["gpu-0001", "gpu-0002"], 3600, frozenset({name}))
    assert used == name
    assert f'{name}{{Hostname=~"(gpu\\\\-0001|gpu\\\\-0002)"}}' in query
    assert f'{name}{{instance=~"(gpu\\\\-0001|gpu\\\\-0002)(:[0-9]+)?"}}' in query
    assert "offset" not in query


def test_only_fresh_sentinels_count() -> None:
    def row(name: str, interval: str, age_s: float) -> dict[str, object]:
        return {
            "metric": {"__name__": name, SENTINEL_LABEL: interval},
            "value": [1000.0, str(1000.0 - age_s)],
        }

    rows = [
        row("meowbot:a:1", "30", 50),
        row("meowbot:b:2", "30", 130),  # two intervals and a minute is 120 s: late
        row("meowbot:c:3", "120", 290),
        row("meowbot:d:4", "240", 310),  # past the 5-minute lookback whatever the interval
        {"metric": {"__name__": "meowbot:e:5"}, "value": [1000.0, "999"]},  # no interval
    ]
    assert fresh_rules(rows) == {"meowbot:a:1": 50.0, "meowbot:c:3": 290.0}


def test_the_checks_gauges_are_read_raw_and_the_counters_recorded() -> None:
    assert not worth_recording(MetricRequest(m.DCGM_FI_DEV_SM_CLOCK))
    # A fault shows in its gauge at the scrape: a rule every 30 s would hold it back.
    assert not worth_recording(MetricRequest(m.DCGM_FI_DEV_XID_ERRORS, keep="> 0"))
    assert not worth_recording(MetricRequest(m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, keep="> 0"))
    assert not worth_recording(MetricRequest(m.DCGM_FI_DEV_GPU_TEMP, fewer_per_node="8"))
    assert not worth_recording(MetricRequest(m.DCGM_FI_DEV_GPU_TEMP, keep="> 87"))  # a warning
    assert worth_recording(MetricRequest(m.DCGM_FI_DEV_SM_CLOCK, keep="> 0"))  # /job-slow's
    assert worth_recording(MetricRequest(m.NODE_LOAD1, per_node=True))
    assert worth_recording(MetricRequest(m.DCGM_FI_DEV_GPU_TEMP, lowest_per_node=True))
    assert worth_recording(MetricRequest(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, Reading.INCREASE))


def test_a_moved_query_finds_changed_and_new_series_on_every_host_label() -> None:
    q = moved_query(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, ["gpu-0001"], 90, "node")
    part = 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER{Hostname=~"(gpu\\\\-0001)"}'
    assert f"({part} != {part} offset 90s) or ({part} unless {part} offset 90s)" in q
    assert q.count(" unless ") == q.count(" != ") == len(m.HOST_LABELS) + 2  # node, instance
    fleet = moved_query(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, None, 90, "node")
    assert fleet == (
        "(DCGM_FI_DEV_PCIE_REPLAY_COUNTER != DCGM_FI_DEV_PCIE_REPLAY_COUNTER offset 90s) or "
        "(DCGM_FI_DEV_PCIE_REPLAY_COUNTER unless DCGM_FI_DEV_PCIE_REPLAY_COUNTER offset 90s)"
    )


def test_no_rule_records_a_checks_gauge_so_the_sweep_sees_it_at_the_scrape() -> None:
    groups = rule_groups(HEALTH, StragglerConfig(), windows=windows_for(HEALTH))
    records = frozenset(rule.record for group in groups for rule in group.rules)
    adapter = PrometheusMetrics("http://prometheus.invalid")
    raw = []
    for request in REQUESTS:
        query, used, _ = adapter.plan(request, None, 3600, records)
        if request.reading is Reading.VALUE and not (request.per_node or request.lowest_per_node):
            assert used is None and query == query_for(request, None, 3600, "node"), request
            raw.append(request.name)
        else:
            assert worth_recording(request) and used is not None, request
    assert {
        m.DCGM_FI_DEV_XID_ERRORS,
        m.DCGM_FI_DEV_GPU_TEMP,
        m.DCGM_FI_DEV_ROW_REMAP_PENDING,
    } <= set(raw)


def test_the_cli_prints_the_rules(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEOWBOT_CONFIG", raising=False)
    assert main(["prometheus-rules", "--window", "6h", "--interval", "45"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    names = [g["name"] for g in doc["groups"]]
    # /node-health's (and the sweep's, by default the same), asked, /hw-faults'
    windows = sorted(
        int(n.split("-")[2].removesuffix("s"))
        for n in names
        if n.endswith(f"s-{m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER}")
    )
    assert windows == [3600, 21600, 86400]
    assert {g["interval"] for g in doc["groups"]} == {"45s"}
    assert main(["prometheus-rules", "--window", "forever"]) == 2


def test_each_precursor_candidate_is_recorded_every_minute_as_the_adapter_asks_for_it() -> None:
    cfg = PrecursorsConfig()
    groups = rule_groups(HEALTH, precursors=cfg, precursor_interval_s=90)
    (group,) = [
        g for g in yaml.safe_load(rules_yaml(groups))["groups"] if g["name"] == PRECURSOR_GROUP
    ]
    # Never slower than the finder's minute: a recorded point a minute, as the raw read.
    assert group["interval"] == "60s"
    records = _records([group])
    assert len(records) == len(cfg.candidate_list()) == 12
    for c in cfg.candidate_list():
        name = candidate_record(c)
        # Every node's per-node (and per-part) maximum: the adapter's query, no node matcher.
        assert records[name] == (
            f"({candidate_expr(c, None)}) or "
            f'label_replace(vector(time()), "{SENTINEL_LABEL}", "60", "", "")'
        )
        assert "$nodes" not in records[name]
    transmit = next(c for c in cfg.candidate_list() if c.name == "network transmit")
    assert candidate_record(transmit).startswith("meowbot:node_network_transmit_bytes_total:")
    assert records[candidate_record(transmit)].startswith(
        "(max by (instance, device) (rate(node_network_transmit_bytes_total{"
    )
    clock = next(c for c in cfg.candidate_list() if c.name == "SM clock")
    assert records[candidate_record(clock)].startswith("(min by (Hostname) (DCGM_FI_DEV_SM_CLOCK))")
    # A candidate whose query changed is another series: the old rule is not read for it.
    five = CandidateConfig(
        name="network transmit",
        query=transmit.query.replace("[2m]", "[5m]"),
        unit="Gbps",
        by="device",
    ).candidate()
    assert candidate_record(five) not in records
    # Without the section (or before it is configured), no precursor group.
    assert PRECURSOR_GROUP not in [g.name for g in rule_groups(HEALTH)]


def test_two_candidates_of_one_query_share_one_rule() -> None:
    twin = CandidateConfig(name="load again", query="node_load1{$nodes}")
    groups = rule_groups(HEALTH, precursors=PrecursorsConfig(add=[twin]))
    (group,) = [g for g in groups if g.name == PRECURSOR_GROUP]
    assert len(group.rules) == 12  # "load" reads node_load1{$nodes} too


def test_a_selection_too_long_for_victoriametrics_is_read_fleet_wide_and_kept_here() -> None:
    adapter = PrometheusMetrics("http://127.0.0.1:9")
    request = next(r for r in REQUESTS if r.reading is Reading.INCREASE)
    few = adapter.plan(request, ["gpu-0001", "gpu-0002"], 86400, frozenset())
    assert not few.select_here and "0001|" in few.query
    many = [f"gpu-{i:04d}" for i in range(1, 65)]
    assert len(query_for(request, many, 86400, "node")) > MAX_QUERY_CHARS
    plan = adapter.plan(request, many, 86400, frozenset())
    assert plan.select_here and plan.query == query_for(request, None, 86400, "node")
