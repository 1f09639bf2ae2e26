"""/regressions' read from a real Prometheus: 4,096 nodes over 7 days. Not a timed test; by hand.

    .venv/bin/python bench/regressions_prometheus.py [--nodes 4096] [--days 7] [--runs 5]
        [--keep DIR]

Target: the whole answer in < 10 s, with a number of PromQL queries that does not grow with
the node count; this measures the read (`PrometheusFleetHistory.versions` of driver, kernel
and firmware, then `job_paces` and `node_compute` concurrently, as /regressions reads them),
the part that touches days of data. The statistics run on what it returns (bench/regressions.py).

Set-up:
1. ``now`` is the wall clock floored to the hour; ``SimFleet(n, seed=1)`` with no faults and a
   kernel rolling out over 24 h from 4 days ago (2 % slower steps, not that it matters here).
2. Prometheus is backfilled (``promtool tsdb create-blocks-from openmetrics``) with what the
   read loads, written straight from the simulator's history (``SimFleetHistory``): every
   node's ``node_uname_info`` (its kernel of the time), every GPU's ``DCGM_FI_DEV_GPU_TEMP``
   with its driver and VBIOS labels (32k series at 4,096 nodes), every rank's
   ``training_step_time_seconds`` (its job's pace; job_id and node labels: the job-node map)
   and ``training_compute_time_seconds`` (its node's compute time in the job), and the
   recording rules' series as if they had run all week (the pace of every job, each node's
   values of each info metric, each job's nodes, each node's compute time in each job; with
   their sentinels). Samples are
   written at the instants the read's range queries land on (the adapter's bounded step over
   the window: 42 min for the node series and the recorded rows, 5 min for the recorded pace,
   5.5 h for the 32k GPU and rank series at 4,096 nodes) and at ``now``, not at every scrape
   of a week: Prometheus finds one sample a series a step, as on a live server, but decodes
   fewer chunks than a 1-minute scrape would make it.
3. Prometheus starts on that folder (no scrapes); the read runs ``--runs`` times each way,
   alternating, each with a fresh client: with the rules (``recorded``) and without
   (``raw``: a Prometheus that has not run meowbot's rules for the whole window); the report
   gives each run's seconds, the queries and the steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot import metric_names as m  # noqa: E402
from bot.backends import prometheus_rules as rules  # noqa: E402
from bot.backends.prometheus import PrometheusMetrics  # noqa: E402
from bot.backends.prometheus_history import (  # noqa: E402
    PrometheusFleetHistory,
    bounded_step,
)
from bot.backends.sim import SimFleet  # noqa: E402
from bot.backends.sim.history import SimFleetHistory  # noqa: E402
from bot.regressions.config import RegressionsConfig  # noqa: E402
from bot.regressions.models import JobPace, NodeCompute, VersionSpan  # noqa: E402
from bot.triage.stragglers import StragglerConfig  # noqa: E402
from scripts.testsvc.prometheus import BackfilledPrometheus, backfill_openmetrics  # noqa: E402

COMPONENTS = ("driver", "kernel", "firmware")
NEW_KERNEL = "5.15.0-113-generic"


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def grid(start_s: int, end_s: int, step: int) -> list[int]:
    """The instants a range query of `step` lands on inside the window, and the end."""
    first = math.ceil(start_s / step) * step
    return [*range(first, end_s + 1, step), *([end_s] if end_s % step else [])]


def held(pace: JobPace | NodeCompute, times: list[int]) -> Iterator[tuple[int, float]]:
    """The job's pace (or a node's compute time in it) at each instant: its latest sample (the
    sim's are sampled coarser)."""
    points = [(int(s.at.timestamp()), s.seconds) for s in pace.samples]
    k = 0
    for t in times:
        while k + 1 < len(points) and points[k + 1][0] <= t:
            k += 1
        if points and points[0][0] <= t <= points[-1][0] + 3600:
            yield t, points[k][1]


def family(out: list[str], name: str, rows: Iterator[tuple[str, list[tuple[int, float]]]]) -> int:
    out.append(f"# TYPE {name} gauge\n")
    lines = 0
    for labels, points in rows:
        out.append("".join(f"{name}{{{labels}}} {v} {t}\n" for t, v in points))
        lines += len(points)
    return lines


def write_history(
    path: Path,
    fleet: SimFleet,
    spans: list[VersionSpan],
    paces: list[JobPace],
    computes: list[NodeCompute],
    start_s: int,
    end_s: int,
    steps: dict[str, int],
) -> int:
    """OpenMetrics of what the read loads; returns the sample count."""
    cfg = StragglerConfig()
    samples = 0
    node_grid = grid(start_s, end_s, steps["node"])
    pace_grid = grid(start_s, end_s, steps["pace"])
    wide_grid = grid(start_s, end_s, steps["wide"])
    by_node: dict[tuple[str, str], list[VersionSpan]] = {}
    for s in spans:
        by_node.setdefault((s.node, s.component), []).append(s)
    with path.open("w") as f:
        out: list[str] = []

        def uname() -> Iterator[tuple[str, list[tuple[int, float]]]]:
            for node in fleet.nodes:
                for s in by_node[(node, "kernel")]:
                    lo, hi = s.start.timestamp(), s.end.timestamp()
                    pts = [(t, 1.0) for t in node_grid if lo <= t <= hi]
                    yield f'instance="{node}:9100",job="node",release="{s.value}"', pts

        samples += family(out, m.NODE_UNAME_INFO, uname())
        f.writelines(out)
        out.clear()

        def gpus() -> Iterator[tuple[str, list[tuple[int, float]]]]:
            for node in fleet.nodes:
                (driver,) = by_node[(node, "driver")]
                (vbios,) = by_node[(node, "firmware")]
                for g in range(fleet.gpus_per_node):
                    labels = (
                        f'gpu="{g}",{m.LABEL_HOSTNAME}="{node}",'
                        f'{m.LABEL_DRIVER_VERSION}="{driver.value}",'
                        f'{m.LABEL_VBIOS_VERSION}="{vbios.value}"'
                    )
                    yield labels, [(t, 40.0) for t in wide_grid]

        samples += family(out, m.DCGM_FI_DEV_GPU_TEMP, gpus())
        f.writelines(out)
        out.clear()

        def ranks() -> Iterator[tuple[str, list[tuple[int, float]]]]:
            for pace in paces:
                points = list(held(pace, wide_grid))
                for position, node in enumerate(pace.nodes):
                    for g in range(fleet.gpus_per_node):
                        rank = position * fleet.gpus_per_node + g
                        labels = f'{cfg.job_label}="{pace.job_id}",node="{node}",rank="{rank}"'
                        yield labels, points

        samples += family(out, cfg.step_metric, ranks())
        f.writelines(out)
        out.clear()

        position = {(p.job_id, node): k for p in paces for k, node in enumerate(p.nodes)}

        def compute_ranks() -> Iterator[tuple[str, list[tuple[int, float]]]]:
            # Each rank's compute time as a training exporter reports it: a node's GPUs alike.
            for c in computes:
                points = list(held(c, wide_grid))
                first = position.get((c.job_id, c.node), 0) * fleet.gpus_per_node
                for g in range(fleet.gpus_per_node):
                    labels = f'{cfg.job_label}="{c.job_id}",node="{c.node}",rank="{first + g}"'
                    yield labels, points

        samples += family(out, cfg.compute_metric, compute_ranks())
        f.writelines(out)
        out.clear()

        name = rules.recorded_name(rules.pace_queries(cfg)[0], cfg.step_metric)

        def recorded() -> Iterator[tuple[str, list[tuple[int, float]]]]:
            for pace in paces:
                yield f'{cfg.job_label}="{pace.job_id}"', list(held(pace, pace_grid))
            yield f'{rules.SENTINEL_LABEL}="60"', [(t, float(t)) for t in pace_grid]

        samples += family(out, name, recorded())
        f.writelines(out)
        out.clear()
        samples += write_recorded(out, fleet, by_node, paces, computes, node_grid, pace_grid)
        out.append("# EOF\n")
        f.writelines(out)
    return samples


def write_recorded(
    out: list[str],
    fleet: SimFleet,
    by_node: dict[tuple[str, str], list[VersionSpan]],
    paces: list[JobPace],
    computes: list[NodeCompute],
    times: list[int],
    sentinel_times: list[int],
) -> int:
    """The recording rules of /regressions as they would have run all week: a row a node of
    each info metric, a row a node of each job, and a node's compute time in each job, each
    with its sentinel."""
    config = RegressionsConfig()
    cfg = StragglerConfig()
    # The sentinel as often as the recorded pace's (a real one runs every minute).
    sentinel = (f'{rules.SENTINEL_LABEL}="60"', [(t, float(t)) for t in sentinel_times])
    samples = 0
    for metric, labels in rules.info_labels(config).items():
        name = rules.recorded_name(rules.info_count_query(metric, labels), metric)

        def rows(
            metric: str = metric, labels: tuple[str, ...] = labels
        ) -> Iterator[tuple[str, list[tuple[int, float]]]]:
            components = [c for c, i in config.info_metrics().items() if i.metric == metric]
            gpu = metric == m.DCGM_FI_DEV_GPU_TEMP
            for node in fleet.nodes:
                # Built-in components only change the kernel here: one span for the others.
                spans = [by_node[(node, c)] for c in components]
                changing = max(spans, key=len)
                for span in changing:
                    values = [
                        (label, next(s.value for s in part if s.start <= span.start <= s.end))
                        for label, part in zip(labels, spans, strict=True)
                    ]
                    host = f'{m.LABEL_HOSTNAME}="{node}"' if gpu else f'instance="{node}:9100"'
                    text = ",".join([host, *(f'{k}="{v}"' for k, v in values)])
                    lo, hi = span.start.timestamp(), span.end.timestamp()
                    value = float(fleet.gpus_per_node if gpu else 1)
                    yield text, [(t, value) for t in times if lo <= t <= hi]
            yield sentinel

        samples += family(out, name, rows())
    nodes = rules.job_nodes_query(cfg)

    def job_rows() -> Iterator[tuple[str, list[tuple[int, float]]]]:
        for pace in paces:
            points = [(t, float(fleet.gpus_per_node)) for t, _ in held(pace, times)]
            for node in pace.nodes:
                yield f'{cfg.job_label}="{pace.job_id}",node="{node}"', points
        yield sentinel

    samples += family(out, rules.recorded_name(nodes, cfg.step_metric), job_rows())

    def compute_rows() -> Iterator[tuple[str, list[tuple[int, float]]]]:
        for c in computes:
            yield f'{cfg.job_label}="{c.job_id}",node="{c.node}"', list(held(c, times))
        yield sentinel

    name = rules.recorded_name(rules.node_compute_query(cfg), cfg.compute_metric)
    samples += family(out, name, compute_rows())
    return samples


async def both_reads(
    sim: SimFleetHistory, start: datetime, end: datetime
) -> tuple[list[JobPace], list[NodeCompute]]:
    return await asyncio.gather(
        sim.job_paces(start=start, end=end), sim.node_compute(start=start, end=end)
    )


async def one_read(
    url: str, start: datetime, end: datetime, recorded: bool, budget: int
) -> tuple[float, int, dict[str, int]]:
    metrics = PrometheusMetrics(url, recorded=recorded)
    history = PrometheusFleetHistory(metrics, RegressionsConfig(sample_budget=budget))
    try:
        t0 = time.perf_counter()
        # As the service reads them (bot/regressions/service.py): the versions, then every
        # job's pace and each node's compute time in it together.
        spans = await history.versions(COMPONENTS, start=start, end=end)
        paces, computes = await asyncio.gather(
            history.job_paces(start=start, end=end), history.node_compute(start=start, end=end)
        )
        took = time.perf_counter() - t0
    finally:
        await metrics.close()
    if not spans or not paces or not computes:
        raise SystemExit("the read came back empty: the backfill and the read disagree")
    return took, metrics.queries, dict(history.last_steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="backfill into this folder and keep it")
    ap.add_argument("--data", type=Path, help="read a folder --keep made (give its --now)")
    ap.add_argument("--now", type=int, help="the fleet's now, epoch seconds (default: this hour)")
    ap.add_argument("--budget", type=int, default=RegressionsConfig().sample_budget,
                    help="samples a query may evaluate (regressions.sample_budget)")  # fmt: skip
    args = ap.parse_args()

    wall = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    now = wall if args.now is None else datetime.fromtimestamp(args.now, UTC)
    say(f"now {int(now.timestamp())}")
    start, end = now - timedelta(days=args.days), now
    start_s, end_s = int(start.timestamp()), int(end.timestamp())
    fleet = SimFleet(args.nodes, seed=1, now=now, fault_rate=0.0)
    fleet.add_rollout(
        "kernel", NEW_KERNEL, start=now - timedelta(days=4), duration=timedelta(hours=24),
        effect=0.02,
    )  # fmt: skip
    sim = SimFleetHistory(fleet)
    t0 = time.perf_counter()
    spans = asyncio.run(sim.versions(COMPONENTS, start=start, end=end))
    paces, computes = ([], []) if args.data else asyncio.run(both_reads(sim, start, end))
    say(f"simulated history: {len(spans)} spans, {len(paces)} jobs, "
        f"{len(computes)} job-node compute series "
        f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    span_s = end_s - start_s
    budget = args.budget
    gpus = args.nodes * fleet.gpus_per_node
    steps = {
        "node": bounded_step(span_s, args.nodes, budget),
        "wide": bounded_step(span_s, gpus, budget),
        "pace": bounded_step(span_s, len(paces) + 1, budget),
    }
    with tempfile.TemporaryDirectory(prefix="meowbot-regressions-") as tmp_name:
        tmp = Path(tmp_name)
        text = tmp / "history.om"
        samples = 0
        data = args.data or args.keep or tmp / "data"
        if args.data is None:
            t0 = time.perf_counter()
            samples = write_history(text, fleet, spans, paces, computes, start_s, end_s, steps)
            say(f"wrote {samples / 1e6:.1f}M samples, {text.stat().st_size / 1e9:.1f} GB "
                f"({time.perf_counter() - t0:.0f} s); steps {steps}")  # fmt: skip
            t0 = time.perf_counter()
            backfill_openmetrics(text, data, timeout_s=3600)
            say(f"backfilled ({time.perf_counter() - t0:.0f} s)")
        prom = BackfilledPrometheus(
            tmp, data, "count(node_uname_info)", now.timestamp(), timeout_s=300
        )
        prom.start()
        try:
            url = prom.url
            say(f"{prom.settle()} blocks loaded")
            report: dict[str, object] = {
                "nodes": args.nodes,
                "days": args.days,
                "jobs": len(paces),
                "samples_backfilled": samples,
                "target_s": 10,
            }
            # Alternating, so that the machine's other load falls on both alike.
            times: dict[str, list[float]] = {"recorded": [], "raw": []}
            seen: dict[str, tuple[int, dict[str, int]]] = {}
            for run in range(args.runs):
                for mode in times:
                    took, queries, used = asyncio.run(
                        one_read(url, start, end, mode == "recorded", budget)
                    )
                    times[mode].append(took)
                    seen[mode] = (queries, used)
                    say(f"run {run + 1} {mode}: {took:.2f} s, {queries} queries, steps {used}")
        finally:
            prom.stop()
    for mode, took in times.items():
        report[mode] = {
            "read_s": [round(t, 2) for t in took],
            "median_s": round(statistics.median(took), 2),
            "max_s": round(max(took), 2),
            "queries": seen[mode][0],
            "steps_s": seen[mode][1],
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
