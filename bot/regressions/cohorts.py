"""Cohorts and rollouts from each node's software history. No I/O.

A node's history of one component is a run of `VersionSpan`s; where two consecutive spans hold
different values the node changed cohort, at the first sample of the new value (a kernel or a
driver change reboots the node, so the gap between the spans is the reboot, not the change).
Changes of one component from one value to another, across nodes, are one rollout.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from bot.regressions.models import NodeChange, Rollout, VersionSpan

RolloutKey = tuple[str, str, str]
"""(component, old, new)."""


def rollout_key(change: NodeChange | Rollout) -> RolloutKey:
    return (change.component, change.old, change.new)


def node_changes(spans: Iterable[VersionSpan]) -> list[NodeChange]:
    """Every node's changes of every component, in time order."""
    history: dict[tuple[str, str], list[VersionSpan]] = defaultdict(list)
    for span in spans:
        history[(span.node, span.component)].append(span)
    changes: list[NodeChange] = []
    for (node, component), runs in history.items():
        runs.sort(key=lambda s: (s.start, s.end))
        for before, after in itertools.pairwise(runs):
            if after.value != before.value:
                changes.append(NodeChange(node, component, before.value, after.value, after.start))
    changes.sort(key=lambda c: (c.at, c.node, c.component))
    return changes


def find_rollouts(spans: Sequence[VersionSpan], changes: Sequence[NodeChange]) -> list[Rollout]:
    """One rollout for each (component, old, new) seen changing, oldest first: its start, its
    last change so far, its nodes in the order they changed, and its coverage (the share of the
    nodes that ran `old` in the window that run `new` at its end)."""
    ran: dict[tuple[str, str], set[str]] = defaultdict(set)
    latest: dict[tuple[str, str], VersionSpan] = {}
    for span in spans:
        ran[(span.component, span.value)].add(span.node)
        key = (span.node, span.component)
        last = latest.get(key)
        if last is None or (span.end, span.start) > (last.end, last.start):
            latest[key] = span
    moved: dict[RolloutKey, dict[str, datetime]] = defaultdict(dict)
    for change in changes:
        # A node that went back and forth counts once, at its first change.
        moved[rollout_key(change)].setdefault(change.node, change.at)
    rollouts: list[Rollout] = []
    for (component, old, new), nodes_at in moved.items():
        order = sorted(nodes_at, key=lambda n: (nodes_at[n], n))
        now_new = sum(1 for n in order if latest[(n, component)].value == new)
        had_old = len(ran[(component, old)]) or len(order)
        rollouts.append(
            Rollout(
                component=component,
                old=old,
                new=new,
                start=nodes_at[order[0]],
                end=nodes_at[order[-1]],
                nodes=tuple(order),
                coverage=now_new / had_old,
            )
        )
    rollouts.sort(key=lambda r: (r.start, r.component, r.new))
    return rollouts
