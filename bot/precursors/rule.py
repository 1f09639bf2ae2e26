"""What to do with a precursor found: a Prometheus alert rule that warns before the threshold
is crossed, ready to paste. No I/O."""

from __future__ import annotations

import re

from bot.precursors.config import NODES
from bot.precursors.models import Candidate, Ranked

WARN_MARGIN = 0.1
"""The rule warns this share short of the threshold: before the crossing, not at it."""


def unselected(query: str) -> str:
    """The candidate's template over every node: the nodes' matcher taken out."""
    out = query.replace("," + NODES, "").replace(NODES + ",", "").replace(NODES, "")
    return out.replace("{}", "")


def aggregated(candidate: Candidate, query: str) -> str:
    """Per node (and part): the maximum, or the minimum for a falling candidate."""
    by = ", ".join(x for x in (candidate.host_label, candidate.by) if x)
    op = "min" if candidate.direction == "below" else "max"
    return f"{op} by ({by}) ({query})"


def warn_level(ranked: Ranked) -> float:
    assert ranked.threshold is not None
    t = ranked.threshold
    up = ranked.candidate.direction == "above"
    return t - abs(t) * WARN_MARGIN if up else t + abs(t) * WARN_MARGIN


def number(value: float) -> str:
    """A threshold as people and PromQL both read it: 3 significant figures."""
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    text = f"{value:.3g}"
    return text if "e" not in text else f"{value:.6f}".rstrip("0").rstrip(".")


def alert_name(kind: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[^a-zA-Z0-9]+", kind) if p) + "Precursor"


def alert_rule(kind: str, ranked: Ranked) -> str:
    """A rule group in Prometheus' YAML for the leading candidate."""
    c = ranked.candidate
    op = ">" if c.direction == "above" else "<"
    expr = f"{aggregated(c, unselected(c.query))} {op} {number(warn_level(ranked))}"
    assert ranked.threshold is not None
    summary = (
        f"{c.name} {number(warn_level(ranked))} {c.unit} reached: {ranked.preceded} of "
        f"{ranked.events} {kind} events followed {c.name} {c.direction} "
        f"{number(ranked.threshold)} {c.unit}".replace("  ", " ")
    )
    host = "{{ $labels." + c.host_label + " }}"
    return "\n".join(
        [
            "groups:",
            "  - name: meowbot-precursors",
            "    rules:",
            f"      - alert: {alert_name(kind)}",
            f"        expr: '{expr.replace(chr(39), chr(39) * 2)}'",
            "        for: 1m",
            "        labels:",
            "          severity: warning",
            "        annotations:",
            f"          summary: '{host}: {summary.replace(chr(39), chr(39) * 2)}'",
        ]
    )
