"""Asks one fleet about its nodes every way the bot can be asked, and says each node's verdict
as each surface gave it: /node-health of the node alone, /node-health of the hostlist,
/hw-faults of the hostlist over the health window, the alert sweep's findings, and App Home's
counts. The tests of "one answer, whichever command asks" compare them, on the simulated fleet
and on a real Prometheus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.alerts.sweep import alerts_from_faults
from bot.models import VerdictLevel
from bot.triage.service import (
    FaultsReport,
    FleetGlance,
    FleetSummary,
    NodeReport,
    Triage,
    fleet_faults,
    fleet_glance,
    hw_faults,
    node_health,
)
from bot.triage.targets import compress
from bot.triage.verdict import level_of, verdicts

ALONE = "/node-health NODE"
HOSTLIST = "/node-health HOSTLIST"
HW_FAULTS = "/hw-faults"
SWEEP = "sweep"


@dataclass(frozen=True)
class Answers:
    levels: dict[str, dict[str, VerdictLevel]]  # surface -> node -> verdict level
    home: dict[VerdictLevel, int]  # App Home's nodes per verdict (the whole fleet)
    reports: dict[str, NodeReport]  # /node-health of each node asked alone
    summary: FleetSummary
    faults: FaultsReport  # /hw-faults of the hostlist over the health window
    glance: FleetGlance

    def disagreements(self) -> list[str]:
        """`gpu-0007: /node-health NODE healthy, /hw-faults degraded`, one line a node whose
        surfaces disagree (nodes not asked alone are compared on the other surfaces)."""
        out = []
        for node in self.levels[HOSTLIST]:
            said = {s: lv[node] for s, lv in self.levels.items() if node in lv}
            if len(set(said.values())) > 1:
                out.append(f"{node}: " + ", ".join(f"{s} {lv.value}" for s, lv in said.items()))
        # App Home counts the whole fleet: asked as one hostlist, the fleet must count the same.
        if sum(self.home.values()) == len(self.levels[HOSTLIST]):
            hostlist = counts(self.levels[HOSTLIST])
            if self.home != hostlist:
                out.append(f"App Home counts {self.home}, the hostlist {hostlist}")
        return out


async def ask_every_way(triage: Triage, nodes: Sequence[str], alone: Sequence[str]) -> Answers:
    """`nodes` asked as one hostlist, `alone` each on its own (asking 512 nodes one by one
    would say little more)."""
    window = f"{int(triage.config.window_s)}s"
    hostlist = compress(list(nodes))
    reports = {}
    for node in alone:
        report = await node_health(triage, node)
        assert isinstance(report, NodeReport), report
        reports[node] = report
    summary = await node_health(triage, hostlist)
    assert isinstance(summary, FleetSummary), summary
    faults = await hw_faults(triage, f"{hostlist} --since {window}")
    assert isinstance(faults, FaultsReport), faults
    swept = await fleet_faults(triage)
    glance = await fleet_glance(triage)
    assert isinstance(glance, FleetGlance), glance

    listed = [f for g in faults.groups for f in g.faults]
    alerts = alerts_from_faults(swept.faults, datetime.now(UTC))
    swept_level = dict.fromkeys(nodes, VerdictLevel.HEALTHY)
    for alert in alerts:
        if alert.node in swept_level:
            level = level_of(alert.severity, alert.action)
            swept_level[alert.node] = max(swept_level[alert.node], level)
    levels = {
        ALONE: {n: r.verdict.level for n, r in reports.items()},
        HOSTLIST: {v.node: v.level for v in summary.verdicts},
        HW_FAULTS: {n: v.level for n, v in verdicts(nodes, listed).items()},
        SWEEP: swept_level,
    }
    return Answers(levels, glance.per_verdict, reports, summary, faults, glance)


def counts(levels: dict[str, VerdictLevel]) -> dict[VerdictLevel, int]:
    """Nodes per verdict, every level present (as App Home counts them)."""
    found = Counter(levels.values())
    return {lv: found.get(lv, 0) for lv in VerdictLevel}
