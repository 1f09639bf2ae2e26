"""The regression finder's history read from a real Prometheus holding three days of a rollout.

This test starts its own Prometheus (the binary the test environment installs) on a data folder
backfilled with promtool from the simulated fleet's own exposition: `node_uname_info`, the DCGM
temperature series (driver and VBIOS labels), every rank's step time and (in the jobs that
export it) compute time every 5 minutes over 72 h, while a kernel rolls out node by node (2 %
slower steps, on the upgraded nodes' compute time), a container image rolls out with it to the
minute (a configured info metric), and a driver reaches half the fleet. What
`PrometheusFleetHistory` reads must be what the simulator knows it exported
(`SimFleetHistory`), at the step's resolution, in a fixed number of queries.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from bot import metric_names as m
from bot.backends import prometheus_rules as rules
from bot.backends.prometheus import PrometheusMetrics
from bot.backends.prometheus_history import PrometheusFleetHistory, bounded_step
from bot.backends.sim import SimFleet
from bot.backends.sim.history import SimFleetHistory
from bot.regressions.analysis import analyse
from bot.regressions.config import InfoMetric, RegressionsConfig
from bot.regressions.models import JobPace, NodeCompute, VersionSpan
from bot.triage.stragglers import StragglerConfig
from scripts.testsvc.prometheus import BackfilledPrometheus, backfill_openmetrics
from tests.conftest import need_service
from tests.integration.engines import ENGINES, engine_id, engine_urls

HOURS = 72
STEP_S = 300
NEW_KERNEL = "5.15.0-113-generic"
NEW_DRIVER = "560.35.03"
IMAGE = InfoMetric(metric="container_image_info", label="image")
CONFIG = RegressionsConfig(components={"image": IMAGE})


@dataclass(frozen=True)
class Backfilled:
    urls: dict[str, str]
    """By engine (tests/integration/engines.py: ENGINES)."""
    fleet: SimFleet
    start: datetime
    end: datetime


def _om_family(name: str, rows: dict[str, list[tuple[int, float]]]) -> Iterator[str]:
    yield f"# TYPE {name} gauge\n"
    for labels, points in rows.items():
        yield "".join(f"{name}{{{labels}}} {v} {t}\n" for t, v in points)


def _extra_history(fleet: SimFleet, start: datetime, end: datetime) -> Iterator[str]:
    """What the fleet's exposition does not carry: the configured image info metric, and the
    recorded pace and GPU versions as meowbot's rules keep them (with their sentinels,
    evaluated all along)."""

    history = SimFleetHistory(fleet)
    spans = asyncio.run(history.versions(["image"], start=start, end=end))
    grid = range(int(start.timestamp()), int(end.timestamp()) + 1, STEP_S)
    image: dict[str, list[tuple[int, float]]] = {}
    for span in spans:
        labels = f'instance="{span.node}:9100",job="node",image="{span.value}"'
        image.setdefault(labels, []).extend(
            (t, 1.0) for t in grid if span.start.timestamp() <= t <= span.end.timestamp()
        )
    yield from _om_family(IMAGE.metric, image)
    # The GPUs' versions as meowbot's rule records them: a row a node, its GPUs counted.
    labels = rules.info_labels(CONFIG)[m.DCGM_FI_DEV_GPU_TEMP]
    expr = rules.info_count_query(m.DCGM_FI_DEV_GPU_TEMP, labels)
    gpu_spans = asyncio.run(history.versions(["driver", "firmware"], start=start, end=end))
    (vbios,) = {s.value for s in gpu_spans if s.component == "firmware"}
    versions: dict[str, list[tuple[int, float]]] = {}
    for span in gpu_spans:
        if span.component != "driver":
            continue
        row = (
            f'{m.LABEL_HOSTNAME}="{span.node}",{m.LABEL_DRIVER_VERSION}="{span.value}",'
            f'{m.LABEL_VBIOS_VERSION}="{vbios}"'
        )
        versions.setdefault(row, []).extend(
            (t, 8.0) for t in grid if span.start.timestamp() <= t <= span.end.timestamp()
        )
    versions[f'{rules.SENTINEL_LABEL}="60"'] = [(t, float(t)) for t in grid]
    yield from _om_family(rules.recorded_name(expr, m.DCGM_FI_DEV_GPU_TEMP), versions)
    cfg = StragglerConfig()
    name = rules.recorded_name(rules.pace_queries(cfg)[0], cfg.step_metric)
    paces = asyncio.run(history.job_paces(start=start, end=end))
    recorded = {
        f'{cfg.job_label}="{p.job_id}"': [(int(s.at.timestamp()), s.seconds) for s in p.samples]
        for p in paces
    }
    recorded[f'{rules.SENTINEL_LABEL}="60"'] = [(t, float(t)) for t in grid]
    yield from _om_family(name, recorded)
    # Each node's compute time in each job, as the regressions group records it.
    name = rules.recorded_name(rules.node_compute_query(cfg), cfg.compute_metric)
    computes = asyncio.run(history.node_compute(start=start, end=end))
    per_node = {
        f'{cfg.job_label}="{c.job_id}",{cfg.node_label}="{c.node}"': [
            (int(s.at.timestamp()), s.seconds) for s in c.samples
        ]
        for c in computes
    }
    per_node[f'{rules.SENTINEL_LABEL}="60"'] = [(t, float(t)) for t in grid]
    yield from _om_family(name, per_node)


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    need_service("PROMETHEUS_URL")  # the test environment installed Prometheus and promtool
    tmp = tmp_path_factory.mktemp("history")
    # Prometheus keeps what is younger than its retention by the wall clock: the fleet's now.
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    fleet = SimFleet(32, seed=3, now=now, fault_rate=0.0)
    kernel = fleet.add_rollout(
        "kernel",
        NEW_KERNEL,
        start=now - timedelta(hours=40),
        duration=timedelta(hours=12),
        effect=0.02,
    )
    fleet.add_rollout("image", "v42", old="v41", start=now, duration=timedelta(0), like=kernel)
    fleet.add_rollout(
        "driver",
        NEW_DRIVER,
        start=now - timedelta(hours=60),
        duration=timedelta(hours=2),
        coverage=0.5,
    )
    start, end = now - timedelta(hours=HOURS), now
    text = tmp / "history.om"
    with text.open("w") as out:
        for chunk in fleet.openmetrics_history(
            hours=HOURS,
            step_s=STEP_S,
            metrics=[
                m.NODE_UNAME_INFO,
                m.DCGM_FI_DEV_GPU_TEMP,
                m.TRAINING_STEP_TIME_SECONDS,
                m.TRAINING_COMPUTE_TIME_SECONDS,
            ],
        ):
            if chunk != "# EOF\n":
                out.write(chunk)
        out.writelines(_extra_history(fleet, start, end))
        out.write("# EOF\n")
    data = tmp / "data"
    backfill_openmetrics(text, data)
    with (
        BackfilledPrometheus(tmp, data, "count(node_uname_info)", end.timestamp()) as prom,
        engine_urls(prom.url, tmp, data, end) as urls,
    ):
        yield Backfilled(urls, fleet, start, end)


@pytest.fixture(scope="module", params=ENGINES, ids=engine_id)
def url(backfilled: Backfilled, request: pytest.FixtureRequest) -> str:
    """Each engine in turn, holding the same history."""
    return backfilled.urls[request.param]


def _switches(spans: list[VersionSpan], component: str) -> dict[tuple[str, str], datetime]:
    """(node, value) -> when that value started showing, for values that replaced another."""
    firsts: dict[str, datetime] = {}
    for s in spans:
        if s.component == component:
            firsts[s.node] = min(firsts.get(s.node, s.start), s.start)
    return {
        (s.node, s.value): s.start
        for s in spans
        if s.component == component and s.start > firsts[s.node]
    }


def _on_grid(t: datetime, step_s: int) -> datetime:
    return datetime.fromtimestamp(math.ceil(t.timestamp() / step_s) * step_s, UTC)


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "raw"])
async def test_versions_show_each_nodes_switch_at_the_step_after_it(
    backfilled: Backfilled, url: str, recorded: bool
) -> None:
    metrics = PrometheusMetrics(url, recorded=recorded)
    history = PrometheusFleetHistory(metrics, CONFIG)
    components = ["kernel", "image", "driver", "firmware"]
    try:
        got = await history.versions(components, start=backfilled.start, end=backfilled.end)
    finally:
        await metrics.close()
    # Driver and firmware share the DCGM series: three metrics. Raw, a count and a range
    # query each; with rules, the GPUs' recorded rows (a count, a range query), and for the
    # two metrics no rule records here, a count of their rows (none) before the raw read.
    assert metrics.queries == (8 if recorded else 6)
    assert metrics.recorded_reads == (1 if recorded else 0)
    truth = await SimFleetHistory(backfilled.fleet).versions(
        components, start=backfilled.start, end=backfilled.end
    )
    for component in components:
        seen = {(s.node, s.value) for s in got if s.component == component}
        assert seen == {(s.node, s.value) for s in truth if s.component == component}
        want = {k: _on_grid(t, STEP_S) for k, t in _switches(truth, component).items()}
        assert _switches(got, component) == want, component
    kernel = _switches(got, "kernel")
    assert len(kernel) == 32 and {v for _, v in kernel} == {NEW_KERNEL}
    assert len(_switches(got, "driver")) == 16
    assert _switches(got, "firmware") == {}
    # The image switched on every node at the kernel's minute: the confounded pair is visible.
    assert {n: t for (n, _), t in _switches(got, "image").items()} == {
        n: t for (n, _), t in kernel.items()
    }


def _by_job(paces: list[JobPace]) -> dict[str, JobPace]:
    return {p.job_id: p for p in paces}


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "raw"])
async def test_job_paces_are_every_jobs_slowest_rank_with_its_nodes(
    backfilled: Backfilled, url: str, recorded: bool
) -> None:
    metrics = PrometheusMetrics(url, recorded=recorded)
    history = PrometheusFleetHistory(metrics, CONFIG)
    try:
        got = _by_job(await history.job_paces(start=backfilled.start, end=backfilled.end))
    finally:
        await metrics.close()
    # The pace: a count and a range query, recorded or raw; the map (not recorded here): with
    # rules, a count of its recorded rows (none) first.
    assert metrics.queries == (5 if recorded else 4)
    assert metrics.recorded_reads == (1 if recorded else 0)
    truth = _by_job(
        await SimFleetHistory(backfilled.fleet).job_paces(
            start=backfilled.start, end=backfilled.end
        )
    )
    assert got.keys() == truth.keys() and len(got) >= 5
    for job_id, want in truth.items():
        pace = got[job_id]
        assert pace.nodes == tuple(sorted(want.nodes))
        assert pace.gpus == want.gpus
        mine = {s.at: s.seconds for s in pace.samples}
        theirs = {s.at: s.seconds for s in want.samples}
        # The raw read's first step can fall before the job's first sample, no more.
        common = mine.keys() & theirs.keys()
        assert len(common) >= len(theirs) - 1
        off = [t for t in common if mine[t] != pytest.approx(theirs[t], abs=1e-4)]
        if url == backfilled.urls.get("VICTORIA_URL") and not recorded:
            # Read raw on VictoriaMetrics, a point or two of the slowest rank's 865 differ in the
            # fourth digit (3.4164 s against 3.4169 s): docs/prometheus.md#victoriametrics.
            assert len(off) <= len(common) // 100, off
            assert all(mine[t] == pytest.approx(theirs[t], rel=1e-3) for t in common)
        else:
            assert off == [], off


async def test_the_step_widens_to_stay_within_the_sample_budget(
    backfilled: Backfilled, url: str
) -> None:
    metrics = PrometheusMetrics(url, recorded=False)
    history = PrometheusFleetHistory(metrics, RegressionsConfig(sample_budget=100_000))
    start, end = backfilled.start, backfilled.end
    try:
        got = await history.versions(["kernel", "driver"], start=start, end=end)
    finally:
        await metrics.close()
    span_s = HOURS * 3600
    # 32 uname series over 72 h fit at the finest step; 256 GPU series need a wider one.
    assert history.last_steps[m.NODE_UNAME_INFO] == STEP_S
    step = history.last_steps[m.DCGM_FI_DEV_GPU_TEMP]
    assert step == bounded_step(span_s, 256, 100_000) == 720
    assert 256 * span_s / step <= 100_000
    truth = await SimFleetHistory(backfilled.fleet).versions(["driver"], start=start, end=end)
    # Its first scrape (every 5 minutes here) after the switch, at the next wide step.
    want = {k: _on_grid(_on_grid(t, STEP_S), step) for k, t in _switches(truth, "driver").items()}
    assert _switches(got, "driver") == want and len(want) == 16


def _by_job_node(rows: list[NodeCompute]) -> dict[tuple[str, str], NodeCompute]:
    return {(c.job_id, c.node): c for c in rows}


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "raw"])
async def test_node_compute_is_each_nodes_mean_compute_time_in_each_job(
    backfilled: Backfilled, url: str, recorded: bool
) -> None:
    metrics = PrometheusMetrics(url, recorded=recorded)
    history = PrometheusFleetHistory(metrics, CONFIG)
    start, end = backfilled.start, backfilled.end
    try:
        got = await history.node_compute(start=start, end=end)
        # A count and one range query, recorded (a row a job and node) or raw (the ranks
        # averaged in Prometheus), whatever the fleet size.
        assert metrics.queries == 2 and metrics.recorded_reads == (1 if recorded else 0)
        spans = await history.versions(["kernel"], start=start, end=end)
        paces = await history.job_paces(start=start, end=end)
    finally:
        await metrics.close()
    assert history.last_steps["compute"] == STEP_S
    truth_history = SimFleetHistory(backfilled.fleet)
    truth = _by_job_node(await truth_history.node_compute(start=start, end=end))
    mine = _by_job_node(got)
    assert mine.keys() == truth.keys() and len({j for j, _ in mine}) >= 3
    for key, want in truth.items():
        at = {s.at: s.seconds for s in mine[key].samples}
        theirs = {s.at: s.seconds for s in want.samples}
        common = at.keys() & theirs.keys()
        assert len(common) >= len(theirs) - 1
        # Each rank's exported value is rounded to the exposition's digits.
        assert all(at[t] == pytest.approx(theirs[t], rel=1e-3) for t in common)
    # The whole finder on what Prometheus returned: the per-node evidence shows the kernel's
    # 2 % on the upgraded nodes of the jobs that ran on both kernels at once.
    report = analyse(spans, paces, ["kernel"], start, end, computes=got)
    [kernel] = report.findings
    # (Two jobs of 32 nodes span both kernels for hours: too few for an interval to mean much.)
    assert kernel.same_work is not None and kernel.same_work.jobs >= 1
    assert kernel.same_work.effect_pct == pytest.approx(2.0, abs=0.2)
    assert kernel.same_work.nodes_new >= 2 and kernel.same_work.agrees


async def test_node_compute_read_raw_widens_its_step_for_the_ranks_it_loads(
    backfilled: Backfilled,
    url: str,
) -> None:
    metrics = PrometheusMetrics(url, recorded=False)
    history = PrometheusFleetHistory(metrics, RegressionsConfig(sample_budget=100_000))
    try:
        got = await history.node_compute(start=backfilled.start, end=backfilled.end)
    finally:
        await metrics.close()
    assert metrics.queries == 2
    # Raw, Prometheus averages every rank's series a step: those, not the rows it returns,
    # are what the budget bounds.
    fleet = backfilled.fleet
    ranks = sum(
        1
        for j, *_ in fleet.snapshot(backfilled.end).rank_times()
        if fleet.job_specs[j].exports_compute_time
    )
    step = history.last_steps["compute"]
    assert ranks > len(got) >= 8
    assert step == bounded_step(HOURS * 3600, ranks, 100_000)
    assert all(len(c.samples) <= HOURS * 3600 // step + 1 for c in got)
