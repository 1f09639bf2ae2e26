"""Straggler accuracy and speed of /job-slow on the simulated fleet (issue #4): run by hand.

    .venv/bin/python bench/stragglers.py [--jobs 200] [--nodes 4096] [--slowdown 0.05]

Each seeded job runs on every node of a fresh fleet (ordinary +-1.5 % step jitter on every
rank); one node is slowed by ``--slowdown`` (default 5 %) through a cause drawn in turn from
every node cause the simulator knows (throttles, ECC/Xid-free link errors, drift, SM clock,
CPU contention, NUMA). The whole service runs (`find_job` then `slow_job`, step times, 48 h pace,
health read and proxies from `SimMetrics`), and its answer is scored against the ground truth:
precision and recall of the straggler node, and the cause named for it. Targets: >= 0.99,
>= 0.99 and >= 0.95. The real-Prometheus timing of a 4,096-node job is
``bench/health_prometheus.py --job``.

``--proxies``: the jobs export no step time, and the node's fault is drawn in turn from the
causes that lower one of the proxies (SM clock, GPU utilisation, power, NVLink or InfiniBand
traffic), with the simulator's default parameters: the same scores, for the proxies mode.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.backends.sim.fleet import STRAGGLER_NODE_KINDS, SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.backends.sim.scheduler import SimScheduler
from bot.models import FaultKind, Job
from bot.triage.checks import HealthConfig
from bot.triage.jobs import SlowJobReport, find_job, slow_job
from bot.triage.service import Triage
from bot.triage.stragglers import StragglerConfig

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TARGETS = {"node precision": 0.99, "node recall": 0.99, "cause accuracy": 0.95}
K = FaultKind
# The node causes whose effects in the simulator lower a proxy (bot/backends/sim/faults.py).
PROXY_KINDS = (
    K.THROTTLE_POWER, K.THROTTLE_HW_SLOWDOWN, K.THROTTLE_SW_THERMAL, K.THROTTLE_HW_THERMAL,
    K.POWER_BRAKE, K.LOW_SM_CLOCK, K.NVLINK_CRC, K.NVLINK_REPLAY, K.IB_SYMBOL_ERRORS,
    K.IB_FLAPPING, K.CPU_CONTENTION, K.NUMA_MISPLACEMENT,
)  # fmt: skip


async def one(
    seed: int, nodes: int, slowdown: float, proxies: bool
) -> tuple[str, str, SlowJobReport, float]:
    fleet = SimFleet(nodes, seed=seed, now=NOW, fault_rate=0.0)
    job = fleet.add_job(fleet.topology.names, exports_step_time=not proxies)
    since = NOW - timedelta(hours=3)
    if proxies:
        cause = PROXY_KINDS[seed % len(PROXY_KINDS)]
        node = fleet.topology.names[(seed * 7919) % nodes]
        fault = fleet.inject(cause, node, since=since)
    else:
        cause = STRAGGLER_NODE_KINDS[seed % len(STRAGGLER_NODE_KINDS)]
        fault = fleet.inject_straggler(job.job_id, cause, since=since, slowdown=slowdown)
    cfg = StragglerConfig()
    triage = Triage(
        SimMetrics(fleet), SimInventory(fleet), SimScheduler(fleet), HealthConfig(), cfg
    )
    started = time.perf_counter()
    found = await find_job(triage, job.job_id, cfg)
    assert isinstance(found, Job), found
    report = await slow_job(triage, found, cfg, now=NOW)
    assert isinstance(report, SlowJobReport), report
    assert fault.node is not None
    return fault.node, cause.value, report, time.perf_counter() - started


async def main(jobs: int, nodes: int, slowdown: float, proxies: bool) -> int:
    tp = fp = fn = cause_right = 0
    times: list[float] = []
    confusion: Counter[tuple[str, str]] = Counter()
    for seed in range(jobs):
        node, cause, report, took = await one(seed, nodes, slowdown, proxies)
        times.append(took)
        flagged = {s.node: s for s in report.diagnosis.stragglers}
        tp += node in flagged
        fn += node not in flagged
        fp += len(set(flagged) - {node})
        named = flagged[node].cause if node in flagged else None
        said = named.kind.value if named is not None else "(none)"
        confusion[(cause, said)] += 1
        cause_right += said == cause
    scores = {
        "node precision": tp / max(1, tp + fp),
        "node recall": tp / max(1, tp + fn),
        "cause accuracy": cause_right / jobs,
    }
    if proxies:
        print(f"{jobs} seeded jobs of {nodes} nodes without step times, one faulty node each")
    else:
        print(f"{jobs} seeded jobs of {nodes} nodes, one {slowdown:.0%} straggler each")
    ok = True
    for name, value in scores.items():
        target = TARGETS[name]
        ok &= value >= target
        print(f"  {name:15} {value:.3f}  (target >= {target}, ratio {value / target:.3f})")
    print(f"  found {tp}, missed {fn}, false stragglers {fp}")
    print(
        f"  time a job (sim, whole service): p50 {statistics.median(times):.2f} s, "
        f"p95 {sorted(times)[int(0.95 * (len(times) - 1))]:.2f} s"
    )
    print("  confusion (injected -> named), where they differ:")
    for (cause, said), count in sorted(confusion.items()):
        if cause != said:
            print(f"    {cause:22} -> {said:22} {count}")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--proxies", action="store_true", help="jobs without step times")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.jobs, args.nodes, args.slowdown, args.proxies)))
