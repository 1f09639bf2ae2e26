"""The doctor's Prometheus lines: reachable; each health check runnable or not, with the metric
families it lacks (from the sweep's own read of the fleet, so what it says is what the sweep
will do); the host label the series carry; meowbot's recording rules kept up or not, and how
far back they reach against the days of history /job-slow, /regressions and /hw-faults why
read; and what one sweep costs at this fleet's size."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bot import metric_names as m
from bot.alerts.runtime import SWEEP_DUTY
from bot.backends import prometheus_rules as rules
from bot.backends.http import Deadline
from bot.backends.prometheus import PrometheusMetrics
from bot.backends.prometheus_rules import RuleGroup
from bot.doctor.report import Line, Status
from bot.errors import BackendError
from bot.precursors.ask import DEFAULT_WINDOW_S as WHY_WINDOW_S
from bot.regressions.ask import DEFAULT_WINDOW as REGRESSIONS_WINDOW
from bot.regressions.config import RegressionsConfig
from bot.triage.checks import Check, HealthConfig, requests_for, run_checks
from bot.triage.jobs import HISTORY as PACE_HISTORY
from bot.triage.stragglers import StragglerConfig
from bot.triage.table import Column

PART = "Prometheus"
TIMEOUT_S = 30.0


def check_lines(
    checks: Sequence[Check], not_run: Mapping[str, Sequence[str]], nodes: int
) -> list[Line]:
    """One line for the checks that can run, then one a check that cannot (its metrics absent)."""
    unable = [
        Line(
            PART,
            f"check {check.name}",
            Status.FAIL,
            f"cannot run: no {', '.join(sorted(set(not_run[check.name])))} in Prometheus",
            "enable the field in dcgm-exporter's counters CSV (or the node_exporter "
            "collector) and scrape it; until then this fault is never found",
        )
        for check in checks
        if not_run.get(check.name)
    ]
    summary = Line(
        PART,
        "health checks",
        Status.WARN if unable else Status.PASS,
        f"{len(checks) - len(unable)} of {len(checks)} can run over {nodes} nodes",
        "see the failing checks below" if unable else "",
    )
    return [summary, *unable]


def host_label_line(labels: Collection[str] | None, node_label: str) -> Line:
    """Which host label a GPU's series carry, of those meowbot reads a node's name from
    (`labels` None: there is no GPU series at all)."""
    if labels is None:
        return Line(
            PART,
            "host label",
            Status.FAIL,
            f"no {m.DCGM_FI_DEV_GPU_TEMP} series at all: no GPU is exported",
            "run dcgm-exporter on the GPU nodes and add it to Prometheus' scrape_configs",
        )
    known = (*m.HOST_LABELS, node_label, m.LABEL_INSTANCE)
    found = [label for label in known if label in labels]
    if not found:
        return Line(
            PART,
            "host label",
            Status.FAIL,
            f"{m.DCGM_FI_DEV_GPU_TEMP} carries none of {', '.join(known)}",
            "run dcgm-exporter with its Hostname label (the default) or relabel a node label",
        )
    return Line(PART, "host label", Status.PASS, f"GPU series name their node by {found[0]}")


def rules_line(expected: Sequence[RuleGroup], fresh: Mapping[str, float]) -> Line:
    wanted = {rule.record for group in expected for rule in group.rules}
    kept = wanted & set(fresh)
    if not kept:
        return Line(
            PART,
            "recording rules",
            Status.WARN,
            "none of meowbot's are kept up: every read is raw (slower /hw-faults, costlier "
            "sweeps on a big fleet)",
            "load `meowbot prometheus-rules` into Prometheus' rule_files",
        )
    if kept != wanted:
        return Line(
            PART,
            "recording rules",
            Status.WARN,
            f"{len(kept)} of {len(wanted)} kept up: the others are read raw",
            "reload `meowbot prometheus-rules` (this configuration's rules changed)",
        )
    oldest = max(fresh[name] for name in kept)
    return Line(
        PART, "recording rules", Status.PASS, f"all {len(wanted)} kept up (oldest {oldest:.0f} s)"
    )


@dataclass(frozen=True)
class HistoryRead:
    """An answer that reads days of recorded series: it reads them only where their rules ran
    over its whole window, else all of it raw (slower; at coarser steps on a big fleet)."""

    answer: str
    seconds: float
    records: frozenset[str]


def history_reads(
    groups: Sequence[RuleGroup],
    regressions: RegressionsConfig,
    stragglers: StragglerConfig,
    node_label: str,
) -> list[HistoryRead]:
    """The answers that read days of history, each with the recorded series it reads (the
    names bot/backends/prometheus.py, prometheus_history.py and prometheus_precursors.py
    derive from the same queries), of those `groups` record."""
    step, compute = stragglers.step_metric, stragglers.compute_metric
    pace = [rules.recorded_name(q, step) for q in rules.pace_queries(stragglers)]
    infos = [
        rules.recorded_name(rules.info_count_query(metric, labels, node_label), metric)
        for metric, labels in rules.info_labels(regressions).items()
    ]
    regressed = [
        *infos,
        rules.recorded_name(rules.job_nodes_query(stragglers), step),
        pace[0],  # every job's slowest rank
        rules.recorded_name(rules.node_compute_query(stragglers), compute),
    ]
    why = [r.record for g in groups if g.name == rules.PRECURSOR_GROUP for r in g.rules]
    kept = {rule.record for group in groups for rule in group.rules}
    pace_s, regressions_s = PACE_HISTORY.total_seconds(), REGRESSIONS_WINDOW.total_seconds()
    reads = (
        (f"/job-slow's {pace_s / 3600:.0f} h pace", pace_s, pace),
        (f"/regressions' {regressions_s / 86400:.0f} days", regressions_s, regressed),
        (f"/hw-faults why's {WHY_WINDOW_S / 86400:.0f} days", WHY_WINDOW_S, why),
    )
    return [
        HistoryRead(answer, seconds, frozenset(kept & set(names)))
        for answer, seconds, names in reads
        if kept & set(names)
    ]


REACH_STEP_S = 60
"""The precision of the reach: the rules' sentinels are looked for at each minute back."""


