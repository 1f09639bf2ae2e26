"""Node health and hardware faults: the services behind /node-health and /hw-faults.

Plain async functions over ports (metrics, scheduler, inventory, fault history); they return
report models and never touch Slack. Each reads the fleet with a fixed number of metric queries.
Every one of them judges faults with their history (bot/triage/repeats.py): a repeat offender
escalates the same way whichever surface asks.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.errors import BackendError
from bot.models import (
    Action,
    Fault,
    FaultKind,
    Job,
    JobState,
    Node,
    Severity,
    Verdict,
    VerdictLevel,
)
from bot.offload import Offload
from bot.ports import Inventory, Located, ResumeMemory, Scheduler, SchedulerNode
from bot.triage.checks import (
    CHECKS,
    CHECKS_BY_NAME,
    HealthConfig,
    HealthRun,
    enabled_checks,
    requests_for,
    run_checks,
)
from bot.triage.kinds import words
from bot.triage.ports import EventHistory, FaultHistory, Metrics, PastEvent
from bot.triage.repeat_config import RepeatConfig
from bot.triage.repeats import (
    Occurrence,
    Offender,
    bounded,
    escalate,
    fold,
    offenders,
    sightings,
)
from bot.triage.resumes import apply_resume_memory
from bot.triage.stragglers import StragglerConfig
from bot.triage.targets import BadInput, expand_nodes, parse_duration, parse_kinds, take_since
from bot.triage.verdict import fault_level, verdicts
from bot.triage.vocabulary import resolve_names, unquote
from bot.triage.window import DataReach
from bot.words import when

log = logging.getLogger(__name__)

# Nodes under one leaf switch with the same fault at once point at the switch.
SWITCH_SUSPECT_MIN_NODES = 4


# What every health answer says when there is nothing to read health from: a real scheduler
# without Prometheus. Never "healthy", never the simulator's word.
NO_METRICS = "no metrics source: set PROMETHEUS_URL"


class NoMetrics(BackendError):
    """A read of health without a metrics source (a path that forgot to ask first)."""

    def __init__(self) -> None:
        super().__init__("metrics", NO_METRICS)

    def user_text(self) -> str:
        return NO_METRICS


@dataclass
class Triage:
    # None: a real scheduler without a metrics source; its nodes' health is not checked.
    metrics: Metrics | None
    inventory: Inventory
    scheduler: Scheduler | None = None
    config: HealthConfig = field(default_factory=HealthConfig)
    stragglers: StragglerConfig = field(default_factory=StragglerConfig)
    # The nodes meowbot resumed: an Xid from before a resume does not drain a node again.
    resumes: ResumeMemory | None = None
    # Each node's fault occurrences over weeks: finds the repeat offenders.
    history: FaultHistory | None = None
    # Where CPU-heavy work runs (evaluating a big table), off the event loop: bot/offload.py.
    cpu: Offload = field(default_factory=Offload)
    # The inventory's names as a set, with the sequence it was built from: a set of 50,000
    # names built on the loop for every command cost each one a millisecond or two.
    _known: tuple[Sequence[str], frozenset[str]] | None = field(default=None, repr=False)

    def known(self) -> frozenset[str]:
        """The inventory's node names as a set, rebuilt only when the inventory's list is new."""
        names = self.inventory.names()
        if self._known is None or self._known[0] is not names:
            self._known = (names, frozenset(names))
        return self._known[1]


@dataclass(frozen=True)
class NodeReport:
    node: str
    verdict: Verdict
    faults: list[Fault]
    not_run: dict[str, list[str]]
    info: Node | None
    scheduler: SchedulerNode | None
    scheduler_note: str | None
    at: datetime
    window_s: float  # the counters' window, named in the answer
    offenders: list[Offender] = field(default_factory=list)  # the node's, with their history
    scheduler_name: str = "Slurm"  # whose state `scheduler` is: "Kubernetes", or both
    jobs: list[Job] = field(default_factory=list)  # running on the node, with their owners


@dataclass(frozen=True)
class FleetSummary:
    asked: int
    verdicts: list[Verdict]  # unhealthy first, worst first
    counts: dict[VerdictLevel, int]
    not_run: dict[str, list[str]]
    unknown: list[str]
    at: datetime
    window_s: float


@dataclass(frozen=True)
class FaultGroup:
    kind: FaultKind
    faults: list[Fault]
    leaf_switch: str | None  # set when the group is one suspected switch fault
    severity: Severity

    @property
    def nodes(self) -> list[str]:
        return sorted({f.node for f in self.faults})


@dataclass(frozen=True)
class FaultsReport:
    groups: list[FaultGroup]
    counts: dict[FaultKind, int]
    repeat_gpus: list[tuple[str, int, int]]  # node, gpu, faults on it
    not_run: dict[str, list[str]]
    window_s: float
    scope: str
    at: datetime
    verdict_window_s: float  # what /node-health judges a node on, said where it differs
    offenders: list[Offender] = field(default_factory=list)  # across weeks, in scope
    repeat_only: bool = False  # `/hw-faults repeat`: the offenders are the answer
    history: HistoryReach | None = None  # how far back the fault history sees, when kept
    reach: DataReach | None = None  # where the metrics begin, when after the window's start


@dataclass(frozen=True)
class HistoryReach:
    """How far back the fault history can see: from when it began recording (at most its
    `keep_days`), against the longest window a repeat rule counts over. An empty history
    younger than that window is no finding ("no repeat offender") but a short memory."""

    since: datetime | None  # None: nothing recorded yet
    keep_days: float
    rule_days: float

    def short(self, at: datetime) -> bool:
        return self.since is None or (at - self.since).total_seconds() < self.rule_days * 86400


async def history_reach(triage: Triage, at: datetime) -> HistoryReach | None:
    """The fault history's reach now (None: no history is kept, or it cannot be read)."""
    cfg = triage.config.repeat
    if triage.history is None or not cfg.enabled:
        return None
    try:
        began = await triage.history.began()
    except BackendError as exc:
        log.warning("fault history unreadable: %s", exc)
        return None
    oldest = at - timedelta(days=cfg.keep_days)
    since = None if began is None else max(began, oldest)
    rule_days = max((cfg.window_days_of(r) for r in cfg.rules), default=cfg.window_days)
    return HistoryReach(since, cfg.keep_days, rule_days)


