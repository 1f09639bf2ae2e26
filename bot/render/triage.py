"""Block Kit for /node-health and /hw-faults."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from bot import drain_reason
from bot.metric_names import NODE_BOOT_TIME_SECONDS
from bot.models import Fault, FaultKind, Job, VerdictLevel
from bot.mrkdwn import code, escape
from bot.ports import SchedulerNode
from bot.render.blocks import Block, Message, button, confirm_dialog
from bot.render.blocks import error as error_message
from bot.render.picks import ASK_PICK_ACTION, pick_value
from bot.render.validation import TestOffer
from bot.slack_message import SlackMessage
from bot.triage.checks import CHECKS, CHECKS_BY_NAME, DRIFT_OF
from bot.triage.kinds import words
from bot.triage.repeats import Offender
from bot.triage.service import (
    FaultGroup,
    FaultsReport,
    FleetGlance,
    FleetSummary,
    NodeReport,
    StateGlance,
    UncheckedNode,
    UncheckedNodes,
    UserError,
    UserJobs,
)
from bot.triage.targets import MAX_WINDOW_S, compress
from bot.triage.verdict import fault_level
from bot.triage.vocabulary import FAMILIES
from bot.triage.window import DataReach, in_the_last, span
from bot.words import count, number, plural, when

DRAIN_ACTION = "meowbot_drain_node"
RESUME_ACTION = "meowbot_resume_node"
RESUME_ANYWAY_ACTION = "meowbot_resume_node_anyway"
DASHBOARD_ACTION = "meowbot_open_dashboard"  # a link: Slack still sends the click
MAX_FAULT_LINES = 15
MAX_GROUP_LINES = 20
MAX_OFFENDER_LINES = 20
REPEAT_EMOJI = ":repeat:"

ICON = {
    VerdictLevel.HEALTHY: ":large_green_circle:",
    VerdictLevel.DEGRADED: ":large_yellow_circle:",
    VerdictLevel.DRAIN: ":red_circle:",
    VerdictLevel.RMA: ":black_circle:",
}
ADVICE = {
    VerdictLevel.HEALTHY: "fit to run work",
    VerdictLevel.DEGRADED: "runs work; watch it",
    VerdictLevel.DRAIN: "take it out of scheduling",
    VerdictLevel.RMA: "take it out of scheduling and open an RMA",
}


def _tag(f: Fault) -> str:
    """`(warning; advice: drain)`: how urgent, and what meowbot advises for the node, the same
    in /node-health and /hw-faults (a pending row remap once read as a plain warning in one and
    a drain in the other). Named advice: a bare "drain" read as the node's state."""
    return f"({f.severity.value}; advice: {fault_level(f).value})"


def node_state(report: NodeReport) -> str:
    """`in service` / `out of service`: what the scheduler says of the node, apart from the
    advice; `not known` without a scheduler's answer."""
    s = report.scheduler
    if s is None:
        return "not known"
    return "out of service" if s.out_of_service else "in service"


def _jobs(jobs: Sequence[Job]) -> str:
    """`running job 4100123 (llm-pretrain, alice)`: whose work "allocated" is."""
    if not jobs:
        return ""
    named = ", ".join(f"{code(j.job_id)} ({escape(j.name)}, {escape(j.user)})" for j in jobs[:3])
    more = f" and {count(len(jobs) - 3, 'other')}" if len(jobs) > 3 else ""
    return f"; running job{'s' if len(jobs) > 1 else ''} {named}{more}"


_READABLE: dict[str, Callable[[float], str]] = {
    # The reboot check's evidence is the boot time it moved to (epoch seconds): when it was.
    NODE_BOOT_TIME_SECONDS: lambda v: f"booted {when(datetime.fromtimestamp(v, UTC))}",
}


def kind_label(kind: FaultKind) -> str:
    """`*software thermal slowdown* (`throttle_sw_thermal`)`: the words a person reads, bold,
    and beside them the code that filters, configs and alerts use."""
    return f"*{escape(words(kind))}* ({code(kind.value)})"


