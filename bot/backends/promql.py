"""PromQL as the adapter and the recording rules write it: names checked, values escaped,
and the query each metric request becomes.

The Prometheus adapter (bot/backends/prometheus.py) sends these queries and the recording rules
(bot/backends/prometheus_rules.py) record the very same ones, so both import them from here.
Node names are validated and every value is escaped before it reaches PromQL: a name such as
`gpu-1"} or vector(1) #` is refused, and could not break out of its string anyway.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot import metric_names as m
from bot.triage.table import MetricRequest, Reading

NODE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
KEEP_RE = re.compile(r"^(>|<|>=|<=|==|!=) -?[0-9]+(\.[0-9]+)?$")
# Regex metacharacters RE2 knows; node names only ever hold '.' and '-' of them.
_RE2_META = re.compile(r"([.\-+*?()\[\]{}|^$\\])")


class InvalidNodeName(ValueError):
    pass


def check_node_name(name: str) -> str:
    if not NODE_NAME_RE.fullmatch(name):
        raise InvalidNodeName(f"{name!r} is not a node name")
    return name


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal holding exactly `value`."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def nodes_regex(nodes: Sequence[str]) -> str:
    """An anchored RE2 alternation of the (validated) node names."""
    return "|".join(_RE2_META.sub(r"\\\1", check_node_name(n)) for n in nodes)


def selector(metric: str, nodes: Sequence[str] | None, node_label: str) -> str:
    """The series of `metric` on `nodes` (all when None), whichever host label they carry."""
    if not METRIC_NAME_RE.fullmatch(metric):
        raise ValueError(f"{metric!r} is not a metric name")
    if nodes is None:
        return metric
    alternation = nodes_regex(nodes)
    host = promql_string(f"({alternation})")
    instance = promql_string(f"({alternation})(:[0-9]+)?")
    # One selector per spelling of the host label; `or` keeps it a single query.
    labels = [*m.HOST_LABELS, node_label]
    parts = [f"{metric}{{{label}=~{host}}}" for label in dict.fromkeys(labels)]
    parts.append(f"{metric}{{{m.LABEL_INSTANCE}=~{instance}}}")
    return " or ".join(parts)


SHORTEST_OFFSET_S = 3600
"""The shortest window a counter's growth is measured over by difference; below it, from the
series' lowest sample in the window."""


def _offsets(window_s: int) -> list[int]:
    """The window, then halves of it down to an hour: where a young series is measured from."""
    out = [window_s]
    while out[-1] // 2 >= SHORTEST_OFFSET_S:
        out.append(out[-1] // 2)
    return out


def _grown(part: str, reading: Reading, window_s: int) -> str:
    """How much `part` grew (INCREASE), or its value where it moved and 0 where not (CHANGES),
    over the window.

    The difference of two instants reads two samples a series, where a range function reads
    every sample of the window (24 h of 32k series per metric is most of the cost). A series
    younger than the window has no sample at its start: it is measured from the oldest of the
    window's halves it has (12 h, 6 h, ... an hour), and below an hour from its lowest (or,
    for CHANGES, its highest against its lowest) over that hour, which is cheap. `or` keeps
    the first answer a series gets. A counter reset inside the window (a reboot, which its own
    check flags) is not added up.

    Not increase() or changes(): for a series born inside their range, VictoriaMetrics counts
    its first sample as growth from 0 and as one change, where Prometheus counts neither (a
    per-code Xid count born at 1 read 1 there, 0 here). A series' lowest and highest sample
    are the same on both engines.
    """
    if reading is Reading.EVENTS:
        # Two instants a series, and a series the window's start did not have counts whole:
        # such a counter starts with its exporter, so all it holds came in the window. Both
        # branches are functions, so no row keeps the metric's name (a recorded row has none).
        start = f"{part} offset {window_s}s"
        return f"clamp_min({part} - {start}, 0) or clamp_min({part} unless {start}, 0)"
    terms = []
    for offset in _offsets(window_s):
        if reading is Reading.INCREASE:
            terms.append(f"clamp_min({part} - {part} offset {offset}s, 0)")
        else:
            # Its value times 0 or 1: a series the window's start had answers here, and the
            # product drops the metric's name, as every other reading's rows do.
            terms.append(f"{part} * ({part} != bool {part} offset {offset}s)")
    last = f"[{min(window_s, SHORTEST_OFFSET_S)}s]"
    if reading is Reading.INCREASE:
        terms.append(f"clamp_min({part} - min_over_time({part}{last}), 0)")
    else:
        moved = f"max_over_time({part}{last}) > bool min_over_time({part}{last})"
        terms.append(f"{part} * ({moved})")
    return " or ".join(terms)


def query_for(
    request: MetricRequest, nodes: Sequence[str] | None, window_s: float, node_label: str
) -> str:
    sel = selector(request.name, nodes, node_label)
    if request.reading is Reading.VALUE:
        query = sel
    elif request.reading is Reading.MEDIAN:
        window = max(1, int(window_s))
        query = " or ".join(f"quantile_over_time(0.5, {p}[{window}s])" for p in sel.split(" or "))
    else:
        # Each alternative of the selector's `or` on its own: offsets apply to selectors.
        parts = sel.split(" or ")
        query = " or ".join(_grown(p, request.reading, max(1, int(window_s))) for p in parts)
    host = ", ".join(dict.fromkeys([*m.HOST_LABELS, m.LABEL_INSTANCE, node_label]))
    if request.per_node:
        for label in request.by:
            if not METRIC_NAME_RE.fullmatch(label):
                raise ValueError(f"{label!r} is not a label name")
        by = ", ".join(dict.fromkeys([*m.HOST_LABELS, m.LABEL_INSTANCE, node_label, *request.by]))
        query = f"count by ({by}) ({query})"
    if request.lowest_per_node:
        query = f"min by ({host}) ({query})"
    if request.fewer_per_node:
        if not request.fewer_per_node.isdigit():
            raise ValueError(f"{request.fewer_per_node!r} is not a count")
        # The series of the nodes that show fewer than expected, and no others.
        query = (
            f"({query}) and on ({host}) "
            f"(count by ({host}) ({query}) < {int(request.fewer_per_node)})"
        )
    if request.keep:
        if not KEEP_RE.fullmatch(request.keep):
            raise ValueError(f"{request.keep!r} is not a comparison with a number")
        # Only the series that may be faults come back: healthy GPUs stay in Prometheus.
        query = f"({query}) {request.keep}"
    return query