@dataclass(frozen=True)
class UserError:
    sentence: str
    # What it suggests instead, each a button that runs it: (label, command, text).
    retries: tuple[tuple[str, str, str], ...] = ()  # (label, command, text)


@dataclass(frozen=True)
class UncheckedNode:
    """A node the scheduler lists, where there is no metrics source: its scheduler state and
    jobs as the scheduler says them, its health not checked (`why`)."""

    node: str
    scheduler: SchedulerNode | None
    scheduler_note: str | None  # why there is no state, in a sentence
    scheduler_name: str
    jobs: list[Job]
    place: Located | None
    why: str  # why health is not checked, e.g. NO_METRICS
    at: datetime
    # From meowbot's own fault history, which needs no metrics: a repeat offender stays one.
    offenders: tuple[Offender, ...] = ()


@dataclass(frozen=True)
class UncheckedNodes:
    """A hostlist's nodes by their scheduler state, where there is no metrics source."""

    asked: int
    states: dict[str, SchedulerNode]
    unknown: list[str]
    scheduler_name: str
    why: str  # why health is not checked, e.g. NO_METRICS
    at: datetime


async def _run(triage: Triage, nodes: Sequence[str] | None, window_s: float) -> HealthRun:
    cfg = triage.config
    checks = enabled_checks(cfg)
    metrics = triage.metrics
    if metrics is None:
        raise NoMetrics
    table = await metrics.read(requests_for(checks, cfg), nodes=nodes, window_s=window_s)
    run = await triage.cpu.run(run_checks, table, cfg, checks)
    return await apply_resume_memory(metrics, triage.resumes, run, window_s)