def _fault_line(f: Fault) -> str:
    where = f"{code(f.node)}" + (f" GPU {f.gpu}" if f.gpu is not None else "")
    return f"{where}: {escape(f.summary)}"


def _evidence_line(f: Fault) -> str:
    parts = []
    for ev in f.evidence[:3]:
        labels = ",".join(
            f'{k}="{v}"'
            for k, v in sorted(ev.labels.items())
            if k in {"gpu", "device", "xid", "port", "release"}
        )
        note = f" ({escape(ev.note)})" if ev.note else ""
        readable = _READABLE.get(ev.series)
        if readable is not None and not labels:
            parts.append(escape(readable(ev.value)) + note)
            continue
        parts.append(
            f"{code(f'{ev.series}{{{labels}}} = {number(ev.value, separators=False)}')}{note}"
        )
    return " · ".join(parts)


def offender_line(o: Offender, now: datetime, *, node: bool = True) -> str:
    """`:repeat: `gpu-0042`: 3rd Xid 79 on GPU 3 in 30 days: 02 Nov, 19 Nov, today (rma)`."""
    where = f"{code(o.node)}: " if node else ""
    return f"{REPEAT_EMOJI} {where}{escape(o.line(now))} ({o.escalate_to.value})"


def _not_run(not_run: dict[str, list[str]]) -> str | None:
    if not not_run:
        return None
    # The check in words, its name beside it: the name is what `health.disabled` takes.
    names = "; ".join(
        f"{escape(CHECKS_BY_NAME[n].description) if n in CHECKS_BY_NAME else escape(n)} ({code(n)})"
        for n in sorted(not_run)
    )
    return f":grey_question: Not checked, their metrics are absent: {names}."


DRIFT_KINDS = DRIFT_OF  # the drift kind of each version /node-health shows


def _versions(report: NodeReport) -> str:
    info = report.info
    assert info is not None
    drifted = {f.kind for f in report.faults}
    values = {
        "driver": info.driver_version,
        "kernel": info.kernel_version,
        "firmware": info.firmware_version,
    }
    return ", ".join(
        f"{name} {escape(value)}"
        + (" :warning: _differs from the fleet_" if DRIFT_KINDS[name] in drifted else "")
        for name, value in values.items()
    )


def checked_fine(report: NodeReport) -> list[str]:
    """The checks that ran on the node and found nothing, in words."""
    failed = {f.kind for f in report.faults}
    return [c.words for c in CHECKS if c.name not in report.not_run and not set(c.kinds) & failed]


