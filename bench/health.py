"""/hw-faults over the simulated fleet: not a timed test, run by hand.

Times the whole service (read every metric column, run every check, fold, group by switch)
over 512, 4,096 and 50,000 nodes x 8 GPUs on the simulated fleet, prints the number of metric
reads (constant in node count), and compares with the 1 s target. For the real Prometheus
figure (4,096 nodes, < 2 s p95), see bench/health_prometheus.py.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import sim_triage
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimMetrics
from bot.triage import service
from bot.triage.service import FaultsReport

TARGET_S = 1.0
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def main() -> None:
    for n in (512, 4096, 50_000):
        fleet = SimFleet.scenario(seed=1, n_nodes=n, now=NOW)
        triage = sim_triage(fleet)
        metrics = triage.metrics
        assert isinstance(metrics, SimMetrics)
        times = []
        report = None
        for minute in range(3):
            # A new instant each run: no cached columns, as a live fleet would be.
            fleet._snapshots.clear()
            metrics.queries = 0
            started = time.perf_counter()
            report = await service.hw_faults(triage, "")
            times.append(time.perf_counter() - started)
            del minute
        assert isinstance(report, FaultsReport)
        best, median = min(times), statistics.median(times)
        print(
            f"{n:>6} nodes x 8 GPUs: median {median:.2f} s (best {best:.2f} s), "
            f"{metrics.queries} metric reads, {sum(report.counts.values())} faults in "
            f"{len(report.groups)} groups; "
            f"ratio to the {TARGET_S:.0f} s target {median / TARGET_S:.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