def _judge_history(
    stored: Sequence[Occurrence],
    seen: Sequence[Occurrence],
    at: datetime,
    cfg: RepeatConfig,
    record: bool,
) -> tuple[dict[str, list[Occurrence]], list[Offender]]:
    """The history with what was seen now folded in: what to save of the nodes seen now (when
    recording), and the offenders."""
    merged = fold([*stored, *seen], cfg.gap_s)
    by_node: dict[str, list[Occurrence]] = {}
    if record and seen:
        touched = {o.node for o in seen}
        grouped: dict[str, list[Occurrence]] = defaultdict(list)
        for o in merged:
            if o.node in touched:
                grouped[o.node].append(o)
        by_node = {
            n: bounded(grouped[n], at, cfg.keep_days, cfg.max_per_node) for n in sorted(touched)
        }
    return by_node, offenders(merged, at, cfg)


async def _with_history(
    triage: Triage,
    nodes: Sequence[str] | None,
    faults: list[Fault],
    at: datetime,
    *,
    sighted: bool = True,
    record: bool = False,
    since: bool = False,
) -> tuple[list[Fault], list[Offender]]:
    """`faults` judged with their history: offenders found and their faults escalated.

    The faults of now count as seen (`sighted`) whether or not this call records them, so a
    surface that only reads agrees with one that records. `record` saves them: the sweep and
    /node-health do (one read and one write of the faulty nodes' history)."""
    cfg = triage.config.repeat
    if triage.history is None or not cfg.enabled:
        return faults, []
    seen = sightings(faults, at, since=since) if sighted else []
    try:
        stored = await triage.history.occurrences(nodes)
    except BackendError as exc:
        # Without its history a fault is judged on the present, as before there was one.
        log.warning("fault history unreadable: %s", exc)
        return faults, []
    # A fleet's history is thousands of occurrences: folded and judged off the event loop.
    by_node, found = await triage.cpu.run(_judge_history, stored, seen, at, cfg, record)
    if record:  # even nothing: the first record marks when the history began
        try:
            await triage.history.save(by_node, at)
        except BackendError as exc:
            log.warning("fault history not saved: %s", exc)
    if nodes is not None:
        asked = set(nodes)
        found = [o for o in found if o.node in asked]
    elif found:
        # The fleet is what the inventory says: a node retired (or gone from the metrics) with
        # history left is no offender to alert on or count.
        try:
            await triage.inventory.load()
        except BackendError as exc:
            log.warning("inventory unreadable, offenders unfiltered: %s", exc)
        else:
            known = triage.known()
            found = [o for o in found if o.node in known]
    return escalate(faults, found, at), found


@dataclass(frozen=True)
class FleetFaults:
    faults: list[Fault]
    unchecked: frozenset[FaultKind]  # kinds whose check could not run: absence proves nothing
    at: datetime


async def fleet_faults(triage: Triage, window_s: float | None = None) -> FleetFaults:
    """The faults of the whole fleet now, for the passive alert sweep. Raises BackendError.

    By default over the health window, as /node-health and App Home judge a node: an alert
    then fires and clears with the verdict /node-health gives."""
    window = window_s or triage.config.window_s
    run = await _run(triage, None, window)
    # Recorded over the health window or a shorter one: a longer one would date old faults now.
    current = window <= triage.config.window_s
    faults, _ = await _with_history(
        triage, None, _fold_related(run.faults), run.at, sighted=current, record=current
    )
    unchecked = (
        frozenset(kind for name in run.not_run for kind in CHECKS_BY_NAME[name].kinds)
        if run.not_run
        else frozenset()
    )
    return FleetFaults(faults, unchecked, run.at)


async def known_offenders(triage: Triage, nodes: Sequence[str] | None) -> list[Offender]:
    """The repeat offenders among `nodes` (None: the fleet) by their recorded history alone,
    for a surface that has no reading of its own (an Alertmanager alert's node)."""
    _, found = await _with_history(triage, nodes, [], datetime.now(UTC), sighted=False)
    return found