def render_node(
    report: NodeReport,
    *,
    can_act: bool = True,
    dashboard_url: str | None = None,
    headings: bool = False,
    test: TestOffer | None = None,
) -> SlackMessage:
    """`headings`: what was measured, what is only suspected and what was checked and found
    fine, each under its own heading (the answer to a question in plain words).
    `test`: where nodes can be tested, the "Test and resume" offer; a node out
    of service then offers "Test and resume" beside Resume."""
    v = report.verdict
    # Out of scheduling already (drained or down): the answer offers Resume, and a reason is
    # Slurm's, not a proposal; else a node drained a minute ago still read "take it out".
    out = report.scheduler is not None and report.scheduler.out_of_service
    failing = v.level.rank >= VerdictLevel.DRAIN.rank
    advice = ADVICE[v.level]
    if out and failing:
        rma = v.level is VerdictLevel.RMA
        advice = "out of scheduling already" + ("; open an RMA" if rma else "")
    msg = Message(f"{report.node}: advice {v.level.value}")
    msg.header(f"{report.node} · advice: {v.level.value.upper()}")
    msg.section(
        f"{ICON[v.level]} state: {node_state(report)} · advice: *{v.level.value}*: {advice}."
    )
    if headings:
        msg.section(
            "*Confirmed*, measured now with its evidence:"
            if report.faults
            else "*Confirmed*: no fault measured."
        )
    if report.faults:
        lines = []
        for f in report.faults[:MAX_FAULT_LINES]:
            mark = f" {REPEAT_EMOJI}" if f.repeat else ""
            lines.append(
                f"{kind_label(f.kind)}{mark} {_tag(f)} {_fault_line(f)}\n      {_evidence_line(f)}"
            )
        msg.lines(lines, max_items=MAX_FAULT_LINES, more_hint="see /hw-faults")
    if report.offenders:
        # The history beside the faults: why the verdict is worse than today's fault alone.
        msg.section(
            ("*Suspected* from its history, a repeat offender:\n" if headings else "")
            + "*Repeat offender*\n"
            + "\n".join(offender_line(o, report.at, node=False) for o in report.offenders[:5])
        )
    if headings:
        fine = checked_fine(report)
        if fine:
            msg.section("*Checked and fine*: " + escape(", ".join(fine)) + ".")
    missing = _not_run(report.not_run)
    if missing:
        msg.context(missing)
    fields: list[tuple[str, str]] = []
    if report.scheduler is not None:
        s = report.scheduler
        state = s.state + ("+" + "+".join(s.flags) if s.flags else "")
        reason = f" — {escape(s.reason)}" if s.reason else ""
        fields.append((report.scheduler_name, f"{escape(state)}{reason}{_jobs(report.jobs)}"))
    elif report.scheduler_note:
        fields.append((report.scheduler_name, escape(report.scheduler_note)))
    info = report.info
    if info is not None:
        fields.append(
            (
                "Topology",
                f"rack {escape(info.rack)}, leaf {escape(info.leaf_switch)}, spine {escape(info.spine)}",
            )
        )
        fields.append(
            (
                "Versions",
                f"driver {escape(info.driver_version)}, kernel {escape(info.kernel_version)}, firmware {escape(info.firmware_version)}",
            )
        )
        gpus = " ".join(f"{g.index}:numa{g.numa_node}/{g.nic}" for g in info.gpus)
        fields.append(
            (
                "GPUs",
                f"{len(info.gpus)} of {info.expected_gpus} — {code(gpus) if gpus else 'none'}",
            )
        )
    if v.drain_reason and not out:
        # Beside "Slurm idle", a bare "Drain reason" read as if the node were drained.
        fields.append(("Proposed drain reason", code(v.drain_reason)))
    if fields:
        msg.fields([(label, value) for label, value in fields])
    buttons = []
    if can_act and out:
        buttons.append(resume_button(report.node, still_failing=failing))
        if test is not None:
            buttons.append(test.button(report.node))
    elif can_act and failing:
        buttons.append(drain_button(report.node, v.drain_reason or ""))
    if dashboard_url:
        url = dashboard_url.replace("{node}", report.node)
        buttons.append(button("Open dashboard", DASHBOARD_ACTION, url=url))
    if buttons:
        msg.actions(*buttons)
    msg.context(f"Checked {when(report.at)}, counters {in_the_last(report.window_s)}")
    return msg.build()


# The cause a drain by hand carries where no check proposed one (no metrics source).
BY_HAND = "by hand, health not checked"
NOT_CHECKED = "health not checked"
MAX_NODE_JOBS = 5


def _state(s: SchedulerNode) -> str:
    return s.state + ("+" + "+".join(s.flags) if s.flags else "")


