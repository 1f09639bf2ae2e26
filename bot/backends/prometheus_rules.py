"""Prometheus recording rules that precompute what the health checks read fleet-wide.

Over a few thousand nodes the costly part of /hw-faults is not the bot but Prometheus: every
counter check compares 32k GPU series at two instants (`x - x offset 24h`, and the window's
halves for series younger than it), a second or more of CPU each. A Prometheus operator
moves such work into recording rules: Prometheus evaluates the very query the adapter would
send, fleet-wide, once an interval, and stores its result (the few rows that may be faults)
as a small series that a query reads in milliseconds.

The rules are generated from the checks' own requests and config (`meowbot prometheus-rules`
prints them as a rules file), so they cannot drift from the code: each recorded series is
named after a hash of the exact PromQL it records. Each also records one sentinel row,
`{meowbot_recorded="<interval>"}` holding the time of the evaluation, so that "no faulty
rows" (a healthy fleet) is told from "the rule did not run". The adapter asks once a read
which sentinels are fresh (evaluated within two intervals and a minute) and reads a recorded
series only where its name (hence its query) matches what it would have asked; anything
else (another window, changed thresholds, rules not loaded, failing or late) is read raw,
with the same findings, only slower.

The gauges a health check reads (an Xid, a double-bit ECC error, a temperature: a fault that
shows at the scrape) are not recorded but read raw, one sample a series, where a rule would
hold the fault back until its next run (`READ_AT_THE_SCRAPE`). A recorded counter's series that
moved since its rule ran are re-read raw by the adapter, so a new fault does not wait either.

/hw-faults why's candidates (`precursor_rules`) are recorded per node every minute: a week
of a candidate's lead-window extremes is then a range selector over recorded points, where raw
Prometheus evaluates each rate at every minute of the week for every answer.

A node selection (a hostlist, a job's nodes) reads the recorded fleet-wide rows through the
same host-label matchers as the raw query: per-series and per-node results do not depend on
which other nodes were asked about.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from bot import metric_names as m
from bot.backends.promql import query_for
from bot.precursors.config import PrecursorsConfig
from bot.precursors.models import Candidate
from bot.precursors.rule import aggregated, unselected
from bot.regressions.config import RegressionsConfig
from bot.triage.checks import CHECKS, HealthConfig, enabled_checks, requests_for
from bot.triage.stragglers import StragglerConfig, proxy_requests
from bot.triage.table import VERSION_LABELS, MetricRequest, Reading

PREFIX = "meowbot:"
SENTINEL_LABEL = "meowbot_recorded"
"""On one row of each recorded series: its group's interval; the value is when it was made."""
DAY_S = 86400

# What the inventory reads to list the nodes (bot.backends.prometheus.PrometheusInventory).
INVENTORY_REQUESTS: tuple[MetricRequest, ...] = (
    MetricRequest(m.DCGM_FI_DEV_GPU_TEMP, per_node=True),
    MetricRequest(m.NODE_UNAME_INFO, per_node=True),
)
INVENTORY_WINDOW_S = 60


NODE_KEY = "meowbot_node"
"""A label the version counts add: the node of a series, told as `table.node_name` tells it."""


def with_node_key(expr: str, node_label: str) -> str:
    """`expr` with a `meowbot_node` label naming each series' node exactly as the checks
    name it (`bot.triage.table.node_name`): the DCGM host label, else `instance` without its
    port, else `node_label`. Each label_replace overwrites the one before where its source
    label is set, so the last applied wins: the order is the reverse of node_name's."""
    out = f'label_replace({expr}, "{NODE_KEY}", "$1", "{node_label}", "(.+)")'
    out = f'label_replace({out}, "{NODE_KEY}", "$1", "{m.LABEL_INSTANCE}", "(.+?)(?::[0-9]+)?")'
    for host in reversed(m.HOST_LABELS):
        out = f'label_replace({out}, "{NODE_KEY}", "$1", "{host}", "(.+)")'
    return out