async def judge_reported(triage: Triage, faults: list[Fault], at: datetime) -> list[Fault]:
    """Faults another source reported (Alertmanager's alerts, as bot/alerts/repeats.py reads
    them), recorded in the fault history from when each began and judged with it: the same
    list, in order, a repeat offender's escalated and its history said (`Fault.repeat`).

    Recorded as the sweep records its own, so the sweep and Alertmanager seeing one fault, or
    one alert delivered again or to every replica, fold into one occurrence."""
    if not faults:
        return []
    nodes = sorted({f.node for f in faults})
    judged, _ = await _with_history(triage, nodes, faults, at, record=True, since=True)
    return judged[: len(faults)]  # not the faults added for offenders absent now


def _close(name: str, names: Sequence[str]) -> list[str]:
    return difflib.get_close_matches(name, names, n=3, cutoff=0.6)


def _nearest(name: str, names: Sequence[str]) -> str:
    close = _close(name, names)
    return f" Did you mean {', '.join(f'`{c}`' for c in close)}?" if close else ""


def _retries(
    command: str, close: Sequence[str], text: str = ""
) -> tuple[tuple[str, str, str], ...]:
    """Each suggested node as a button running `command` with it (and the rest of `text`)."""
    return tuple((node, command, f"{node} {text}".strip()) for node in close)


NodeAnswer = NodeReport | FleetSummary | UncheckedNode | UncheckedNodes | UserError


async def node_health(triage: Triage, text: str) -> NodeAnswer:
    try:
        asked = expand_nodes(text)
    except BadInput as exc:
        return UserError(str(exc))
    try:
        await triage.inventory.load()
    except BackendError as exc:
        return UserError(f"I could not list the nodes: {exc.user_text()}")
    known_names = triage.inventory.names()
    known = triage.known()
    asked = resolve_names(asked, known)  # `gpu42`, `GPU-0042`: the node they mean
    unknown = [n for n in asked if n not in known]
    if len(asked) == 1 and unknown:
        # Without metrics the nodes are the scheduler's list: it is who does not know it.
        who = "I don't" if triage.metrics is not None else _lister(triage) + " does not"
        return UserError(
            f"{who} know a node `{asked[0]}`.{_nearest(asked[0], known_names)}",
            _retries("/node-health", _close(asked[0], known_names)),
        )
    present = [n for n in asked if n in known]
    if not present:
        return UserError(f"None of the {len(asked)} nodes in that hostlist is known.")
    if triage.metrics is None:
        return await _unchecked(triage, present, unknown)
    cfg = triage.config
    sched_task = asyncio.ensure_future(
        _scheduler_nodes(triage, present if len(present) == 1 else None)
    )
    try:
        run = await _run(triage, present, cfg.window_s)
    except BackendError as exc:
        sched_task.cancel()
        return UserError(f"I could not read the metrics: {exc.user_text()}")
    faults, found = await _with_history(
        triage, present, _fold_related(run.faults), run.at, record=True
    )
    by_node = verdicts(present, faults)
    if len(present) == 1:
        node = present[0]
        sched, note = await sched_task
        here = sched.get(node) if sched else None
        running = await _jobs_on(triage, node) if here is not None and _busy(here) else []
        return NodeReport(
            node=node,
            verdict=by_node[node],
            faults=sorted((f for f in faults if f.node == node), key=_fault_order),
            not_run=run.not_run,
            info=triage.inventory.node(node),
            scheduler=sched.get(node) if sched else None,
            scheduler_note=note,
            at=run.at,
            window_s=cfg.window_s,
            offenders=[o for o in found if o.node == node],
            scheduler_name=_state_title(triage.scheduler),
            jobs=running,
        )
    sched_task.cancel()
    ordered = sorted(by_node.values(), key=lambda v: (-v.level.rank, v.node))
    counts = Counter(v.level for v in ordered)
    return FleetSummary(
        asked=len(asked),
        verdicts=ordered,
        counts={lv: counts.get(lv, 0) for lv in VerdictLevel},
        not_run=run.not_run,
        unknown=unknown,
        at=run.at,
        window_s=cfg.window_s,
    )