def render_unchecked(
    report: UncheckedNode, *, can_act: bool = True, test: TestOffer | None = None
) -> SlackMessage:
    """A node the scheduler lists, on a cluster without a metrics source: its state, its jobs
    and its place as the scheduler and the config say them, and "health not checked" with
    why, never a verdict. Drain and Resume act on the scheduler's own state."""
    msg = Message(f"{report.node}: {NOT_CHECKED}")
    msg.header(f"{report.node}: {NOT_CHECKED.upper()}")
    msg.section(f":grey_question: *{NOT_CHECKED}*: {escape(report.why)}.")
    fields: list[tuple[str, str]] = []
    s = report.scheduler
    if s is not None:
        reason = f" — {escape(s.reason)}" if s.reason else ""
        fields.append((report.scheduler_name, f"{escape(_state(s))}{reason}"))
    elif report.scheduler_note:
        fields.append((report.scheduler_name, escape(report.scheduler_note)))
    if report.jobs:
        shown = [
            f"{code(j.job_id)} {escape(j.name)} ({escape(j.user)}, {j.state.value})"
            for j in report.jobs[:MAX_NODE_JOBS]
        ]
        more = len(report.jobs) - MAX_NODE_JOBS
        fields.append(("Jobs", "\n".join(shown) + (f"\n…and {more} more" if more > 0 else "")))
    elif s is not None:
        fields.append(("Jobs", "none"))
    place = report.place
    if place is not None and (place.rack or place.leaf_switch):
        fields.append(
            ("Place", f"rack {escape(place.rack or '?')}, leaf {escape(place.leaf_switch or '?')}")
        )
    if fields:
        msg.fields(fields)
    for off in report.offenders:
        level = off.escalate_to
        msg.section(
            f"{ICON[level]} *Repeat offender* (meowbot's record): {escape(off.line(report.at))}: "
            f"{ADVICE[level]}."
        )
    if can_act and s is not None:
        if s.out_of_service:
            tests = [] if test is None else [test.button(report.node)]
            msg.actions(resume_button(report.node, still_failing=False), *tests)
        else:
            msg.actions(drain_button(report.node, f"{drain_reason.PREFIX} {BY_HAND}"))
    msg.context(f"Read from {report.scheduler_name} {report.at:%Y-%m-%d %H:%M} UTC")
    return msg.build()


def render_unchecked_nodes(r: UncheckedNodes) -> SlackMessage:
    """A hostlist on a cluster without a metrics source: its nodes by scheduler state."""
    by_state: dict[str, list[str]] = {}
    for name, s in sorted(r.states.items()):
        by_state.setdefault(_state(s), []).append(name)
    summary = ", ".join(f"{escape(st)} {len(ns)}" for st, ns in by_state.items()) or "none listed"
    msg = Message(f"{count(r.asked, 'node')}: {NOT_CHECKED}; {r.scheduler_name}: {summary}")
    msg.header(count(r.asked, "node"))
    msg.section(f":grey_question: *{NOT_CHECKED}*: {escape(r.why)}.")
    msg.lines(
        [f"*{escape(st)}* ({len(ns)}): {code(compress(ns))}" for st, ns in by_state.items()],
        max_items=MAX_GROUP_LINES,
        more_hint="narrow the hostlist",
    )
    if r.unknown:
        msg.context(f"Unknown to {r.scheduler_name}, left out: {escape(compress(r.unknown))}")
    msg.context(f"Read from {r.scheduler_name} {r.at:%Y-%m-%d %H:%M} UTC")
    return msg.build()


def drain_button(node: str, reason: str, label: str = "Drain node") -> Block:
    """Drain with an "are you sure?", as the alerts' Drain: one stray click takes a node out
    of scheduling. The value carries the reason the dialog names."""
    shown = f" with reason {code(reason)}" if reason else ""
    return button(
        label,
        DRAIN_ACTION,
        f"{node}|{reason}",
        style="danger",
        confirm=confirm_dialog(
            f"Drain {node}?",
            f"This takes {code(node)} out of scheduling{shown}: its running jobs finish, "
            "no new ones start.",
            confirm="Drain",
            style="danger",
        ),
    )


def resume_button(node: str, *, still_failing: bool) -> Block:
    """Resume; confirmed first while the node still fails its checks, since a resume then
    puts work back on a node that would break it."""
    dialog = None
    if still_failing:
        dialog = confirm_dialog(
            f"Resume {node}?",
            f"{code(node)} still fails its checks. Resuming puts it back into scheduling now.",
            confirm="Resume",
            style="danger",
        )
    return button("Resume node", RESUME_ACTION, node, style="primary", confirm=dialog)