def _ago(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f}".removesuffix(".0") + " days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else "under a minute"


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def reach_line(
    reads: Sequence[HistoryRead], oldest: Mapping[str, float], now_s: float, span_s: float, url: str
) -> Line | None:
    """How far back the rules' series reach (`oldest`: each recorded series' first sentinel
    within `span_s` of `now_s`), against what each answer of `reads` reads."""
    if not reads:
        return None
    starts: dict[str, float] = {}
    for read in reads:
        firsts = [oldest[r] for r in read.records if r in oldest]
        if len(firsts) == len(read.records):
            starts[read.answer] = max(firsts)  # the series that began last bounds the read
    if not starts:
        return None  # none kept up: rules_line said so
    start = max(starts.values())
    if start <= now_s - span_s + REACH_STEP_S:
        reach = f"more than {_ago(span_s)}"
    else:
        reach = (
            f"to {datetime.fromtimestamp(start, UTC):%Y-%m-%d %H:%M} UTC ({_ago(now_s - start)})"
        )
    whole = [
        r.answer
        for r in reads
        if r.answer in starts and now_s - starts[r.answer] + REACH_STEP_S >= r.seconds
    ]
    short = [r.answer for r in reads if r.answer not in whole]
    said = f"back {reach}: "
    if whole:
        said += f"{_listed(whole)} read{'s' if len(whole) == 1 else ''} them"
    if short:
        said += "; " if whole else ""
        said += (
            f"{_listed(short)} read raw instead (slower, and coarser on a big fleet) until "
            "the rules reach back that far"
        )
    if not short:
        return Line(PART, "recording rules' reach", Status.PASS, said)
    longest = max(r.seconds for r in reads if r.answer in short)
    fix = (
        "backfill them with `promtool tsdb create-blocks-from rules "
        f"--start={int(now_s - longest)} --end={int(start)} --url={url} RULES.yml` (the "
        "file `meowbot prometheus-rules` wrote), then move the blocks into Prometheus' data "
        "folder (docs/prometheus.md)"
    )
    return Line(PART, "recording rules' reach", Status.WARN, said, fix)