def _lister(triage: Triage) -> str:
    """Who lists the nodes when there are no metrics: the scheduler, by its name."""
    name = triage.scheduler.name if triage.scheduler is not None else "the scheduler"
    return name[:1].upper() + name[1:]


async def _unchecked(
    triage: Triage, present: list[str], unknown: list[str]
) -> UncheckedNode | UncheckedNodes:
    """What a cluster without a metrics source can say of nodes: the scheduler's state (and,
    for one node, its jobs); their health is not checked, and the answer says why."""
    at = datetime.now(UTC)
    title = _state_title(triage.scheduler)
    if len(present) > 1:
        states, _ = await _scheduler_nodes(triage, present)
        return UncheckedNodes(
            len(present) + len(unknown), states or {}, unknown, title, NO_METRICS, at
        )
    node = present[0]
    (states, note), jobs, (_, found) = await asyncio.gather(
        _scheduler_nodes(triage, present),
        _jobs_on(triage, node),
        _with_history(triage, [node], [], at, sighted=False),
    )
    return UncheckedNode(
        node=node,
        scheduler=states.get(node) if states else None,
        scheduler_note=note,
        scheduler_name=title,
        jobs=jobs,
        place=triage.inventory.place(node),
        why=NO_METRICS,
        at=at,
        offenders=tuple(found),
    )


def _busy(node: SchedulerNode) -> bool:
    """Allocated or mixed (Slurm), a job's pod on it (Kubernetes): someone's work runs there."""
    return any(word in node.state for word in ("alloc", "mix", "completing"))


async def _jobs_on(triage: Triage, node: str) -> list[Job]:
    """The running jobs on `node`, so that "allocated" names whose work it is; none when the
    scheduler cannot say (the state alone is still shown)."""
    if triage.scheduler is None:
        return []
    try:
        jobs = await triage.scheduler.jobs()
    except BackendError as exc:
        log.warning("jobs unreadable for %s: %s", node, exc)
        return []
    return sorted(
        (j for j in jobs if j.state is JobState.RUNNING and node in j.nodes),
        key=lambda j: j.job_id,
    )


def _state_title(scheduler: Scheduler | None) -> str:
    """Whose state /node-health shows: the scheduler's name where Kubernetes is one of them;
    else "Slurm", which the simulated scheduler stands in for."""
    name = scheduler.name if scheduler is not None else ""
    return name if "Kubernetes" in name else "Slurm"


async def _scheduler_nodes(
    triage: Triage, nodes: Sequence[str] | None
) -> tuple[dict[str, SchedulerNode] | None, str | None]:
    if triage.scheduler is None:
        return None, "No scheduler is configured (set SLURM_REST_URL or KUBECONFIG)."
    if nodes is None:
        return None, None
    try:
        return await triage.scheduler.nodes(nodes), None
    except BackendError as exc:
        return None, exc.user_text()


def _fault_order(f: Fault) -> tuple[int, int, str, int]:
    return (-fault_level(f).rank, -f.severity.rank, f.node, f.gpu if f.gpu is not None else -1)


# A symptom folded into the fault that explains it on the same node (and GPU): the check
# entries say which (`explained_by`).
_EXPLAINED_BY: dict[FaultKind, frozenset[FaultKind]] = {
    c.kind: c.explained_by for c in CHECKS if c.explained_by
}


def _fold_related(faults: list[Fault]) -> list[Fault]:
    """Keeps the cause, with the symptom's evidence attached, rather than two rows."""
    index: dict[tuple[str, int | None, FaultKind], int] = {}
    kept: list[Fault] = []
    for f in faults:
        if f.kind not in _EXPLAINED_BY:
            index[(f.node, f.gpu, f.kind)] = len(kept)
            kept.append(f)
    out: list[Fault] = list(kept)
    for f in faults:
        causes = _EXPLAINED_BY.get(f.kind)
        if causes is None:
            continue
        hit = next(
            (
                index[k]
                for c in causes
                for k in ((f.node, f.gpu, c), (f.node, None, c))
                if k in index
            ),
            None,
        )
        if hit is None:
            out.append(f)
        else:
            cause = out[hit]
            out[hit] = cause.model_copy(update={"evidence": (*cause.evidence, *f.evidence)})
    return out