def render_summary(s: FleetSummary) -> SlackMessage:
    counts = ", ".join(f"{ICON[lv]} {lv.value} {n}" for lv, n in s.counts.items())
    msg = Message(f"{count(s.asked, 'node')}: {counts}")
    msg.header(count(s.asked, "node"))
    msg.section(counts)
    unhealthy = [v for v in s.verdicts if v.level is not VerdictLevel.HEALTHY]
    if unhealthy:
        msg.lines(
            [
                f"{ICON[v.level]} {code(v.node)} *{v.level.value}*: {escape('; '.join(v.reasons[:2]))}"
                for v in unhealthy
            ],
            max_items=MAX_GROUP_LINES,
            more_hint="narrow the hostlist to see them",
        )
    else:
        msg.section("Every node checked is healthy.")
    if s.unknown:
        msg.context(f"Unknown, left out: {escape(compress(s.unknown))}")
    missing = _not_run(s.not_run)
    if missing:
        msg.context(missing)
    msg.context(f"Checked {s.at:%Y-%m-%d %H:%M} UTC, counters {in_the_last(s.window_s)}")
    return msg.build()


def _group_line(g: FaultGroup) -> str:
    worst = max(g.faults, key=lambda f: (fault_level(f).rank, f.severity.rank))
    if g.leaf_switch is not None:
        return (
            f":rotating_light: *suspected {escape(g.leaf_switch)} fault*: "
            f"{escape(words(g.kind))} ({code(g.kind.value)}) {_tag(worst)} on "
            f"{count(len(g.nodes), 'node')} at once ({code(compress(g.nodes))})"
        )
    mark = f" {REPEAT_EMOJI}" if worst.repeat else ""
    return f"{kind_label(g.kind)}{mark} {_tag(worst)} {_fault_line(worst)}"


def render_repeats(r: FaultsReport) -> SlackMessage:
    """`/hw-faults repeat`: the GPUs and nodes whose faults came back, with their history."""
    n = len(r.offenders)
    msg = Message(f"{count(n, 'repeat offender')} on {r.scope}")
    msg.header(f"Repeat offenders: {r.scope}")
    reach = r.history
    if not r.offenders and reach is not None and reach.short(r.at):
        # Minutes after start an empty history is no finding: say how little it has seen.
        seen = (
            f"since {when(reach.since, r.at)}"
            if reach.since is not None
            else "nothing yet (it records what the sweep and /node-health see from now on)"
        )
        msg.section(
            f":grey_question: No repeat offender in the fault history, which holds {seen}: "
            f"too short to tell, as a repeat is counted over {reach.rule_days:g} days."
        )
    elif not r.offenders:
        msg.section(":white_check_mark: No GPU or node has had the same fault again and again.")
    else:
        nodes = sorted({o.node for o in r.offenders})
        msg.section(
            f"*{count(n, 'repeat offender')}* on {count(len(nodes), 'node')} "
            f"({code(compress(nodes))}), worst first."
        )
        msg.lines(
            [offender_line(o, r.at) for o in r.offenders],
            max_items=MAX_OFFENDER_LINES,
            more_hint="narrow by node or kind",
        )
    kept = (
        f"history since {when(reach.since, r.at)}, kept {reach.keep_days:g} days"
        if reach is not None and reach.since is not None
        else "no history recorded yet"
        if reach is not None
        else "history not kept"
    )
    msg.context(
        f"Counted {when(r.at)} from the fault history meowbot keeps ({kept}): "
        "a fault seen again after a quiet hour is a new occurrence; `health.repeat` sets what "
        "makes an offender."
    )
    return msg.build()


