"""Straggler accuracy of /job-slow on synchronous physics, on the simulated fleet: run by hand.

    .venv/bin/python bench/stragglers.py [--jobs 200] [--nodes 4096] [--signals compute]
    .venv/bin/python bench/stragglers.py --healthy 300

Every job is synchronous: each rank reports the slowest rank's iteration time (within timer
noise), so the step times never name the node. ``--signals`` picks what the job exports:

- ``compute`` (default): step times, and each rank's compute time and collective wait;
- ``steps``: step times only (equal on every rank): the hardware proxies name the node;
- ``none``: no training metrics at all: the hardware proxies name the node.

Seeded jobs run on ``--nodes`` nodes of a fresh fleet; one node is slowed by 3-10 % (drawn per
job) through a cause drawn in turn from every node cause the simulator knows (with ``steps`` and
``none`` only the causes that leave a hardware trace: drift, PCIe and Ethernet errors do not
show in any proxy and are reported as suspects, which are not scored as found). The whole
service runs (`find_job` then `slow_job`: step, compute and wait times, 48 h pace, health read
and proxies from `SimMetrics`), and its answer is scored against the ground truth: precision
and recall of the straggler node and the cause named for it. Targets: >= 0.99, >= 0.99 and
>= 0.95.

``--healthy N``: N healthy synchronous jobs of 4 to 4,096 nodes (ordinary jitter, GPUs sampled
between steps at low clocks, half with compute times): the number of nodes named must be 0.

The real-Prometheus timing of a 4,096-node job is ``bench/health_prometheus.py --job``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import sim_triage
from bot.backends.sim.fleet import STRAGGLER_NODE_KINDS, SimFleet
from bot.models import FaultKind, Job
from bot.triage.jobs import SlowJobReport, find_job, slow_job
from bot.triage.service import Triage
from bot.triage.stragglers import StragglerConfig

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TARGETS = {"node precision": 0.99, "node recall": 0.99, "cause accuracy": 0.95}
K = FaultKind
# The node causes whose effects in the simulator leave a trace in a proxy (SM clock, GPU
# utilisation, power, NVLink or InfiniBand traffic): bot/backends/sim/faults.py.
PROXY_KINDS = (
    K.THROTTLE_POWER,
    K.THROTTLE_HW_SLOWDOWN,
    K.THROTTLE_SW_THERMAL,
    K.THROTTLE_HW_THERMAL,
    K.POWER_BRAKE,
    K.LOW_SM_CLOCK,
    K.NVLINK_CRC,
    K.NVLINK_REPLAY,
    K.IB_SYMBOL_ERRORS,
    K.IB_FLAPPING,
    K.CPU_CONTENTION,
    K.NUMA_MISPLACEMENT,
)
HEALTHY_SIZES = (4, 8, 16, 64, 256, 1024, 4096)


def _triage(fleet: SimFleet, cfg: StragglerConfig) -> Triage:
    return sim_triage(fleet, stragglers=cfg, sim_scheduler=True)


async def _report(fleet: SimFleet, job: Job) -> tuple[SlowJobReport, float]:
    cfg = StragglerConfig()
    triage = _triage(fleet, cfg)
    started = time.perf_counter()
    found = await find_job(triage, job.job_id, cfg)
    assert isinstance(found, Job), found
    report = await slow_job(triage, found, cfg, now=NOW)
    assert isinstance(report, SlowJobReport), report
    return report, time.perf_counter() - started


async def one(seed: int, nodes: int, signals: str) -> tuple[str, str, float, SlowJobReport, float]:
    fleet = SimFleet(nodes, seed=seed, now=NOW, fault_rate=0.0)
    job = fleet.add_job(
        fleet.topology.names,
        exports_step_time=signals != "none",
        exports_compute_time=signals == "compute",
    )
    kinds = STRAGGLER_NODE_KINDS if signals == "compute" else PROXY_KINDS
    cause = kinds[seed % len(kinds)]
    slowdown = round(random.Random(f"bench-stragglers:{seed}").uniform(0.03, 0.10), 3)
    node = fleet.topology.names[(seed * 7919) % nodes]
    since = NOW - timedelta(hours=3)
    if signals == "none":
        fault = fleet.inject(cause, node, since=since, slowdown=slowdown)
    else:
        fault = fleet.inject_straggler(job.job_id, cause, node, since=since, slowdown=slowdown)
    assert fault.node is not None
    report, took = await _report(fleet, job)
    return fault.node, cause.value, slowdown, report, took


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


async def seeded(jobs: int, nodes: int, signals: str) -> int:
    tp = fp = fn = cause_right = suspected = 0
    times: list[float] = []
    confusion: Counter[tuple[str, str]] = Counter()
    missed: list[str] = []
    for seed in range(jobs):
        node, cause, slowdown, report, took = await one(seed, nodes, signals)
        times.append(took)
        d = report.diagnosis
        flagged = {s.node: s for s in d.stragglers}
        tp += node in flagged
        fn += node not in flagged
        fp += len(set(flagged) - {node})
        suspected += node in {x.node for x in d.suspects}
        named = flagged[node].cause if node in flagged else None
        said = named.kind.value if named is not None else "(none)"
        confusion[(cause, said)] += 1
        cause_right += said == cause
        if node not in flagged:
            missed.append(f"{cause} {slowdown:.1%}")
    scores = {
        "node precision": tp / max(1, tp + fp),
        "node recall": tp / max(1, tp + fn),
        "cause accuracy": cause_right / jobs,
    }
    print(
        f"{jobs} seeded synchronous jobs of {nodes:,} nodes exporting {signals!r}, one node "
        "3-10 % slow each"
    )
    ok = True
    for name, value in scores.items():
        target = TARGETS[name]
        ok &= value >= target
        print(f"  {name:15} {value:.3f}  (target >= {target}, ratio {value / target:.3f})")
    print(f"  found {tp}, missed {fn} (of which suspected {suspected}), false stragglers {fp}")
    if missed:
        print(f"  missed: {', '.join(missed[:10])}")
    print(
        f"  time a job (sim, whole service): p50 {statistics.median(times):.2f} s, "
        f"p95 {_p95(times):.2f} s"
    )
    differ = {k: v for k, v in confusion.items() if k[0] != k[1]}
    if differ:
        print("  confusion (injected -> named), where they differ:")
        for (cause, said), count in sorted(differ.items()):
            print(f"    {cause:22} -> {said:22} {count}")
    return 0 if ok else 1


async def healthy(count: int) -> int:
    named = nodes_seen = 0
    times: list[float] = []
    per_size: Counter[int] = Counter()
    for seed in range(count):
        size = HEALTHY_SIZES[seed % len(HEALTHY_SIZES)]
        fleet = SimFleet(max(size, 4), seed=1000 + seed, now=NOW, fault_rate=0.0)
        job = fleet.add_job(fleet.topology.names[:size], exports_compute_time=seed % 2 == 0)
        report, took = await _report(fleet, job)
        times.append(took)
        d = report.diagnosis
        wrong = len(d.stragglers) + len(d.suspects) + (d.job_cause is not None)
        named += wrong
        nodes_seen += size
        per_size[size] += wrong
    print(
        f"{count} healthy synchronous jobs of {HEALTHY_SIZES[0]} to {HEALTHY_SIZES[-1]:,} nodes "
        f"({nodes_seen:,} nodes in all; half with compute times)"
    )
    print(f"  nodes or causes named: {named}  (target 0)")
    if named:
        print("  by job size: " + ", ".join(f"{s}: {n}" for s, n in sorted(per_size.items()) if n))
    print(f"  time a job (sim): p50 {statistics.median(times):.2f} s, p95 {_p95(times):.2f} s")
    return 0 if named == 0 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--signals", choices=("compute", "steps", "none"), default="compute")
    parser.add_argument("--healthy", type=int, default=0, help="healthy jobs instead")
    args = parser.parse_args()
    if args.healthy:
        sys.exit(asyncio.run(healthy(args.healthy)))
    sys.exit(asyncio.run(seeded(args.jobs, args.nodes, args.signals)))