# The word of `/hw-faults repeat`: the repeat offenders across weeks, not the window's faults.
REPEAT_WORD = "repeat"


def parse_faults_args(
    text: str,
) -> tuple[list[str] | None, frozenset[FaultKind] | None, float | None, bool]:
    """`[repeat] [node|hostlist|kind] [--since 24h]` -> (nodes, kinds, window, repeat)."""
    words, since = take_since(unquote(text), "24h")
    window = parse_duration(since) if since is not None else None
    repeat = False
    nodes: list[str] | None = None
    kinds: frozenset[FaultKind] | None = None
    for word in words:
        if word.lower() in {REPEAT_WORD, "repeats"}:
            repeat = True
        elif (found := parse_kinds(word)) is not None:
            kinds = found if kinds is None else kinds | found
        elif nodes is None:
            nodes = expand_nodes(word)
        else:
            raise BadInput(f"I read `{word[:40]}` as a second hostlist; give one.")
    return nodes, kinds, window, repeat


async def _past_events(
    events: EventHistory,
    kinds: frozenset[FaultKind] | None,
    nodes: Sequence[str] | None,
    at: datetime,
    window_s: float,
) -> list[PastEvent]:
    """The events of the window that the event history holds, of the kinds asked."""
    out: list[PastEvent] = []
    start = at - timedelta(seconds=window_s)
    for code in events.kinds():
        if kinds is not None and code not in {k.value for k in kinds}:
            continue
        try:
            out.extend(await events.events(code, nodes=nodes, start=start, end=at))
        except BackendError as exc:
            log.warning("event history unreadable for %s: %s", code, exc)
    return out


async def metrics_reach(events: EventHistory, start: datetime, end: datetime) -> DataReach | None:
    """Where the metrics begin, when after `start`; unread, nothing is said (the answer
    stands without it)."""
    try:
        return await events.reach(start, end)
    except BackendError as exc:
        log.warning("metrics' reach unreadable: %s", exc)
        return None


def with_past(faults: list[Fault], past: Sequence[PastEvent], at: datetime) -> list[Fault]:
    """`faults` and, for each node and kind the window's reading did not find, a fault of its
    past events: the same events `/hw-faults why` counts, listed where `/hw-faults --since`
    looks (once the simulator's week of reboots showed in one and not the other)."""
    found = {(f.node, f.kind) for f in faults}
    by: dict[tuple[str, FaultKind], list[datetime]] = defaultdict(list)
    for e in past:
        try:
            kind = FaultKind(e.kind)
        except ValueError:
            continue
        if (e.node, kind) not in found:
            by[(e.node, kind)].append(e.at)
    added = []
    for (node, kind), times in sorted(by.items(), key=lambda kv: (min(kv[1]), kv[0][0])):
        times.sort()
        said = ", ".join(when(t, at) for t in times[:3]) + (" ..." if len(times) > 3 else "")
        added.append(
            Fault(
                kind=kind,
                node=node,
                since=times[0],
                severity=Severity.WARNING,
                action=Action.WATCH,
                summary=f"{words(kind)} {'at' if len(times) == 1 else 'at each of'} {said} "
                "(from the event history)",
            )
        )
    return [*faults, *added]


