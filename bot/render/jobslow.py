"""Block Kit for /job-slow: the answer in the channel, the detail in its thread."""

from __future__ import annotations

from collections.abc import Sequence

from bot import drain_reason
from bot.models import Job
from bot.mrkdwn import code, escape
from bot.render.blocks import Message, button
from bot.render.triage import drain_button, kind_label
from bot.slack_message import SlackMessage
from bot.triage.checks import CHECKS
from bot.triage.jobs import SlowJobReport
from bot.triage.kinds import words
from bot.triage.service import UserJobs
from bot.triage.stragglers import PROXIES_MODE, Diagnosis, Straggler
from bot.triage.targets import compress
from bot.words import when

PICK_ACTION = "meowbot_job_slow_pick"
MAX_STRAGGLER_LINES = 10
MAX_DRAIN_BUTTONS = 3
MAX_PICK_BUTTONS = 10


def _nodes(n: int) -> str:
    return f"{n:,} node" + ("" if n == 1 else "s")


def render_progress(job: Job) -> SlackMessage:
    msg = Message(f"Looking at job {job.job_id} on {_nodes(len(job.nodes))}…")
    msg.section(
        f":hourglass_flowing_sand: Looking at {code(job.job_id)} {escape(job.name)} on "
        f"{_nodes(len(job.nodes))}…"
    )
    return msg.build()


def pace_line(d: Diagnosis) -> str:
    """ "step time 1.38 s, 24 h earlier 1.27 s: 8.7% slower since 03:10"."""
    c = d.comparison
    if c is None:
        if not d.has_steps:
            return (
                "The job exports no step time: judged from its nodes' SM clock, GPU "
                "utilisation, power, NVLink and InfiniBand traffic."
            )
        return f"step time {d.step_s:.2f} s; no baseline (younger than a day, no previous run)."
    change = c.change
    if abs(change) <= 0.005:
        trend = "the same pace"
    else:
        trend = f"{abs(change):.1%} {'slower' if change > 0 else 'faster'}"
    since = f" since {when(c.since)}" if c.since is not None and change > 0 else ""
    return f"step time {c.now_s:.2f} s, {c.baseline} {c.before_s:.2f} s: {trend}{since}"


def _measure(s: Straggler, d: Diagnosis) -> str:
    """What shows the node lagging: its compute or step time, or its lagging proxy."""
    parts = []
    if d.mode != PROXIES_MODE and s.excess > 0:
        parts.append(
            f"{d.mode} {s.seconds:.3f} s against the job's {d.median_s:.3f} "
            f"({s.excess:+.1%}, {s.z:.0f} MADs)"
        )
    if s.wait_s is not None and d.wait_median_s is not None:
        parts.append(
            f"waits {s.wait_s:.3f} s in the collective where the job's median rank waits "
            f"{d.wait_median_s:.3f} s"
        )
    if s.lag is not None:
        parts.append(escape(s.lag.sentence()))
    elif d.mode == PROXIES_MODE:
        parts.append(f"{s.seconds:.2f}x slower")
    return "; ".join(parts)


def _straggler_line(s: Straggler, d: Diagnosis) -> str:
    if s.cause is not None:
        why = f"{kind_label(s.cause.kind)}: {escape(s.cause.evidence)}"
    else:
        why = "no fault found on the node"
    return f"{code(s.node)} {_measure(s, d)} — {why}"


# What /node-health judges a node by: its own hardware and versions against the fleet. A
# cause outside these (a clock, CPU pressure or NUMA misses lower than the job's other nodes')
# is a finding of the job only, and /node-health of the node will not show it.
HEALTH_KINDS = frozenset(k for c in CHECKS for k in c.kinds)


def _node_health_hint(stragglers: Sequence[Straggler]) -> str:
    shown = [s for s in stragglers if s.cause is not None and s.cause.kind in HEALTH_KINDS]
    others = [s for s in stragglers if s not in shown]
    parts = []
    if shown:
        parts.append(
            ", ".join(f"`/node-health {s.node}`" for s in shown)
            + " shows the same fault with the node's whole story."
        )
    if others:
        parts.append(
            ", ".join(code(s.node) for s in others)
            + (" lags" if len(others) == 1 else " lag")
            + " only against this job's other nodes: `/node-health` judges a node on its own "
            "faults and will not show it."
        )
    return " ".join(parts)