def reach_note(reach: DataReach, asked_s: float) -> str:
    """`Prometheus holds data since 2026-12-06 04:10 UTC (asked: 7 days)`: said only where the
    metrics begin after the window's start, so that none found is not read as none there."""
    source = escape(reach.source[:1].upper() + reach.source[1:])
    return f":warning: {source} holds data since {when(reach.since)} (asked: {span(asked_s)})."


def render_faults(r: FaultsReport) -> SlackMessage:
    if r.repeat_only:
        return render_repeats(r)
    total = sum(r.counts.values())
    window = span(r.window_s)
    msg = Message(f"{count(total, 'hardware fault')} on {r.scope} in the last {window}")
    msg.header(f"Hardware faults: {r.scope}, last {window}")
    if not r.groups:
        msg.section(":white_check_mark: No faults found.")
    else:
        counts = ", ".join(f"{escape(words(k))} {n:,}" for k, n in r.counts.items())
        msg.section(
            f"*{count(total, 'fault')}* in *{count(len(r.groups), 'group')}*, worst first. "
            f"By kind: {counts}"
        )
        msg.lines(
            [_group_line(g) for g in r.groups],
            max_items=MAX_GROUP_LINES,
            more_hint="narrow by node or kind",
        )
    if r.offenders:
        msg.lines(
            [offender_line(o, r.at) for o in r.offenders[:5]],
            max_items=5,
            more_hint="see `/hw-faults repeat`",
        )
    if r.repeat_gpus:
        several = ", ".join(
            f"{code(n)} GPU {g} ({count(c, 'fault')})" for n, g, c in r.repeat_gpus[:10]
        )
        msg.context(f"Several faults on one GPU in the window: {several}")
    missing = _not_run(r.not_run)
    if missing:
        msg.context(missing)
    msg.context(f"Checked {r.at:%Y-%m-%d %H:%M} UTC, counters {in_the_last(r.window_s)}")
    if r.reach is not None:
        msg.context(reach_note(r.reach, r.window_s))
    if r.window_s != r.verdict_window_s:
        # Else a node listed here and healthy in /node-health reads as a contradiction.
        msg.context(
            f"A node's verdict (/node-health, App Home, alerts) reads its counters "
            f"{in_the_last(r.verdict_window_s)}: a fault of this list may be over by now."
        )
    return msg.build()


def faults_help_lines() -> list[str]:
    """What `/hw-faults help` adds to the usage: every option, every kind it can list (in words
    and by code) and the words that stand for a family of kinds."""
    kinds = [k for k in FaultKind if any(k in c.kinds for c in CHECKS)]
    families: dict[frozenset[FaultKind], list[str]] = {}
    for alias, codes in FAMILIES.items():
        families.setdefault(frozenset(FaultKind(c) for c in codes), []).append(alias)
    family_lines = [
        " / ".join(code(a) for a in aliases)
        + ": "
        + ", ".join(escape(words(k)) for k in FaultKind if k in members)
        for members, aliases in families.items()
    ]
    return [
        "*Options*: `--since 6h` (also `-s 6h`): the window, `1m` to "
        f"`{MAX_WINDOW_S // 86400}d` (default 24 h); a node (`gpu-0042`) or a Slurm hostlist "
        "(`gpu-[0001-0064]`) for those nodes only; a kind or a word below for those kinds "
        "only. They combine: `/hw-faults gpu-[0001-0064] nvlink --since 6h`.",
        "*Repeat offenders*: `/hw-faults repeat` (with a node, hostlist or kind too) lists the "
        "GPUs and nodes whose fault came back again and again: by default the same Xid 79, 48, "
        "63, 64, 74, 92, 94, 95 or 140, double-bit ECC error, row-remap failure or lost GPU 3 "
        "times on one GPU in 30 days makes an RMA; 3 unexpected reboots or IB link losses of a "
        "node in 30 days, a drain (`health.repeat` in the config).",
        "*Kinds*: " + "; ".join(f"{code(k.value)} {escape(words(k))}" for k in kinds),
        "*Words that stand for kinds*:\n" + "\n".join(family_lines),
        "Every command and plain words take the same words, in any case, plural or with `-` "
        "for `_` (`reboots`, `Unexpected-Reboot`); a node as `gpu-0042`, `GPU-0042`, `gpu42`, "
        "quoted, or a list `gpu-0042, gpu-0043`.",
    ]