async def hw_faults(
    triage: Triage, text: str, events: EventHistory | None = None
) -> FaultsReport | UserError:
    """`events`: the history of past events over days (`/hw-faults why`'s), listed too when
    the window is longer than the health window."""
    try:
        nodes, kinds, window, repeat = parse_faults_args(text)
    except BadInput as exc:
        return UserError(str(exc))
    if triage.metrics is None:
        # Absence of faults read from nothing is no finding: say what cannot be seen.
        return UserError(
            f"I cannot see hardware faults here: {NO_METRICS}. {_lister(triage)} lists the "
            "nodes and their state (`/node-health <node>`); their GPUs, links and reboots are "
            "read from metrics."
        )
    # The offenders are judged as /node-health judges a node: over the health window.
    window_s = window or (triage.config.window_s if repeat else 86400.0)
    try:
        await triage.inventory.load()
    except BackendError as exc:
        return UserError(f"I could not list the nodes: {exc.user_text()}")
    if nodes is not None:
        known = triage.known()
        nodes = resolve_names(nodes, known)
        unknown = [n for n in nodes if n not in known]
        nodes = [n for n in nodes if n in known]
        if not nodes:
            name = unknown[0]
            # The word may have been meant as a kind ("temprature"): say where the kinds are.
            kinds_hint = " nor a fault kind of that name (`/hw-faults help` lists them)"
            rest = " ".join(w for w in unquote(text).split() if w.lower() != name.lower())
            return UserError(
                f"I don't know a node `{name}`{kinds_hint if len(unknown) == 1 else ''}."
                f"{_nearest(name, triage.inventory.names())}",
                _retries("/hw-faults", _close(name, triage.inventory.names()), rest),
            )
    try:
        run = await _run(triage, nodes, window_s)
    except BackendError as exc:
        return UserError(f"I could not read the metrics: {exc.user_text()}")
    # Seen over the health window (or a shorter one), the faults count as seen now; over a
    # longer one they may be days old, and only the recorded history counts.
    faults, found = await _with_history(
        triage,
        nodes,
        _fold_related(run.faults),
        run.at,
        sighted=window_s <= triage.config.window_s,
    )
    reach = None
    if events is not None and window_s > triage.config.window_s:
        past = await _past_events(events, kinds, nodes, run.at, window_s)
        faults = with_past(faults, past, run.at)
        reach = await metrics_reach(events, run.at - timedelta(seconds=window_s), run.at)
    if kinds is not None:
        faults = [f for f in faults if f.kind in kinds]
        found = [o for o in found if o.kind in kinds]
    scope = "the fleet" if nodes is None else f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    if kinds is not None:
        scope += " (" + ", ".join(sorted(words(k) for k in kinds)) + ")"
    per_gpu = Counter((f.node, f.gpu) for f in faults if f.gpu is not None)
    return FaultsReport(
        groups=group_faults(faults, triage.inventory),
        counts=dict(Counter(f.kind for f in faults).most_common()),
        repeat_gpus=sorted(
            ((n, g, c) for (n, g), c in per_gpu.items() if g is not None and c > 1),
            key=lambda t: (-t[2], t[0], t[1]),
        ),
        not_run=run.not_run,
        window_s=window_s,
        scope=scope,
        at=run.at,
        verdict_window_s=triage.config.window_s,
        offenders=found,
        repeat_only=repeat,
        history=await history_reach(triage, run.at),
        reach=reach,
    )


def group_faults(faults: list[Fault], inventory: Inventory) -> list[FaultGroup]:
    """By cause, and by shared leaf switch: many nodes of one switch at once is one fault."""
    by_kind: dict[FaultKind, list[Fault]] = defaultdict(list)
    for f in faults:
        by_kind[f.kind].append(f)
    groups: list[FaultGroup] = []
    for kind, members in by_kind.items():
        by_leaf: dict[str, list[Fault]] = defaultdict(list)
        rest: list[Fault] = []
        for f in members:
            leaf = inventory.leaf_switch(f.node)
            if leaf is None:
                rest.append(f)
            else:
                by_leaf[leaf].append(f)
        for leaf, leaf_faults in by_leaf.items():
            if len({f.node for f in leaf_faults}) >= SWITCH_SUSPECT_MIN_NODES:
                groups.append(_group(kind, leaf_faults, leaf))
            else:
                rest.extend(leaf_faults)
        for f in sorted(rest, key=_fault_order):
            groups.append(_group(kind, [f], None))
    groups.sort(
        key=lambda g: (
            -max(fault_level(f).rank for f in g.faults),
            -g.severity.rank,
            -len(g.faults),
            g.kind.value,
            g.nodes[0],
        )
    )
    return groups