def verdict_line(d: Diagnosis) -> str:
    n = len(d.job.nodes)
    if d.stragglers:
        # Each node with its own cause: two stragglers rarely share one.
        names = ", ".join(
            f"{code(s.node)} ({escape(words(s.cause.kind)) if s.cause else 'no fault found'})"
            for s in d.stragglers[:3]
        )
        more = f" and {len(d.stragglers) - 3} more" if len(d.stragglers) > 3 else ""
        count = len(d.stragglers)
        holds = "holds" if count == 1 else "hold"
        nodes = "node" if count == 1 else "nodes"
        line = f"*{count} {nodes} of {n:,} {holds} the job back* — {names}{more}."
        if d.gpu_hours_per_day >= 0.5:
            them = "it" if count == 1 else "them"
            if not d.cost_is_bound:
                line += (
                    f" Draining {them} and restarting from the last checkpoint recovers about "
                    f"*{d.gpu_hours_per_day:,.0f} GPU-hours a day*."
                )
            else:
                # A proxy's shortfall bounds the step's: a link at 70 % is not a step 43 %
                # longer when the link is busy only part of the step.
                line += (
                    f" Draining {them} and restarting from the last checkpoint recovers up to "
                    f"*{d.gpu_hours_per_day:,.0f} GPU-hours a day* (judged from the lagging "
                    "proxy: the job exports no compute time to measure it)."
                )
        return line
    if d.job_cause is not None:
        return (
            f"*No node holds it back* ({escape(words(d.job_cause.kind))}): "
            f"{escape(d.job_cause.evidence)}."
        )
    if d.suspects:
        suspect = d.suspects[0]
        more = f" and {len(d.suspects) - 1} more" if len(d.suspects) > 1 else ""
        return (
            f"*No node measured lagging*; suspected: {code(suspect.node)} "
            f"{kind_label(suspect.cause.kind)} ({escape(suspect.cause.evidence)}){more}. "
            "Its ranks' compute times would confirm it; `/node-health` has the node's whole story."
        )
    if n == 1:
        return (
            f"*One node*: a job on one node has no peers in it to compare with; "
            f"`/node-health {d.job.nodes[0]}` has its health."
        )
    what = " and ".join(d.measured) if d.measured else "what they export"
    return f"*No straggler*: the {n:,} nodes keep the same pace in {what} (within ordinary jitter)."


def render_answer(r: SlowJobReport, *, can_act: bool = True) -> SlackMessage:
    d = r.diagnosis
    job = d.job
    msg = Message(f"Job {job.job_id}: {pace_line(d)}")
    msg.header(f"Job {job.job_id} on {_nodes(len(job.nodes))}")
    owner = f" — {escape(r.owner_note)}" if r.owner_note else ""
    msg.context(f"{escape(job.name)} ({escape(job.user)}){owner}")
    msg.section(escape(pace_line(d)))
    msg.section(verdict_line(d))
    buttons = []
    if can_act:
        for s in d.stragglers[:MAX_DRAIN_BUTTONS]:
            if s.node not in r.out_of_service:
                buttons.append(
                    drain_button(
                        s.node,
                        drain_reason.for_straggler(job.job_id, s.cause.kind if s.cause else None),
                        f"Drain {s.node}",
                    )
                )
    if buttons:
        msg.actions(*buttons)
    drained = [s.node for s in d.stragglers if s.node in r.out_of_service]
    if drained:
        one = len(drained) == 1
        msg.context(
            f"{', '.join(code(n) for n in drained)} {'is' if one else 'are'} out of scheduling "
            f"already: the job keeps this pace until it restarts without {'it' if one else 'them'}."
        )
    if d.stragglers:
        msg.context("Details in the thread. " + _node_health_hint(d.stragglers[:3]))
    if d.suspects:
        shown = d.suspects[:3]
        more = f" and {len(d.suspects) - 3} more" if len(d.suspects) > 3 else ""
        msg.context(
            "Suspected, not measured lagging: "
            + "; ".join(f"{code(x.node)} {escape(words(x.cause.kind))}" for x in shown)
            + more
        )
    if d.missing:
        what = d.mode if d.mode != PROXIES_MODE else "GPU or port metrics"
        msg.context(
            f"No {what} from {len(d.missing)} node(s) ({code(compress(d.missing))}): judged "
            "without them."
        )
    msg.context(f"Checked {r.at:%Y-%m-%d %H:%M} UTC")
    return msg.build()


