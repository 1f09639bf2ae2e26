"""/regressions on the simulator's own fleets: both lines of evidence against the truth.

    .venv/bin/python bench/regressions_sim.py [--seeds 20] [--nodes 1024] [--effects 0,1,2]

Each seed builds a simulated fleet (bot/backends/sim: its jobs of 1-256 nodes, half of the
training jobs exporting per-rank compute time, every job's pace wandering as
bot/backends/sim/wander.py makes it: hours-long wander, the daily cycle, checkpoint steps),
rolls a kernel out over 24 h three days before its now with the given true effect, reads
7 days through `SimFleetHistory` (the adapter the shell uses) and runs the whole finder. Scored
per effect over the seeds: the pace finding's claims, |estimate - truth| and whether its 95 %
interval held the truth; the per-node evidence's (same job, same steps) the same, and how
often the two lines disagreed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.backends.sim import SimFleet
from bot.backends.sim.history import SimFleetHistory
from bot.regressions.service import find_regressions

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
NEW = "5.15.0-113-generic"


async def one(nodes: int, seed: int, effect: float) -> tuple[object, float]:
    fleet = SimFleet(nodes, seed=seed, now=NOW, fault_rate=0.0)
    fleet.add_rollout(
        "kernel",
        NEW,
        start=NOW - timedelta(days=3),
        duration=timedelta(hours=24),
        effect=effect / 100,
    )
    started = time.perf_counter()
    report = await find_regressions(
        SimFleetHistory(fleet), ["kernel"], start=NOW - timedelta(days=7), end=NOW
    )
    return report, time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--effects", default="0,1,2", help="true effects in percent")
    args = ap.parse_args()
    print(f"simulated fleets of {args.nodes} nodes, 7 days read, {args.seeds} seeds an effect")
    print(
        f"{'effect':>7} | {'pace: claimed':>13} {'|err| p95':>9} {'covered':>8} {'width':>6} "
        f"{'jobs':>5} | {'nodes: claimed':>14} {'|err| p95':>9} {'covered':>8} {'width':>6} "
        f"{'jobs':>5} | {'disagree':>8} {'read+stats s':>12}"
    )
    for effect in (float(e) for e in args.effects.split(",")):
        pace: list[tuple[bool, float, bool, float, int]] = []
        node: list[tuple[bool, float, bool, float, int]] = []
        disagree, took = 0, []
        for seed in range(args.seeds):
            report, seconds = asyncio.run(one(args.nodes, 1000 + seed, effect))
            took.append(seconds)
            [f] = report.findings  # type: ignore[attr-defined]
            claimed = f.verdict.value in ("regression", "improvement")
            pace.append(
                (
                    claimed,
                    abs(f.effect_pct - effect),
                    f.low_pct <= effect <= f.high_pct,
                    f.high_pct - f.low_pct,
                    f.jobs,
                )
            )
            sw = f.same_work
            if sw is not None:
                node.append(
                    (
                        sw.verdict.value in ("regression", "improvement"),
                        abs(sw.effect_pct - effect),
                        sw.low_pct <= effect <= sw.high_pct,
                        sw.high_pct - sw.low_pct,
                        sw.jobs,
                    )
                )
                disagree += not sw.agrees

        def cols(rows: list[tuple[bool, float, bool, float, int]]) -> str:
            if not rows:
                return f"{'-':>13} {'-':>9} {'-':>8} {'-':>6} {'-':>5}"
            a = np.array([r[:4] for r in rows], dtype=float)
            return (
                f"{a[:, 0].mean():>13.0%} {np.percentile(a[:, 1], 95):>8.2f}p "
                f"{a[:, 2].mean():>8.0%} {np.median(a[:, 3]):>5.2f}% "
                f"{np.median([r[4] for r in rows]):>5.0f}"
            )

        print(
            f"{effect:>6.1f}% | {cols(pace)} | {cols(node):>14} | "
            f"{disagree / args.seeds:>8.0%} {np.median(took):>12.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