def _group(kind: FaultKind, faults: list[Fault], leaf: str | None) -> FaultGroup:
    severity = max((f.severity for f in faults), key=lambda s: s.rank)
    return FaultGroup(
        kind=kind, faults=sorted(faults, key=_fault_order), leaf_switch=leaf, severity=severity
    )


@dataclass(frozen=True)
class FleetGlance:
    nodes: int
    per_verdict: dict[VerdictLevel, int]  # judged over verdict_window_s, as /node-health does
    per_kind: dict[FaultKind, int]  # faults over window_s, as /hw-faults lists them
    not_run: dict[str, list[str]]
    at: datetime
    verdict_window_s: float
    window_s: float
    offenders: list[Offender] = field(default_factory=list)  # repeat offenders across weeks


@dataclass(frozen=True)
class StateGlance:
    """The fleet at a glance where there is no metrics source: nodes per scheduler state."""

    nodes: int
    per_state: dict[str, int]  # "idle", "allocated", "idle+DRAIN", ... most first
    scheduler_name: str
    why: str  # why health is not checked


async def _state_glance(triage: Triage) -> StateGlance | UserError:
    if triage.scheduler is None:
        return UserError(f"Health not checked: {NO_METRICS}.")
    try:
        states = await triage.scheduler.nodes()
    except BackendError as exc:
        return UserError(f"I could not list the nodes: {exc.user_text()}")
    per_state = Counter(
        s.state + ("+" + "+".join(s.flags) if s.flags else "") for s in states.values()
    )
    return StateGlance(
        nodes=len(states),
        per_state=dict(per_state.most_common()),
        scheduler_name=triage.scheduler.name,
        why=NO_METRICS,
    )


async def fleet_glance(
    triage: Triage, window_s: float = 86400.0
) -> FleetGlance | StateGlance | UserError:
    """The fleet at a glance (App Home): nodes per verdict, and faults by kind over the window.

    The verdicts are /node-health's (the same checks over the health window): judged over
    the day's counters instead, a node that rebooted this morning was "degraded" here and
    healthy in `/node-health` of the same hostlist. The faults by kind are the day's, as
    /hw-faults lists them; each is named with its window."""
    if triage.metrics is None:
        return await _state_glance(triage)
    verdict_window_s = triage.config.window_s
    try:
        await triage.inventory.load()
        if window_s == verdict_window_s:
            now_run = day_run = await _run(triage, None, window_s)
        else:
            now_run, day_run = await asyncio.gather(
                _run(triage, None, verdict_window_s), _run(triage, None, window_s)
            )
    except BackendError as exc:
        return UserError(f"I could not read the fleet: {exc.user_text()}")
    names = triage.inventory.names()
    now_faults, found = await _with_history(triage, None, _fold_related(now_run.faults), now_run.at)
    by_node = verdicts(names, now_faults)
    counts = Counter(v.level for v in by_node.values())
    return FleetGlance(
        nodes=len(names),
        per_verdict={lv: counts.get(lv, 0) for lv in VerdictLevel},
        per_kind=dict(Counter(f.kind for f in _fold_related(day_run.faults)).most_common()),
        not_run={**day_run.not_run, **now_run.not_run},
        at=now_run.at,
        verdict_window_s=verdict_window_s,
        window_s=window_s,
        offenders=found,
    )


@dataclass(frozen=True)
class UserJobs:
    user: str | None  # the cluster user, None when it could not be told
    jobs: list[Job]
    note: str | None  # why there is no list, in a sentence


async def user_jobs(triage: Triage, cluster_user: str | None) -> UserJobs:
    if triage.scheduler is None:
        return UserJobs(
            cluster_user, [], "No scheduler is configured (set SLURM_REST_URL or KUBECONFIG)."
        )
    if cluster_user is None:
        return UserJobs(
            None, [], "I could not tell your cluster user name (map it under `users:`)."
        )
    try:
        jobs = await triage.scheduler.jobs(user=cluster_user)
    except BackendError as exc:
        return UserJobs(cluster_user, [], exc.user_text())
    return UserJobs(cluster_user, sorted(jobs, key=lambda j: j.start, reverse=True), None)