def render_detail(r: SlowJobReport) -> SlackMessage:
    """The thread: every straggler with its evidence, and what was not checked."""
    d = r.diagnosis
    msg = Message(f"Detail of job {d.job.job_id}")
    if len(d.job.nodes) == 1:
        msg.section("*How I judged*: a job on one node has no other nodes to compare it with.")
        return msg.build()
    measured = ", ".join(d.measured) if d.measured else "no training metrics"
    shown = (
        f"{d.mode} over the job's median ({d.median_s:.3f} s)"
        if d.mode != PROXIES_MODE
        else "the lagging proxy under the job's median"
    )
    msg.section(
        f"*How I judged*: {measured} across {_nodes(len(d.job.nodes))}. A straggler sits more "
        "than the z-score threshold in MADs and more than ordinary jitter over the job's median "
        "compute (or step) time, or under its median in one hardware proxy; the step time of a "
        f"synchronous job only says how slow it is. Shown: {shown}."
    )
    if d.stragglers:
        lines = [_straggler_line(s, d) for s in d.stragglers]
        msg.lines(lines, max_items=MAX_STRAGGLER_LINES, more_hint="the chart marks them all")
    if d.job_cause is not None:
        msg.section(f"{kind_label(d.job_cause.kind)}: {escape(d.job_cause.evidence)}")
    if d.stall is not None and (d.job_cause is None or d.stragglers):
        msg.context(f"Also: {d.stall.minutes} stalls of every rank in the last 2 h.")
    if d.suspects:
        lines = [
            f"{code(x.node)} {kind_label(x.cause.kind)}: {escape(x.cause.evidence)} (no "
            "measurement shows it lagging)"
            for x in d.suspects
        ]
        msg.section("*Suspected*, not confirmed:")
        msg.lines(lines, max_items=MAX_STRAGGLER_LINES, more_hint="`/hw-faults` lists them all")
    if r.not_run:
        missing = sorted({mt for ms in r.not_run.values() for mt in ms})
        msg.context("Not checked (metric absent): " + ", ".join(code(x) for x in missing))
    return msg.build()


def render_error_in_place(job: Job, sentence: str) -> SlackMessage:
    msg = Message(f"Job {job.job_id}: {sentence}")
    msg.section(f":warning: {escape(sentence)}")
    return msg.build()


def render_pick(u: UserJobs) -> SlackMessage:
    """`/job-slow` alone: the caller's running jobs to pick from."""
    msg = Message("Which job?")
    if u.note:
        msg.section(f"Give a job id: `/job-slow 4100123`. ({escape(u.note)})")
        return msg.build()
    running = [j for j in u.jobs if j.nodes]
    if not running:
        msg.section(
            f"No running jobs of `{escape(u.user or '')}`. Give a job id: `/job-slow 4100123`."
        )
        return msg.build()
    msg.section(f"Running jobs of `{escape(u.user or '')}`: pick one, or `/job-slow <job-id>`.")
    for j in running[:MAX_PICK_BUTTONS]:
        msg.section(
            f"{code(j.job_id)} {escape(j.name)} on {_nodes(len(j.nodes))} since "
            f"{j.start:%Y-%m-%d %H:%M} UTC",
            accessory=button("Why slow?", PICK_ACTION, j.job_id),
        )
    if len(running) > MAX_PICK_BUTTONS:
        msg.context(f"…and {len(running) - MAX_PICK_BUTTONS} more.")
    return msg.build()
