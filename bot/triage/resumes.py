"""meowbot's memory of the nodes it resumed, and what it does with it: an Xid that predates a
resume is history, not a reason to drain the node again.

`DCGM_FI_DEV_XID_ERRORS` is the last Xid a GPU had, and it stays set after the GPU is reset
(dcgm-exporter #500): a node whose GPU was reset, drained and resumed still shows the
old Xid, and every later read would drain it again for it. A newer exporter's
`DCGM_EXP_XID_ERRORS_TOTAL` grows in the window after such an Xid too. So the Xid findings
of a node meowbot resumed are read again at the moment of the resume: a finding whose series
held the same value then (the same last Xid; as many Xids of that code since the exporter
started) came before the resume and is said as history; only what changed since counts. A
reboot needs none of this (the exporter restarts and the gauge is gone); a resume done outside
meowbot (scontrol) is not known here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from bot import metric_names as m
from bot.models import Action, Fault, FaultKind, Severity
from bot.ports import ResumeMemory
from bot.triage.checks import HealthRun
from bot.triage.ports import Reader
from bot.triage.table import MetricRequest, Table

# The Xid series whose value at the resume says whether the finding came before it: the
# last-Xid gauge (the code), the exporter's cumulative count per code, and its count per code
# in a sliding window (a finding there is older than the resume only while the resume is
# inside that window, label `window_size_in_ms`).
REREAD: tuple[str, ...] = (
    m.DCGM_FI_DEV_XID_ERRORS,
    m.DCGM_EXP_XID_ERRORS_TOTAL,
    m.DCGM_EXP_XID_ERRORS_COUNT,
)
WINDOW_LABEL = "window_size_in_ms"  # on DCGM_EXP_XID_ERRORS_COUNT (collector/const.go)


def _key(series: str, labels: Mapping[str, str], node: str) -> tuple[str, str, str, str]:
    return (series, node, labels.get(m.LABEL_GPU, ""), labels.get(m.LABEL_XID, ""))


def _values(table: Table) -> dict[tuple[str, str, str, str], float]:
    """Each Xid series' raw value, by (series, node, GPU, code)."""
    out: dict[tuple[str, str, str, str], float] = {}
    for series in REREAD:
        col = table.get(series)
        if col is None:
            continue
        for i, value in enumerate(col.values):
            if value == value:
                out[_key(series, col.labels(i), col.node(i))] = value
    return out


def history(fault: Fault, resumed: datetime) -> Fault:
    """The finding said as what it is: before the resume, not a reason to drain again."""
    when = resumed.strftime("%Y-%m-%d %H:%M UTC")
    gauge = bool(fault.evidence) and fault.evidence[0].series == m.DCGM_FI_DEV_XID_ERRORS
    why = (
        "the last-Xid gauge stays set after a GPU reset"
        if gauge
        else "no Xid of this code counted since"
    )
    return fault.model_copy(
        update={
            "severity": Severity.INFO,
            "action": Action.NONE,
            "summary": f"{fault.summary}; before meowbot resumed the node at {when} ({why})",
        }
    )


def forget_before_resume(
    run: HealthRun,
    resumed: Mapping[str, datetime],
    now: Mapping[tuple[str, str, str, str], float],
    then: Mapping[str, Mapping[tuple[str, str, str, str], float]],
) -> HealthRun:
    """`run` with each Xid finding of a resumed node turned into history when its series held
    the same value at the resume (`then[node]`) as now: pure, so tests give it plain data."""
    faults = []
    for fault in run.faults:
        at = resumed.get(fault.node)
        if at is None or fault.kind is not FaultKind.XID or not fault.evidence:
            faults.append(fault)
            continue
        ev = fault.evidence[0]
        key = _key(ev.series, ev.labels, fault.node)
        before = then.get(fault.node, {}).get(key)
        same = ev.series in REREAD and before is not None and before == now.get(key)
        window_ms = ev.labels.get(WINDOW_LABEL, "")
        if window_ms.isdigit() and (run.at - at).total_seconds() * 1000 > int(window_ms):
            same = False  # the exporter's window no longer reaches back to the resume
        faults.append(history(fault, at) if same else fault)
    return HealthRun(at=run.at, faults=faults, not_run=run.not_run)


async def apply_resume_memory(
    metrics: Reader,
    memory: ResumeMemory | None,
    run: HealthRun,
    window_s: float,
) -> HealthRun:
    """Reads the Xid series of resumed nodes with Xid findings again, now and at each resume,
    and turns what predates the resume into history. No query when no such node exists."""
    if memory is None:
        return run
    nodes = sorted(
        {f.node for f in run.faults if f.kind is FaultKind.XID and f.action is not Action.NONE}
    )
    if not nodes:
        return run
    resumed = {n: t for n, t in (await memory.resumes(nodes)).items() if t <= run.at}
    if not resumed:
        return run
    requests = [MetricRequest(series) for series in REREAD]
    asked = sorted(resumed)
    now = _values(await metrics.read(requests, nodes=asked, window_s=window_s, at=run.at))
    by_time: dict[datetime, list[str]] = defaultdict(list)
    for node, at in resumed.items():
        by_time[at].append(node)
    then: dict[str, dict[tuple[str, str, str, str], float]] = defaultdict(dict)
    for at, group in sorted(by_time.items()):
        values = _values(await metrics.read(requests, nodes=group, window_s=window_s, at=at))
        for key, value in values.items():
            then[key[1]][key] = value
    return forget_before_resume(run, resumed, now, then)