def version_count_query(metric: str, label: str, node_label: str = "node") -> str:
    """Nodes per version of `label`, fleet-wide: drift is judged against the whole fleet.

    Counted per node as the checks name nodes, not per `instance`: where one target serves
    many hosts (a federation, a proxy, an exporter of exporters) every node shares one
    instance, and a count by instance made a fleet of 2 (one per version), too small to
    have a majority, so a node asked about alone was never found drifting while the
    fleet-wide read (which names nodes by their host label) found it."""
    # A row per host-label set first (a few per node, as the checks' per-node read), so the
    # label_replace chain runs over nodes, not over every GPU's series.
    hosts = ", ".join(dict.fromkeys([*m.HOST_LABELS, m.LABEL_INSTANCE, node_label, label]))
    keyed = with_node_key(f"count by ({hosts}) ({metric})", node_label)
    return f"count by ({label}) (count by ({label}, {NODE_KEY}) ({keyed}))"


def pace_queries(cfg: StragglerConfig) -> tuple[str, str]:
    """Every job's slowest and median rank, fleet-wide: what /job-slow's 48 h pace reads of
    one job (the adapter reads a job's rows of these, recorded, instead of 32k ranks a step)."""
    metric, job = cfg.step_metric, cfg.job_label
    return f"max by ({job}) ({metric})", f"quantile by ({job}) (0.5, {metric})"


def info_labels(config: RegressionsConfig) -> dict[str, tuple[str, ...]]:
    """Info metric -> the labels of the components it carries (driver and VBIOS: both DCGM
    labels), every configured one: the query of a metric does not depend on what is asked."""
    out: dict[str, dict[str, None]] = {}
    for info in config.info_metrics().values():
        out.setdefault(info.metric, {})[info.label] = None
    return {metric: tuple(labels) for metric, labels in out.items()}


def info_count_query(metric: str, labels: Sequence[str], node_label: str = "node") -> str:
    """Each node's series of `metric` counted per value of `labels`: which values each node
    shows (the history /regressions reads over days; recorded, one small row a node)."""
    by = ", ".join(dict.fromkeys([*m.HOST_LABELS, m.LABEL_INSTANCE, node_label, *labels]))
    return f"count by ({by}) ({metric})"


def job_nodes_query(cfg: StragglerConfig) -> str:
    """Every job's nodes and the ranks on each: the job-to-node map of /regressions."""
    by = ", ".join(dict.fromkeys([cfg.job_label, cfg.node_label, m.LABEL_INSTANCE]))
    return f"count by ({by}) ({cfg.step_metric})"


def node_compute_query(cfg: StragglerConfig) -> str:
    """Each node's mean compute time in each job that exports it: /regressions' per-node
    evidence (a row a job and node, not a row a rank)."""
    by = ", ".join(dict.fromkeys([cfg.job_label, cfg.node_label, m.LABEL_INSTANCE]))
    return f"avg by ({by}) ({cfg.compute_metric})"


PRECURSOR_GROUP = "meowbot-precursor-candidates"
"""Not `meowbot-precursors`: that is the alert rule /hw-faults why proposes (rule.py)."""
METRIC_IN_QUERY_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\{)")


def candidate_query(candidate: Candidate) -> str:
    """/hw-faults why's candidate on every node, per node (and part): the maximum, or the
    minimum for a falling candidate. The adapter's own query with the nodes' matcher taken out
    (bot/backends/prometheus_precursors.py: candidate_expr)."""
    return aggregated(candidate, unselected(candidate.query))


def candidate_record(candidate: Candidate) -> str:
    """The recorded series of a candidate: named after the metric its query reads first."""
    found = METRIC_IN_QUERY_RE.search(candidate.query)
    return recorded_name(candidate_query(candidate), found.group(0) if found else "precursor")


def precursor_rules(config: PrecursorsConfig) -> tuple[Rule, ...]:
    """A rule a candidate of /hw-faults why (two candidates of one query share it)."""
    out: dict[str, Rule] = {}
    for c in config.candidate_list():
        record = candidate_record(c)
        metric = record.removeprefix(PREFIX).rsplit(":", 1)[0]
        what = f"{c.name}, per node" + (f" and {c.by}" if c.by else "")
        out.setdefault(record, Rule(record, candidate_query(c), metric, what))
    return tuple(out.values())


