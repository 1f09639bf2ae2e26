"""What one event's nodes have in common: the picture its message draws. Pure.

An event (a group) names its nodes as a hostlist, says how fast it spread (first to last start),
counts its nodes by rack and leaf switch, and says what they share and where they differ: forty
nodes that lost a GPU in the same minute behind one driver version point at the driver push,
behind one rack at its power feed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.alerts.models import Alert, AlertGroup
from bot.triage.targets import compress

# The facts kept per alert (`Alert.facts`), in the order a message names them, with words.
FACTS: tuple[tuple[str, str], ...] = (
    ("rack", "rack"),
    ("leaf_switch", "leaf switch"),
    ("driver", "driver"),
    ("kernel", "kernel"),
    ("job", "job"),
)
# Labels that say a fact, first found wins. Not `job`: Prometheus sets it to the scrape job.
FACT_LABELS: dict[str, tuple[str, ...]] = {
    "rack": ("rack",),
    "leaf_switch": ("leaf_switch", "switch"),
    "driver": ("driver_version", "driver", "DCGM_FI_DRIVER_VERSION"),
    "kernel": ("kernel_version", "kernel", "release"),
    "job": ("job_id", "slurm_job_id", "jobid", "hpc_job"),
}


def facts_from_labels(labels: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for fact, names in FACT_LABELS.items():
        value = next((labels[n].strip() for n in names if labels.get(n, "").strip()), "")
        if value:
            out[fact] = value[:100]
    return out


@dataclass(frozen=True)
class Picture:
    nodes: tuple[str, ...]
    """The nodes it names: the firing ones, or all of them once it is resolved."""
    resolved_nodes: tuple[str, ...]
    """Nodes whose every alert of the group has resolved (while others still fire)."""
    span_s: float
    """From the first member's start to the last one's."""
    by_rack: tuple[tuple[str, int], ...]
    by_leaf: tuple[tuple[str, int], ...]
    shared: tuple[tuple[str, str], ...]
    """(fact words, value) every node of `nodes` has the same of."""
    differ: tuple[tuple[str, int], ...]
    """(fact words, distinct values) where `nodes` differ."""

    @property
    def hostlist(self) -> str:
        return compress(list(self.nodes)) if self.nodes else ""

    @property
    def resolved_hostlist(self) -> str:
        return compress(list(self.resolved_nodes)) if self.resolved_nodes else ""


def node_facts(alerts: Iterable[Alert]) -> dict[str, dict[str, str]]:
    """Per node, what its alerts say of it (the newest alert's word wins)."""
    out: dict[str, dict[str, str]] = {}
    for a in alerts:
        if a.node:
            out.setdefault(a.node, {}).update(a.facts)
    return out


def _counts(facts: Mapping[str, Mapping[str, str]], fact: str) -> tuple[tuple[str, int], ...]:
    tally = Counter(f[fact] for f in facts.values() if f.get(fact))
    return tuple(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))


def picture(group: AlertGroup) -> Picture:
    members = group.firing or group.alerts
    firing_nodes = {a.node for a in group.firing if a.node}
    nodes = tuple(sorted({a.node for a in members if a.node}))
    resolved = tuple(sorted(set(group.nodes) - firing_nodes)) if group.firing else ()
    starts = [a.starts_at for a in group.alerts]
    span = (max(starts) - min(starts)).total_seconds() if starts else 0.0
    facts = {n: f for n, f in node_facts(members).items() if n in set(nodes)}
    shared: list[tuple[str, str]] = []
    differ: list[tuple[str, int]] = []
    if len(nodes) > 1:
        for fact, words in FACTS:
            values = {f.get(fact, "") for f in facts.values()}
            known = values - {""}
            if len(known) == 1 and "" not in values and len(facts) == len(nodes):
                shared.append((words, next(iter(known))))
            elif len(known) > 1:
                differ.append((words, len(known)))
    return Picture(
        nodes=nodes,
        resolved_nodes=resolved,
        span_s=span,
        by_rack=_counts(facts, "rack"),
        by_leaf=_counts(facts, "leaf_switch"),
        shared=tuple(shared),
        differ=tuple(differ),
    )
