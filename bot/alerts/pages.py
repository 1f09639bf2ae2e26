"""A big event's per-node detail, paged into thread replies within Block Kit's limits. Pure.

A group of a few nodes carries their lines and buttons in its own message. Past that, the
message keeps the summary (hostlist, counts) and the thread carries one line and one Drain
button per node: a reply holds at most `NODES_PER_PAGE` nodes (a section with its button each,
under Slack's 50 blocks a message), so 200 nodes are eight replies. Each reply is rewritten in
place when what it shows changes (a node joins, resolves); its digest says when.
"""

from __future__ import annotations

import hashlib

from bot.alerts.models import Alert, AlertGroup

IN_MESSAGE_NODES = 5
"""Up to this many nodes, their lines and buttons are in the group's own message."""
NODES_PER_PAGE = 25
"""Nodes a thread reply lists: one block each (a section, its button beside it), under
Slack's 50 blocks a message with room to spare for longer lines."""

NodeRow = tuple[str, tuple[Alert, ...]]


def node_rows(group: AlertGroup) -> list[NodeRow]:
    """Each node of the group with its alerts (firing first), by node name."""
    by_node: dict[str, list[Alert]] = {}
    for a in group.alerts:
        if a.node:
            by_node.setdefault(a.node, []).append(a)
    return [
        (node, tuple(sorted(alerts, key=lambda a: (a.status.value != "firing", a.gpu or -1))))
        for node, alerts in sorted(by_node.items())
    ]


def paged(group: AlertGroup) -> bool:
    """Whether the group's per-node detail goes into the thread."""
    return len(group.nodes) > IN_MESSAGE_NODES


def pages(group: AlertGroup) -> list[list[NodeRow]]:
    """The thread replies' contents, in order; none for a group small enough to carry its own."""
    if not paged(group):
        return []
    rows = node_rows(group)
    return [rows[i : i + NODES_PER_PAGE] for i in range(0, len(rows), NODES_PER_PAGE)]


def digest(rows: list[NodeRow], resolved: bool) -> str:
    """Changes whenever what the reply shows changes (its nodes, their alerts' states)."""
    parts = [str(resolved)] + [
        f"{node}:" + ",".join(f"{a.fingerprint}={a.status.value}" for a in alerts)
        for node, alerts in rows
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def stale(group: AlertGroup) -> int | None:
    """The first page not yet written as it should read now, None when all are current.
    Only a group whose message is posted has a thread to write in."""
    if group.ts is None:
        return None
    for index, rows in enumerate(pages(group)):
        shown = group.pages[index] if index < len(group.pages) else None
        if shown is None or shown.digest != digest(rows, group.resolved):
            return index
    return None