def recorded_name(expr: str, metric: str) -> str:
    """The recorded series of exactly `expr`: the metric it reads, and a hash of the query."""
    digest = hashlib.sha256(expr.encode()).hexdigest()[:12]
    return f"{PREFIX}{metric}:{digest}"


def _checks_gauges() -> frozenset[str]:
    """The columns (`MetricRequest.key`) of the gauges a health check reads filtered."""
    return frozenset(
        r.key
        for check in CHECKS
        for r in check.needs
        if r.reading is Reading.VALUE and not (r.per_node or r.lowest_per_node)
    )


READ_AT_THE_SCRAPE = _checks_gauges()
"""Never recorded: the gauges a fault shows in at the scrape (the last Xid, double-bit ECC
errors, pending and failed row remaps, clock events, temperature, the PCIe link, a GPU gone
from its node, an InfiniBand port's state, DCGM's health verdict). Recorded, such a fault
reached the sweep only at the rule's next run after the scrape (docs/benchmarks.md). Raw,
such a read costs Prometheus one sample a series. The counters stay recorded over their
windows, and the adapter re-reads raw only the series that moved since the rule ran
(bot/backends/prometheus.py: `_freshen`)."""


def worth_recording(request: MetricRequest) -> bool:
    """Counters over a window, per-node counts, and the filtered rows of gauges no health
    check reads (/job-slow's proxies).

    A bare selector (every row of a gauge) is as cheap to read raw as recorded; a check's
    gauge is read raw so that the sweep sees its fault at the scrape (`READ_AT_THE_SCRAPE`).
    """
    if request.reading is not Reading.VALUE or request.per_node or request.lowest_per_node:
        return True
    return bool(request.keep or request.fewer_per_node) and request.key not in READ_AT_THE_SCRAPE


def keeps_name(request: MetricRequest) -> bool:
    """Whether the raw query's rows carry `__name__` (selectors and filters keep it; counts,
    arithmetic and functions drop it): recorded rows get the raw rows' labels back."""
    return request.reading is Reading.VALUE and not (request.per_node or request.lowest_per_node)


def sentinel(interval_s: int) -> str:
    """The row that says when the rule last ran (rows of the query never carry its label)."""
    return f'label_replace(vector(time()), "{SENTINEL_LABEL}", "{interval_s}", "", "")'


def max_age_s(interval_s: float) -> float:
    """How old a sentinel may be before its recorded series is not trusted: two intervals
    and a minute (an evaluation may take a while on a busy server), within the lookback."""
    return min(2 * interval_s + 60, 300)


@dataclass(frozen=True)
class Rule:
    record: str
    expr: str  # the adapter's own fleet-wide query
    metric: str  # the exporter's metric it reads
    what: str  # one line for the rules file's reader

    def as_dict(self, interval_s: int) -> dict[str, Any]:
        return {"record": self.record, "expr": f"({self.expr}) or {sentinel(interval_s)}"}


@dataclass(frozen=True)
class RuleGroup:
    name: str
    interval_s: int
    rules: tuple[Rule, ...]

    def as_dict(self) -> dict[str, Any]:
        out = [rule.as_dict(self.interval_s) for rule in self.rules]
        return {"name": self.name, "interval": f"{self.interval_s}s", "rules": out}


def _rule(request: MetricRequest, window_s: float, node_label: str) -> Rule:
    expr = query_for(request, None, window_s, node_label)
    what = request.key
    if request.reading is not Reading.VALUE:
        what += f", {request.reading.value} over {int(window_s)} s"
    if request.keep:
        what += f", {request.keep}"
    return Rule(recorded_name(expr, request.name), expr, request.name, what)