def render_user_error(e: UserError) -> SlackMessage:
    """The sentence; a suggestion in it ("Did you mean `gpu-0042`?") is a button that runs
    the command with it."""
    if not e.retries:
        return error_message(e.sentence)
    msg = Message(e.sentence).section(f":warning: {escape(e.sentence)}")
    msg.actions(
        *(
            button(label[:70], ASK_PICK_ACTION, pick_value(command, text))
            for label, command, text in e.retries
        )
    )
    return msg.build()


def glance_lines(g: FleetGlance | StateGlance | UserError) -> list[str]:
    """Lines for the App Home tab: nodes per verdict, faults by kind in the last 24 h."""
    if isinstance(g, UserError):
        return [f":warning: {escape(g.sentence)}"]
    if isinstance(g, StateGlance):
        states = ", ".join(f"{escape(st)} {n:,}" for st, n in g.per_state.items()) or "none"
        return [
            f"*{g.nodes:,}* {plural(g.nodes, 'node')} in {escape(g.scheduler_name)}: {states}",
            f":grey_question: Health not checked: {escape(g.why)}.",
        ]
    verdicts = ", ".join(f"{ICON[lv]} {lv.value} {n}" for lv, n in g.per_verdict.items())
    kinds = (
        ", ".join(f"{escape(words(k))} {n:,}" for k, n in list(g.per_kind.items())[:12]) or "none"
    )
    lines = [
        f"*{g.nodes:,}* {plural(g.nodes, 'node')}: {verdicts} (as /node-health judges them, counters "
        f"{in_the_last(g.verdict_window_s)})",
        f"Faults {in_the_last(g.window_s)} by kind: {kinds}",
    ]
    if g.offenders:
        nodes = sorted({o.node for o in g.offenders})
        lines.append(
            f"{REPEAT_EMOJI} *{count(len(g.offenders), 'repeat offender')}* on "
            f"{count(len(nodes), 'node')} ({code(compress(nodes))}): `/hw-faults repeat`"
        )
    missing = _not_run(g.not_run)
    if missing:
        lines.append(missing)
    return lines


MAX_HOME_JOBS = 10


def jobs_lines(u: UserJobs) -> list[str]:
    """The viewer's pending and running jobs, for the App Home tab."""
    if u.note:
        return [f"Your jobs: {escape(u.note)}"]
    if not u.jobs:
        return [f"No running jobs of `{escape(u.user or '')}`."]
    lines = [
        f"{code(j.job_id)} {escape(j.name)}: {j.state.value} on {count(len(j.nodes), 'node')} "
        f"({code(compress(list(j.nodes))) if j.nodes else 'none yet'}) since {j.start:%Y-%m-%d %H:%M} UTC"
        for j in u.jobs[:MAX_HOME_JOBS]
    ]
    if len(u.jobs) > MAX_HOME_JOBS:
        lines.append(f"…and {len(u.jobs) - MAX_HOME_JOBS} more.")
    return lines


def resume_anyway(sentence: str, node: str, action_id: str, value: str) -> SlackMessage:
    """A refused resume (someone else's reason) with the confirmed button that overrides it."""
    msg = Message(sentence).section(escape(sentence))
    msg.actions(
        button(
            f"Resume {node} anyway",
            action_id,
            value,
            style="danger",
            confirm=confirm_dialog(
                f"Resume {node}?",
                f"Someone else took {code(node)} out of service. Resuming puts it back into "
                "scheduling now.",
                confirm="Resume",
                style="danger",
            ),
        )
    )
    return msg.build()
