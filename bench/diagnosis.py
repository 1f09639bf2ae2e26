"""Diagnosis accuracy of the health checks: not a timed test, run by hand.

Over 200 seeded scenarios of the simulated fleet (every fault kind, one fault a faulty node,
ordinary noise everywhere), scores /hw-faults' node-level diagnosis against the ground truth:
precision and recall of the faulty node, the cause named for it (its worst fault after
folding symptoms into causes), healthy nodes given a drain verdict (must be 0), and the
confusion by kind. Straggler and job-level causes are bench/stragglers.py's and left out here.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import sim_triage
from bot.backends.sim.fleet import SimFleet
from bot.models import FaultKind, VerdictLevel
from bot.triage import service
from bot.triage.checks import CHECK_OF
from bot.triage.service import FaultsReport
from bot.triage.verdict import fault_level, verdicts

SCENARIOS = 200
NODES = 512
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# The causes no health check finds.
STRAGGLER_ONLY = frozenset(FaultKind) - set(CHECK_OF)
TARGETS = {"node precision": 0.99, "node recall": 0.99, "cause accuracy": 0.95}


async def main() -> None:
    tp = fp = fn = 0
    cause_right = cause_total = healthy_drained = 0
    confusion: dict[FaultKind, Counter[str]] = defaultdict(Counter)
    for seed in range(SCENARIOS):
        fleet = SimFleet.scenario(seed, n_nodes=NODES, now=NOW)
        truth = {f.node: f.kind for f in fleet.injected if f.node and f.kind not in STRAGGLER_ONLY}
        ignored = {f.node for f in fleet.injected if f.node and f.kind in STRAGGLER_ONLY}
        triage = sim_triage(fleet)
        report = await service.hw_faults(triage, "--since 24h")
        assert isinstance(report, FaultsReport)
        faults = [f for g in report.groups for f in g.faults]
        worst: dict[str, FaultKind] = {}
        for f in sorted(faults, key=lambda f: (-fault_level(f).rank, -f.severity.rank)):
            worst.setdefault(f.node, f.kind)
        flagged = set(worst) - ignored
        tp += len(flagged & truth.keys())
        fp += len(flagged - truth.keys())
        fn += len(truth.keys() - flagged)
        by_node = verdicts(fleet.nodes, faults)
        healthy_drained += sum(
            1
            for node, v in by_node.items()
            if node not in truth and node not in ignored and v.level.rank >= VerdictLevel.DRAIN.rank
        )
        for node, kind in truth.items():
            said = worst.get(node)
            confusion[kind][said.value if said else "(missed)"] += 1
            cause_total += 1
            cause_right += said is kind
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    accuracy = cause_right / cause_total if cause_total else 1.0
    print(f"{SCENARIOS} scenarios x {NODES} nodes, {tp + fn} faulty nodes in all")
    for name, value in (
        ("node precision", precision),
        ("node recall", recall),
        ("cause accuracy", accuracy),
    ):
        target = TARGETS[name]
        print(f"  {name:15} {value:.4f}  (target >= {target}, ratio {value / target:.3f})")
    print(f"  healthy nodes given a drain verdict: {healthy_drained} (target 0)")
    print("confusion by injected kind (what the worst fault on the node was):")
    for kind in sorted(confusion, key=lambda k: k.value):
        row = ", ".join(f"{said} {n}" for said, n in confusion[kind].most_common())
        print(f"  {kind.value:22} {row}")


if __name__ == "__main__":
    asyncio.run(main())