def windows_for(
    health: HealthConfig,
    *,
    sweep_window_s: float | None = None,
    extra: Iterable[float] = (),
) -> list[int]:
    """The counter windows the bot reads by default: /hw-faults and App Home (24 h),
    /node-health and /job-slow (`health.window_s`), the alert sweep; and any asked for."""
    windows = [DAY_S, int(health.window_s)]
    if sweep_window_s is not None:
        windows.append(int(sweep_window_s))
    windows.extend(int(w) for w in extra)
    return sorted(set(windows))


def rule_groups(
    health: HealthConfig,
    stragglers: StragglerConfig | None = None,
    *,
    windows: Sequence[int] | None = None,
    value_interval_s: int = 30,
    window_interval_s: int = 120,
    day_interval_s: int = 240,
    pace_interval_s: int = 60,
    regressions: RegressionsConfig | None = None,
    precursors: PrecursorsConfig | None = None,
    precursor_interval_s: int = 60,
) -> list[RuleGroup]:
    """The recording rules for the enabled checks of `health`.

    One group for the per-node reads, /job-slow's filtered gauges and the fleet's version
    counts (cheap: evaluated every `value_interval_s`; the checks' gauges are read raw,
    `READ_AT_THE_SCRAPE`), and one group per counter and window
    (each counter compared at two instants over the whole fleet: the costly part). A window
    of a day or more is evaluated every `day_interval_s`: four minutes' news in a day's
    count, for a quarter of the cost of every minute; shorter windows every two minutes.
    With `stragglers`, /job-slow's counters and its pace (every job's slowest and median
    rank, each minute: the 48 h chart and the baseline read those, not 32k ranks a step).
    With `regressions`, what /regressions reads over days: each node's values of every
    component's info metric, each job's nodes (a row a node, not a row a GPU or rank), and each
    node's compute time in each job (a row a job and node, not a row a rank).
    With `precursors`, each candidate of /hw-faults why per node (and part), every minute at
    most (the finder's resolution): a week of a candidate's lead-window extremes is then a
    range selector over a node's recorded series, not a rate evaluated at every minute of it.
    An interval and the group's evaluation time must stay under Prometheus' 5-minute lookback,
    or the recorded rows and sentinels go stale between evaluations and the adapter reads raw.
    """
    node_label = health.node_label
    wins = list(windows) if windows is not None else windows_for(health)
    requests = requests_for(enabled_checks(health), health)
    straggler_reads = proxy_requests(stragglers or StragglerConfig())
    values: dict[str, Rule] = {}
    for request in [*requests, *INVENTORY_REQUESTS, *straggler_reads]:
        if request.reading is Reading.VALUE and worth_recording(request):
            rule = _rule(request, INVENTORY_WINDOW_S, node_label)
            values.setdefault(rule.record, rule)
    for metric, label in VERSION_LABELS:
        expr = version_count_query(metric, label, node_label)
        name = recorded_name(expr, metric)
        values.setdefault(name, Rule(name, expr, metric, f"nodes per {label}"))
    groups = [RuleGroup("meowbot-health-values", value_interval_s, tuple(values.values()))]
    counters = [r for r in requests if r.reading is not Reading.VALUE]
    for window in wins:
        interval = day_interval_s if window >= DAY_S else window_interval_s
        # A group a counter: groups run side by side and each is done quickly, so a slow
        # evaluation delays one metric's rows, not the window's every metric.
        for request in counters:
            rule = _rule(request, window, node_label)
            name = f"meowbot-health-{window}s-{request.name}"
            groups.append(RuleGroup(name, interval, (rule,)))
    if stragglers is not None:
        # /job-slow's CPU pressure and NUMA misses over its averaging window.
        window = int(stragglers.average_s)
        reads = [r for r in straggler_reads if r.reading is not Reading.VALUE]
        rules = {r.record: r for r in (_rule(q, window, node_label) for q in reads)}
        groups.append(
            RuleGroup(f"meowbot-job-slow-{window}s", window_interval_s, tuple(rules.values()))
        )
        # The pace: read at 1-minute steps over 48 h, so recorded every minute (at most).
        pace = [
            Rule(recorded_name(q, stragglers.step_metric), q, stragglers.step_metric, what)
            for q, what in zip(
                pace_queries(stragglers),
                ("slowest rank per job", "median rank per job"),
                strict=True,
            )
        ]
        groups.append(RuleGroup("meowbot-job-slow-pace", min(pace_interval_s, 60), tuple(pace)))
    if regressions is not None:
        # /regressions reads days of these: each node's values of every info metric and each
        # job's nodes, recorded (a row a node), where read raw they are a row a GPU or a rank.
        history = [
            Rule(recorded_name(q, metric), q, metric, f"nodes' {', '.join(labels)} over time")
            for metric, labels in info_labels(regressions).items()
            for q in [info_count_query(metric, labels, node_label)]
        ]
        cfg = stragglers or StragglerConfig()
        nodes = job_nodes_query(cfg)
        history.append(Rule(recorded_name(nodes, cfg.step_metric), nodes, cfg.step_metric,
                            "each job's nodes and ranks"))  # fmt: skip
        compute = node_compute_query(cfg)
        what = "each node's compute time in each job"
        history.append(Rule(recorded_name(compute, cfg.compute_metric), compute,
                            cfg.compute_metric, what))  # fmt: skip
        # The drift checks' per-node reads are the very same queries (kernel, driver and
        # VBIOS): recorded once, by the group above; two groups writing one series collide.
        recorded = {rule.record for group in groups for rule in group.rules}
        history = [rule for rule in history if rule.record not in recorded]
        groups.append(RuleGroup("meowbot-regressions", min(pace_interval_s, 60), tuple(history)))
    if precursors is not None:
        groups.append(
            RuleGroup(PRECURSOR_GROUP, min(precursor_interval_s, 60), precursor_rules(precursors))
        )
    for group in groups:
        if group.interval_s >= 300:
            raise ValueError(
                f"rule group {group.name} every {group.interval_s} s: keep it under 300 s "
                "(Prometheus' lookback), or its sentinels go stale between evaluations"
            )
    return groups


