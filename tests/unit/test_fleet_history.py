"""Where /regressions reads its history: the `regressions:` config section, the choice of the
FleetHistory in the composition root, and how the Prometheus adapter bounds and reads its
range queries (the reads themselves: tests/integration/test_prometheus_history.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot import metric_names as m
from bot.app import make_regressions_history, make_triage
from bot.backends import prometheus_rules as rules
from bot.backends.prometheus_history import (
    PrometheusFleetHistory,
    aligned,
    bounded_step,
    spans_of,
)
from bot.backends.sim.history import SimFleetHistory
from bot.config import ConfigError, load_settings
from bot.config_sections import regressions_config
from bot.regressions.config import BUILT_IN, InfoMetric, RegressionsConfig
from bot.triage.checks import HealthConfig
from bot.triage.stragglers import StragglerConfig

WEEK_S = 7 * 86400


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "meowbot.yaml"
    path.write_text(text)
    return str(path)


def test_configured_components_add_to_the_built_in_three(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        "regressions:\n  components:\n    image: {metric: container_image_info, label: image}\n",
    )
    parsed = regressions_config(load_settings(MEOWBOT_CONFIG=cfg))
    assert list(parsed.info_metrics()) == ["driver", "kernel", "firmware", "image"]
    assert parsed.info_metrics()["image"] == InfoMetric(
        metric="container_image_info", label="image"
    )
    assert BUILT_IN["kernel"] == InfoMetric(metric=m.NODE_UNAME_INFO, label=m.LABEL_RELEASE)


@pytest.mark.parametrize(
    ("yaml", "said"),
    [
        ('    image: {metric: "up or vector(1)", label: image}\n', "not a metric name"),
        ("    image: {metric: info, label: __name__}\n", "not a label name"),
        ("    Image!: {metric: info, label: image}\n", "not a component name"),
        ("    image: {metric: info}\n", "label"),
    ],
)
def test_a_wrong_component_stops_start_up_with_a_sentence(
    tmp_path: Path, yaml: str, said: str
) -> None:
    cfg = _config(tmp_path, "regressions:\n  components:\n" + yaml)
    with pytest.raises(ConfigError, match="regressions") as err:
        regressions_config(load_settings(MEOWBOT_CONFIG=cfg))
    assert said in str(err.value)


def test_the_history_is_prometheus_with_its_url_and_the_sim_fleets_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under scripts/testenv.py the environment names a Prometheus and a Slurm: the sim fleet is
    # only without them.
    for var in ("PROMETHEUS_URL", "SLURM_REST_URL", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)
    cfg = _config(tmp_path, "regressions:\n  components:\n    image: {metric: i, label: image}\n")
    settings = load_settings(PROMETHEUS_URL="http://127.0.0.1:9", MEOWBOT_CONFIG=cfg)
    triage = make_triage(settings)
    history = make_regressions_history(settings, triage)
    assert isinstance(history, PrometheusFleetHistory)
    assert history.metrics is triage.metrics  # one client, one node label
    assert history.components() == ("driver", "kernel", "firmware", "image")
    sim_settings = load_settings(MEOWBOT_FLEET="sim:64")
    sim_triage = make_triage(sim_settings)
    sim = make_regressions_history(sim_settings, sim_triage)
    assert isinstance(sim, SimFleetHistory)
    assert sim.fleet.n_nodes == 64
    # The bot's simulated fleet has a week behind it: a kernel rolled out everywhere.
    (rollout,) = sim.fleet.rollouts
    assert rollout.component == "kernel" and rollout.effect == 0.02
    assert all(t <= sim.fleet.now.timestamp() for t in rollout.switch_s)
    assert {sim.fleet.node(n).kernel_version for n in sim.fleet.nodes} == {rollout.new}


def test_the_step_keeps_every_query_within_the_budget_whatever_the_fleet() -> None:
    budget = 1_000_000
    for series in (32, 4096, 32_768, 400_000):
        step = bounded_step(WEEK_S, series, budget)
        assert step % 60 == 0 and step >= 300
        assert series * WEEK_S / step <= budget
    assert bounded_step(WEEK_S, 4096, budget) == 2520  # the kernel at 4,096 nodes
    assert bounded_step(WEEK_S, 32_768, budget) == 19860  # their 32k GPUs' driver labels
    start = datetime(2026, 12, 1, 3, 7, tzinfo=UTC)
    end = datetime(2026, 12, 8, 3, 7, tzinfo=UTC)
    first, last = aligned(start, end, 2520)
    assert first >= start and last <= end
    assert first.timestamp() % 2520 == 0 and last.timestamp() % 2520 == 0


def _first(node: str, release: str, t: int) -> dict[str, object]:
    labels = {"instance": f"{node}:9100", m.LABEL_RELEASE: release}
    return {"metric": labels, "value": [1e9, str(t)]}


def test_spans_run_from_each_values_first_sight_to_the_next_ones() -> None:
    end = datetime.fromtimestamp(3600, UTC)
    rows = [
        _first("gpu-0001", "old", 0),
        _first("gpu-0001", "new", 1500),
        # Two series of one node and value (GPUs, another label): the earliest of them.
        _first("gpu-0002", "old", 600),
        _first("gpu-0002", "old", 300),
        {"metric": {"instance": "gpu-0003:9100"}, "value": [0, "0"]},  # no value: no span
    ]
    spans = spans_of(rows, "kernel", m.LABEL_RELEASE, "node", step_s=300, end=end)
    got = [(s.node, s.value, s.start.timestamp(), s.end.timestamp()) for s in spans]
    assert got == [
        ("gpu-0001", "old", 0, 1200),
        ("gpu-0001", "new", 1500, 3600),
        ("gpu-0002", "old", 300, 3600),
    ]


def test_the_rules_record_exactly_what_the_history_reads() -> None:
    config = RegressionsConfig(components={"image": InfoMetric(metric="img_info", label="image")})
    groups = rules.rule_groups(
        HealthConfig(), StragglerConfig(), windows=[86400], regressions=config
    )
    (group,) = [g for g in groups if g.name == "meowbot-regressions"]
    assert group.interval_s == 60 and len(groups) > 1
    exprs = {r.expr: r.record for g in groups for r in g.rules}
    # One rule a metric (driver and VBIOS share the DCGM one), the job map and the nodes'
    # compute times; the kernel's
    # and the GPUs' are the drift checks' own per-node reads, recorded once, by their group.
    labels = (m.LABEL_DRIVER_VERSION, m.LABEL_VBIOS_VERSION)
    gpu = rules.info_count_query(m.DCGM_FI_DEV_GPU_TEMP, labels)
    kernel = rules.info_count_query(m.NODE_UNAME_INFO, (m.LABEL_RELEASE,))
    assert rules.info_labels(config)[m.DCGM_FI_DEV_GPU_TEMP] == labels
    assert exprs[gpu] == rules.recorded_name(gpu, m.DCGM_FI_DEV_GPU_TEMP)
    assert kernel in exprs
    own = {r.expr for r in group.rules}
    assert own == {
        rules.info_count_query("img_info", ("image",)),
        rules.job_nodes_query(StragglerConfig()),
        rules.node_compute_query(StragglerConfig()),
    }
    records = [r.record for g in groups for r in g.rules]
    assert len(records) == len(set(records))  # no series written by two groups
    # Without the section the rules are what they were.
    plain = rules.rule_groups(HealthConfig(), StragglerConfig(), windows=[86400])
    assert "meowbot-regressions" not in {g.name for g in plain}
