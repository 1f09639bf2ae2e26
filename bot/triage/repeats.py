"""Repeat offenders across weeks: a GPU or node whose fault comes back again and again.

A fault is kept as occurrences (cause, node, GPU, first seen, last seen) in the fault history
(the `FaultHistory` port; Redis for 90 days). An occurrence is a fault seen after a gap of
`health.repeat.gap_s`: seen in every sweep, or flapping within the gap, it stays one however
long it lasts, so a day of sweeps is one occurrence, not 1,440. A GPU (or, under a `per: node`
rule, a node) with `occurrences` of a cause within `window_days` is an offender, and its faults
escalate (`escalate_to`, RMA by default): the faults themselves carry the escalation, so the one
verdict function and every surface that reads faults (/node-health, /hw-faults, the sweep's
alerts, App Home) say the same. An offender whose fault is not present now (the GPU was reset
and the node resumed) stays one while its occurrences are in the window: a fault is added for
it, so a lemon is not put back into service between its failures.

Everything here is pure: history, faults and a time in, occurrences, offenders and faults out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.drain_reason import short_cause
from bot.models import Action, Evidence, Fault, FaultKind, Severity, VerdictLevel
from bot.triage.kinds import words
from bot.triage.repeat_config import FAILED_VALIDATION, RepeatConfig, RepeatRule
from bot.triage.verdict import fault_level, level_of
from bot.words import ordinal

# The series an added offender fault names as its evidence: the count of occurrences.
OCCURRENCES_SERIES = "meowbot_fault_occurrences"

_ACTION_OF_LEVEL = {
    VerdictLevel.RMA: Action.RMA,
    VerdictLevel.DRAIN: Action.DRAIN,
    VerdictLevel.DEGRADED: Action.WATCH,
    VerdictLevel.HEALTHY: Action.NONE,
}

Key = tuple[str, str, int | None]  # cause, node, GPU


@dataclass(frozen=True)
class Occurrence:
    cause: str  # as a drain reason names it: `xid79`, `ecc_dbe`
    kind: FaultKind
    node: str
    gpu: int | None
    first_seen: datetime
    last_seen: datetime

    @property
    def key(self) -> Key:
        return (self.cause, self.node, self.gpu)


@dataclass(frozen=True)
class Offender:
    cause: str
    kind: FaultKind
    node: str
    gpu: int | None  # None: the node (a `per: node` rule, or a fault of no GPU)
    seen: tuple[datetime, ...]  # when each occurrence in the window began, oldest first
    gpus: tuple[int, ...]  # the GPUs its occurrences were on
    window_days: float
    escalate_to: VerdictLevel
    per_node: bool

    def line(self, now: datetime) -> str:
        """`3rd Xid 79 on GPU 3 in 30 days: 02 Nov, 19 Nov, today`."""
        where = (
            f"GPU {self.gpu}"
            if self.gpu is not None and not self.per_node
            else "the node"
            + (f" (GPUs {', '.join(map(str, self.gpus))})" if len(self.gpus) > 1 else "")
        )
        days = f"{self.window_days:g} {'day' if self.window_days == 1 else 'days'}"
        dates = ", ".join(_day(t, now) for t in self.seen)
        what = cause_words(self.cause, self.kind)
        return f"{ordinal(len(self.seen))} {what} on {where} in {days}: {dates}"


def cause_words(cause: str, kind: FaultKind) -> str:
    """`Xid 79`, `double-bit ECC error`: the cause as a person says it."""
    if cause == FAILED_VALIDATION:
        return "failed validation"
    if kind is FaultKind.XID and cause.startswith("xid") and cause[3:].isdigit():
        return f"Xid {cause[3:]}"
    return words(kind)


def _day(t: datetime, now: datetime) -> str:
    if t.date() == now.date():
        return "today"
    if t.date() == (now - timedelta(days=1)).date():
        return "yesterday"
    return t.strftime("%d %b")


def failed_validation(node: str, at: datetime) -> Occurrence:
    """A failed "Test and resume" of `node`, as its history keeps it. Its kind is DCGM's
    health (the suite's first word is DCGM's diagnostics); its cause is its own."""
    return Occurrence(FAILED_VALIDATION, FaultKind.DCGM_HEALTH, node, None, at, at)


def sightings(faults: Iterable[Fault], at: datetime, *, since: bool = False) -> list[Occurrence]:
    """The faults that say something is wrong (not history, not an application's Xid), as
    occurrences seen at `at`; with `since`, seen from when each began (`Fault.since`): an
    Alertmanager alert delivered again hours later (its repeat interval, longer than the gap)
    is the same occurrence, not another."""
    out: dict[Key, Occurrence] = {}
    for f in faults:
        if fault_level(f) is VerdictLevel.HEALTHY or _is_added(f):
            continue
        first = min(f.since, at) if since else at
        occ = Occurrence(short_cause(f), f.kind, f.node, f.gpu, first, at)
        out.setdefault(occ.key, occ)
    return list(out.values())


def fold(occurrences: Iterable[Occurrence], gap_s: float) -> list[Occurrence]:
    """One occurrence for each run of sightings of a cause on a GPU with no gap longer than
    `gap_s`: a fault seen in every sweep for a day is one; a fault seen again after a quiet
    week is two. Also merges what two replicas recorded of the same fault at once."""
    by_key: dict[Key, list[Occurrence]] = defaultdict(list)
    for occ in occurrences:
        by_key[occ.key].append(occ)
    gap = timedelta(seconds=gap_s)
    out: list[Occurrence] = []
    for runs in by_key.values():
        runs.sort(key=lambda o: o.first_seen)
        cur = runs[0]
        for occ in runs[1:]:
            if occ.first_seen <= cur.last_seen + gap:
                cur = replace(cur, last_seen=max(cur.last_seen, occ.last_seen))
            else:
                out.append(cur)
                cur = occ
        out.append(cur)
    return sorted(out, key=lambda o: (o.node, o.first_seen, o.cause, _gpu_order(o.gpu)))


def bounded(
    occurrences: Iterable[Occurrence], now: datetime, keep_days: float, cap: int
) -> list[Occurrence]:
    """What a node's history keeps: seen within `keep_days`, the newest `cap` of them."""
    since = now - timedelta(days=keep_days)
    kept = sorted((o for o in occurrences if o.last_seen >= since), key=lambda o: o.last_seen)
    return kept[-cap:] if cap > 0 else []


def _gpu_order(gpu: int | None) -> int:
    return -1 if gpu is None else gpu


def _matches(rule: RepeatRule, occ: Occurrence) -> bool:
    return occ.cause in rule.causes or occ.kind.value in rule.causes


def offenders(history: Iterable[Occurrence], now: datetime, cfg: RepeatConfig) -> list[Offender]:
    """The GPUs and nodes with `occurrences` of one cause within the window, by rule; one
    offender a (cause, node, GPU), at the highest escalation its rules give."""
    if not cfg.enabled:
        return []
    folded = [o for o in fold(history, cfg.gap_s) if o.first_seen <= now]
    found: dict[Key, Offender] = {}
    for rule in cfg.rules:
        since = now - timedelta(days=cfg.window_days_of(rule))
        per_node = rule.per == "node"
        groups: dict[Key, list[Occurrence]] = defaultdict(list)
        for occ in folded:
            if _matches(rule, occ) and occ.last_seen >= since:
                groups[(occ.cause, occ.node, None if per_node else occ.gpu)].append(occ)
        for (cause, node, gpu), occs in groups.items():
            if len(occs) < cfg.occurrences_of(rule):
                continue
            occs.sort(key=lambda o: o.first_seen)
            level = cfg.escalate_to_of(rule)
            candidate = Offender(
                cause=cause,
                kind=occs[0].kind,
                node=node,
                gpu=gpu,
                seen=tuple(o.first_seen for o in occs),
                gpus=tuple(sorted({o.gpu for o in occs if o.gpu is not None})),
                window_days=cfg.window_days_of(rule),
                escalate_to=level,
                per_node=per_node,
            )
            held = found.get((cause, node, gpu))
            if held is None or level.rank > held.escalate_to.rank:
                found[(cause, node, gpu)] = candidate
    return sorted(
        found.values(),
        key=lambda o: (-o.escalate_to.rank, -len(o.seen), o.node, _gpu_order(o.gpu), o.cause),
    )


def _is_added(fault: Fault) -> bool:
    return bool(fault.evidence) and fault.evidence[0].series == OCCURRENCES_SERIES


def escalate(faults: Sequence[Fault], found: Sequence[Offender], now: datetime) -> list[Fault]:
    """`faults` with each offender's faults escalated and its history said; an offender with
    no fault present now gets one, so its verdict holds between its failures."""
    out = list(faults)
    for off in found:
        action = _ACTION_OF_LEVEL[off.escalate_to]
        severity = (
            Severity.CRITICAL
            if off.escalate_to.rank >= VerdictLevel.DRAIN.rank
            else Severity.WARNING
        )
        line = off.line(now)
        hits = [
            i
            for i, f in enumerate(out)
            if f.node == off.node
            and short_cause(f) == off.cause
            and (off.gpu is None or f.gpu == off.gpu)
            and fault_level(f) is not VerdictLevel.HEALTHY
        ]
        for i in hits:
            f = out[i]
            update: dict[str, object] = {"repeat": line}
            if level_of(severity, action).rank > fault_level(f).rank:
                update |= {
                    "action": action,
                    "severity": max(f.severity, severity, key=lambda s: s.rank),
                }
            out[i] = f.model_copy(update=update)
        if hits:
            continue
        labels = {"gpu": str(off.gpu)} if off.gpu is not None else {}
        if off.cause == FAILED_VALIDATION:
            labels["cause"] = off.cause  # its kind is DCGM's; its drain reason says this
        if off.kind is FaultKind.XID and off.cause[3:].isdigit():
            labels["xid"] = off.cause[3:]  # so the drain reason names the code: `xid79 gpu3`
        out.append(
            Fault(
                kind=off.kind,
                node=off.node,
                gpu=off.gpu,
                since=off.seen[-1],
                evidence=(
                    Evidence(
                        series=OCCURRENCES_SERIES,
                        labels=labels,
                        value=float(len(off.seen)),
                        note=f"occurrences in {off.window_days:g} days",
                    ),
                ),
                severity=severity,
                action=action,
                summary=f"Repeat offender: {line} (not present now)",
                repeat=line,
            )
        )
    return out