def rules_yaml(groups: Sequence[RuleGroup]) -> str:
    """A Prometheus rules file (`rule_files:` in prometheus.yml), with what each rule reads."""
    lines = [
        "# meowbot's recording rules, generated by `meowbot prometheus-rules` from the health",
        "# checks and MEOWBOT_CONFIG: regenerate them when the config changes (a rule whose",
        "# query no longer matches the bot's is simply not used). Check with",
        "# `promtool check rules FILE`; load with `rule_files:` and a reload (SIGHUP).",
    ]
    return _described(lines, groups) + _dump({"groups": [g.as_dict() for g in groups]})


PROMETHEUS_RULE_NAME = "meowbot"


def prometheus_rule_yaml(groups: Sequence[RuleGroup]) -> str:
    """The same groups as one PrometheusRule object of prometheus-operator (`--kubernetes`):
    the operator loads it into each Prometheus whose rule selectors pick it. No namespace:
    the one it is applied in (deploy/kubernetes/ sets it)."""
    lines = [
        "# meowbot's recording rules as a PrometheusRule, generated by `meowbot prometheus-rules",
        "# --kubernetes` from the health checks and MEOWBOT_CONFIG: regenerate it when the config",
        "# changes (a rule whose query no longer matches the bot's is simply not used).",
        "# prometheus-operator loads it into the Prometheus whose ruleSelector picks its labels.",
    ]
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": PROMETHEUS_RULE_NAME},
        "spec": {"groups": [g.as_dict() for g in groups]},
    }
    return _described(lines, groups) + _dump(doc)


def _described(head: list[str], groups: Sequence[RuleGroup]) -> str:
    """The heading comment, then a comment line a rule saying what it reads."""
    lines = [*head, "#"]
    for group in groups:
        lines.append(f"# {group.name}, every {group.interval_s} s:")
        lines.extend(f"#   {rule.record}: {rule.what}" for rule in group.rules)
    return "\n".join(lines) + "\n"


def _dump(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=10_000)
