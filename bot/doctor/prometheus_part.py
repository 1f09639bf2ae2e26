"""The doctor's Prometheus lines: reachable; each health check runnable or not, with the metric
families it lacks (from the sweep's own read of the fleet, so what it says is what the sweep
will do); the host label the series carry; meowbot's recording rules kept up or not; and what
one sweep costs at this fleet's size."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence

from bot import metric_names as m
from bot.alerts.runtime import SWEEP_DUTY
from bot.backends.http import Deadline
from bot.backends.prometheus import PrometheusMetrics
from bot.backends.prometheus_rules import RuleGroup
from bot.doctor.report import Line, Status
from bot.errors import BackendError
from bot.triage.checks import Check, HealthConfig, requests_for, run_checks
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