async def rule_starts(
    metrics: PrometheusMetrics, span_s: float, deadline: Deadline
) -> tuple[dict[str, float], float]:
    """Each recorded series' oldest sentinel (a sentinel's value is when its rule ran) within
    `span_s`, looked for each minute back in one subquery over the sentinel rows alone (a row
    a rule; the sentinel now too, for a rule younger than the last whole minute the subquery
    steps on), and the engine's clock."""
    label = "meowbot_rule"
    named = f'label_replace({{{rules.SENTINEL_LABEL}!=""}}, "{label}", "$1", "__name__", "(.+)")'
    back = f"min_over_time({named}[{int(span_s)}s:{REACH_STEP_S}s])"
    promql = f"min by ({label}) ({back} or {named}) or vector(time())"
    rows = await metrics.query(promql, at=None, deadline=deadline)
    starts: dict[str, float] = {}
    now_s = time.time()
    for row in rows:
        try:
            value = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        name = (row.get("metric") or {}).get(label)
        if name:
            starts[name] = value
        else:
            now_s = value
    return starts, now_s


def cost_line(seconds: float, queries: int, nodes: int, interval_s: int) -> Line:
    busy = seconds / interval_s
    said = (
        f"one sweep read {nodes} nodes in {seconds:.2f} s with {queries} queries; "
        f"every {interval_s} s that is {busy:.0%} of the time"
    )
    if busy > 1 / SWEEP_DUTY:  # past it the sweep loop stretches its interval
        return Line(
            PART,
            "sweep cost",
            Status.WARN,
            said,
            "load the recording rules, or raise MEOWBOT_SWEEP_INTERVAL: the sweep stretches "
            "itself to twice its duration",
        )
    return Line(PART, "sweep cost", Status.PASS, said)


async def _labels(metrics: PrometheusMetrics) -> set[str] | None:
    rows = await metrics.query(
        f"topk(1, {m.DCGM_FI_DEV_GPU_TEMP})", at=None, deadline=Deadline(TIMEOUT_S)
    )
    return set(rows[0].get("metric") or {}) if rows else None


async def prometheus_lines(
    url: str | None,
    health: HealthConfig,
    checks: Sequence[Check],
    expected_rules: Sequence[RuleGroup],
    sweep_interval_s: int,
    window_s: float,
    reads: Sequence[HistoryRead] = (),
) -> list[Line]:
    if not url:
        return [
            Line(
                PART,
                "server",
                Status.WARN,
                "PROMETHEUS_URL is not set: no node's health is checked and the sweep is off",
                "set PROMETHEUS_URL to the Prometheus that scrapes dcgm-exporter",
            )
        ]
    metrics = PrometheusMetrics(
        url, node_label=health.node_label, recorded=health.recorded_rules, timeout_s=TIMEOUT_S
    )
    try:
        try:
            await metrics.query("vector(1)", at=None, deadline=Deadline(5.0))
        except BackendError as exc:
            return [Line(PART, "server", Status.FAIL, str(exc), "check PROMETHEUS_URL")]
        lines = [Line(PART, "server", Status.PASS, f"answers at {url}")]
        started, before = time.perf_counter(), metrics.queries
        try:
            table = await metrics.read(requests_for(checks, health), nodes=None, window_s=window_s)
        except BackendError as exc:
            return [*lines, Line(PART, "the sweep's read", Status.FAIL, str(exc), "see above")]
        took, queries = time.perf_counter() - started, metrics.queries - before
        run = run_checks(table, health, checks)
        nodes = _nodes(table.columns)
        lines += check_lines(checks, run.not_run, nodes)
        lines.append(host_label_line(await _labels(metrics), health.node_label))
        if health.recorded_rules:
            fresh = await metrics.recorded_rules(Deadline(5.0))
            lines.append(rules_line(expected_rules, fresh))
            if fresh and reads:
                span_s = max(r.seconds for r in reads) + 86400
                starts, now_s = await rule_starts(metrics, span_s, Deadline(TIMEOUT_S))
                reach = reach_line(reads, starts, now_s, span_s, url)
                if reach is not None:
                    lines.append(reach)
        lines.append(cost_line(took, queries, nodes, sweep_interval_s))
        return lines
    finally:
        await metrics.close()


def _nodes(columns: Mapping[str, Column]) -> int:
    """The nodes the read saw in any column (the unfiltered ones hold every node)."""
    names: set[str] = set()
    for column in columns.values():
        rows = column.node_rows if column.node_rows is not None else range(len(column))
        names.update(column.node(i) for i in rows)
    return len(names)
