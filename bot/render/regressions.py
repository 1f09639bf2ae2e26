"""Block Kit for /regressions: which rollout slowed training, by how much, what it costs.

The answer in the channel says each rollout in one sentence, regressions worst first, then
improvements, then the rollouts with no effect the data can show, then the ones too few jobs
crossed. A finding that cannot be told apart from another change says so in its sentence;
one that rests on few jobs says that too. The thread gets each finding's detail: its rollout,
its jobs and their effects, and how the claim was made.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from bot.mrkdwn import code, escape
from bot.regressions.models import Finding, RegressionReport, Rollout, Verdict
from bot.render.blocks import Message
from bot.slack_message import SlackMessage
from bot.triage.targets import compress
from bot.words import count, number

THIN_JOBS = 10
"""Fewer crossing jobs than this: the interval rests on little, and the answer says so."""
MAX_PER_VERDICT = 8
MAX_JOB_LINES = 12
TOO_SMALL_COST = 0.05  # GPU-days a week: below it the cost is not worth a clause

ICONS = {
    Verdict.REGRESSION: ":small_red_triangle:",
    Verdict.IMPROVEMENT: ":small_green_triangle_down:",
    Verdict.NO_EFFECT: ":white_circle:",
    Verdict.TOO_FEW: ":grey_question:",
}
CONFOUNDED_ICON = ":twisted_rightwards_arrows:"


def window_words(window: timedelta) -> str:
    """`the last 7 days`, `the last 36 hours`."""
    hours = round(window.total_seconds() / 3600)
    if hours % 24 == 0:
        return f"the last {count(hours // 24, 'day')}"
    return f"the last {count(hours, 'hour')}"


def when(at: datetime) -> str:
    """`Tue 1 Dec 03:10 UTC`: the weekday people say, the date that makes it unambiguous."""
    return f"{at:%a} {at.day} {at:%b %H:%M} UTC"


def digits(f: Finding) -> int:
    """One decimal, as people say "2.1 %"; two when one would print a claimed effect or its
    interval as 0.0 (a noiseless fleet can claim 0.01 %, and "0.0-0.0 %" reads as a bug)."""
    fine = abs(f.effect_pct) < 0.1 or abs(f.high_pct - f.low_pct) < 0.2
    return 2 if fine else 1


def _pct(x: float, n: int) -> str:
    return f"{abs(x):.{n}f}"


def _signed(x: float) -> str:
    return f"{x:+.2f}" if abs(x) < 0.1 else f"{x:+.1f}"


def interval(f: Finding) -> str:
    """`95 % interval 1.7-2.5 %` on the side the effect lies, signed when it holds zero."""
    low, high, n = f.low_pct, f.high_pct, digits(f)
    if f.verdict is Verdict.IMPROVEMENT and high < 0:
        return f"95 % interval {_pct(high, n)}-{_pct(low, n)} %"
    if low > 0:
        return f"95 % interval {_pct(low, n)}-{_pct(high, n)} %"
    return f"95 % interval {low:+.{n}f} to {high:+.{n}f} %"


def change(f: Finding) -> str:
    """`steps 2.1 % slower`."""
    n = digits(f)
    if round(f.effect_pct, n) == 0:
        return "steps the same pace"
    return f"steps {_pct(f.effect_pct, n)} % {'slower' if f.effect_pct > 0 else 'faster'}"


def versions(r: Rollout) -> str:
    """kernel `5.15.0-113-generic` against `5.15.0-105-generic`."""
    return f"{escape(r.component)} {code(r.new)} against {code(r.old)}"


def cost(f: Finding) -> str:
    days = abs(f.gpu_days_per_week)
    if days < TOO_SMALL_COST or f.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        return ""
    verb = "about" if f.verdict is Verdict.REGRESSION else "saves about"
    return f"; {verb} {number(round(days, 1))} GPU-days a week at today's load"


def evidence(f: Finding) -> str:
    """`37 jobs on 1,912 nodes since the rollout began Tue 1 Dec 03:10 UTC`."""
    return (
        f"{count(f.jobs, 'job')} on {count(f.nodes, 'node')} since the rollout began "
        f"{when(f.rollout.start)}"
    )


def caveats(f: Finding) -> list[str]:
    """What limits the claim, in words: what it is confounded with, how little it rests on."""
    out = []
    if f.confounded_with:
        others = ", ".join(escape(c) for c in f.confounded_with)
        out.append(
            f"{CONFOUNDED_ICON} *confounded*: the jobs that crossed it also moved to {others} "
            f"at about the same time ({number(f.clean_jobs)} of {number(f.jobs)} changed "
            "nothing else), so which change did it cannot be told from this data"
        )
    if f.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.NO_EFFECT):
        # The estimate rests on the jobs the finder took as evidence (those that changed
        # nothing else, when there are enough), which may be fewer than crossed.
        evidence = len(f.job_effects) or f.jobs
        if f.jobs < THIN_JOBS:
            out.append(f"thin evidence: {count(f.jobs, 'job')} crossed it")
        elif evidence < THIN_JOBS:
            out.append(
                f"thin evidence: the estimate rests on the {count(evidence, 'job')} "
                "that changed nothing else"
            )
        elif f.clean_jobs == 0 and not f.confounded_with:
            out.append("no crossing job was free of other changes: read it with care")
    return out


def same_work_line(f: Finding) -> str:
    """`per-node compute time, same job same steps: new-cohort nodes 2.0 % slower (95 %
    1.6-2.4 %), 14 jobs`, and whether it agrees with the pace; empty without that evidence."""
    sw = f.same_work
    if sw is None:
        return ""
    n = 2 if abs(sw.effect_pct) < 0.1 or abs(sw.high_pct - sw.low_pct) < 0.2 else 1
    if round(sw.effect_pct, n) == 0:
        moved = "new-cohort nodes compute at the old ones' pace"
    else:
        moved = (
            f"new-cohort nodes {_pct(sw.effect_pct, n)} % "
            f"{'slower' if sw.effect_pct > 0 else 'faster'}"
        )
    if sw.low_pct > 0 or sw.high_pct < 0:
        low, high = sorted((abs(sw.low_pct), abs(sw.high_pct)))
        span = f"95 % {low:.{n}f}-{high:.{n}f} %"
    else:
        span = f"95 % {sw.low_pct:+.{n}f} to {sw.high_pct:+.{n}f} %"
    line = f"per-node compute time, same job same steps: {moved} ({span}), {count(sw.jobs, 'job')}"
    if sw.verdict is Verdict.TOO_FEW:
        line += ", too few to weigh"
    elif f.verdict is not Verdict.TOO_FEW:
        line += (
            ", in line with the pace"
            if sw.agrees
            else ": :warning: *disagrees with the pace*, read both with care"
        )
    return line


def sentence(f: Finding) -> str:
    """One finding as the channel reads it (mrkdwn)."""
    head = f"{ICONS[f.verdict]} {versions(f.rollout)}"
    if f.verdict is Verdict.TOO_FEW:
        line = (
            f"{head}: {count(f.jobs, 'job')} crossed it, too few to say anything "
            f"({count(len(f.rollout.nodes), 'node')} since {when(f.rollout.start)}; a longer "
            "`--since` may gather more)"
        )
    elif f.verdict is Verdict.NO_EFFECT:
        line = f"{head}: no effect this data can show ({change(f)}, {interval(f)}), {evidence(f)}"
    else:
        line = f"{head}: {change(f)} ({interval(f)}), {evidence(f)}{cost(f)}"
    if by_node := same_work_line(f):
        line += "\n      " + by_node
    notes = caveats(f)
    return line + ("\n      " + "; ".join(notes) if notes else "")


def summary(report: RegressionReport, window: timedelta) -> str:
    by = _by_verdict(report.findings)
    what = escape(report.component) if report.component else "software"
    read = (
        f"from {count(report.jobs_read, 'job')} on {count(report.nodes_read, 'node')}, "
        f"{when(report.start)} to {when(report.end)}"
    )
    if not report.findings:
        return f"No {what} rollout in {window_words(window)}: nothing changed to compare ({read})."
    parts = []
    if by[Verdict.REGRESSION]:
        parts.append(count(len(by[Verdict.REGRESSION]), "regression"))
    if by[Verdict.IMPROVEMENT]:
        parts.append(count(len(by[Verdict.IMPROVEMENT]), "improvement"))
    if by[Verdict.NO_EFFECT]:
        parts.append(f"{count(len(by[Verdict.NO_EFFECT]), 'rollout')} with no effect seen")
    if by[Verdict.TOO_FEW]:
        parts.append(f"{len(by[Verdict.TOO_FEW])} too thin to judge")
    line = ", ".join(parts) + f" ({read})."
    if not by[Verdict.REGRESSION] and not by[Verdict.IMPROVEMENT]:
        line = (
            f"No {what} rollout in {window_words(window)} moved step time beyond the jobs' own "
            f"noise: {line}"
        )
    return line


def render_progress(what: str, window: timedelta, step: str = "") -> SlackMessage:
    """The message the answer is edited into: what it is looking at, and how far it got."""
    text = f"Looking at {what} rollouts over {window_words(window)}…"
    msg = Message(text).section(f":hourglass_flowing_sand: {escape(text)}")
    if step:
        msg.context(escape(step))
    return msg.build()


def render_answer(report: RegressionReport, window: timedelta) -> SlackMessage:
    by = _by_verdict(report.findings)
    worst = next(iter(by[Verdict.REGRESSION]), None)
    fallback = (
        f"{worst.rollout.component} {worst.rollout.new}: {change(worst)}"
        if worst
        else "Rollouts and training pace: no regression found"
    )
    what = report.component or "Software"
    msg = Message(fallback)
    msg.header(f"{what.capitalize()} rollouts and training pace, {window_words(window)}")
    msg.section(summary(report, window))
    titles = {
        Verdict.REGRESSION: "*Regressions*, worst first",
        Verdict.IMPROVEMENT: "*Improvements*",
        Verdict.NO_EFFECT: "*Rollouts with no effect seen*",
        Verdict.TOO_FEW: "*Too few jobs to judge*",
    }
    for verdict in Verdict:
        found = by[verdict]
        if not found:
            continue
        msg.section(titles[verdict])
        msg.lines(
            [sentence(f) for f in found],
            max_items=MAX_PER_VERDICT,
            more_hint="the thread lists every one",
            bullet="",
        )
    # A note about one rollout ("image v42: ...") is said in its sentence already; the
    # thread keeps every note.
    named = tuple(f"{f.rollout.component} {f.rollout.new}:" for f in report.findings)
    general = [n for n in report.notes if not n.startswith(named)]
    if general:
        msg.context(*(escape(n) for n in general[:5]))
    if report.findings:
        by_node = (
            "Per-node compute time compares, within each job that ran on both at once, its "
            "nodes on the new value with its nodes on the old at the same steps: nothing that "
            "moves the whole job moves it. "
            if any(f.same_work for f in report.findings)
            else ""
        )
        msg.context(
            "A change is claimed only when its 95 % interval (bootstrap over jobs) clears "
            "the spread the same jobs show at moments no rollout touched them. "
            f"{by_node}Detail and chart in the thread."
        )
    return msg.build()


def render_detail(report: RegressionReport) -> SlackMessage:
    """The thread: each finding's rollout, its jobs and how its claim was made."""
    msg = Message("Detail of each rollout")
    for f in ordered(report.findings):
        r = f.rollout
        msg.section(f"{ICONS[f.verdict]} {versions(r)}")
        msg.lines(_detail_lines(f), bullet="• ")
        if f.job_effects:
            worst = sorted(f.job_effects, key=lambda je: -je[1])[:MAX_JOB_LINES]
            rest = len(f.job_effects) - len(worst)
            msg.context(
                "Jobs, most slowed first: "
                + ", ".join(f"{code(job)} {_signed(effect)} %" for job, effect in worst)
                + (f" …and {rest} more" if rest else "")
                + f". `/job-slow {worst[0][0]}` shows its pace and nodes while it runs."
            )
        msg.divider()
    if not report.findings:
        msg.section("Nothing to detail: no rollout in the window.")
    for note in report.notes:
        msg.context(escape(note))
    return msg.build()


def _detail_lines(f: Finding) -> list[str]:
    r = f.rollout
    done = "still going" if r.coverage < 0.999 else "done"
    lines = [
        f"Rollout: {count(len(r.nodes), 'node')} from {when(r.start)} to {when(r.end)} "
        f"({number(round(r.per_hour, 1))} nodes an hour), {r.coverage:.0%} of the nodes that ran "
        f"{code(r.old)}, {done}",
        f"Nodes: {code(_hostlist(r.nodes))}",
    ]
    if f.verdict is not Verdict.TOO_FEW:
        lines.append(
            f"Effect {f.effect_pct:+.2f} % (95 % interval {f.low_pct:+.2f} to "
            f"{f.high_pct:+.2f} %), claimed only beyond "
            f"±{f.margin_pct:.2f} % (the spread of the same estimate at moments no rollout "
            "touched these jobs)"
        )
        lines.append(
            f"{count(f.jobs, 'job')} crossed it; {number(f.clean_jobs)} of them changed "
            "nothing else around their switch"
        )
    sw = f.same_work
    if sw is not None:
        lines.append(
            f"Per-node compute time, same job same steps: {sw.effect_pct:+.2f} % (95 % interval "
            f"{sw.low_pct:+.2f} to {sw.high_pct:+.2f} %), the new cohort's "
            f"{count(sw.nodes_new, 'node')} against the old cohort's {number(sw.nodes_old)} "
            f"in {count(sw.jobs, 'job')} that ran on both at once"
        )
    if f.confounded_with:
        lines.append("Changed at the same time: " + ", ".join(escape(c) for c in f.confounded_with))
    return lines


def _hostlist(nodes: Sequence[str]) -> str:
    try:
        return compress(list(nodes))
    except Exception:  # a name the hostlist grammar cannot fold: list the first few
        return ",".join(nodes[:20]) + (",…" if len(nodes) > 20 else "")


def ordered(findings: Sequence[Finding]) -> list[Finding]:
    """The findings in the answer's order: regressions worst first, improvements, no effect,
    too few (the chart and the thread follow it too)."""
    by = _by_verdict(findings)
    return [f for verdict in Verdict for f in by[verdict]]


def _by_verdict(findings: Sequence[Finding]) -> dict[Verdict, list[Finding]]:
    by: dict[Verdict, list[Finding]] = {v: [] for v in Verdict}
    for f in findings:
        by[f.verdict].append(f)
    # Worst first whatever order the finder gave: a claim on jobs that changed nothing else
    # before one that cannot be told apart from another change (it is often the same effect
    # counted twice), then the cost, then the size of the effect.
    by[Verdict.REGRESSION].sort(
        key=lambda f: (bool(f.confounded_with), -f.gpu_days_per_week, -f.effect_pct)
    )
    by[Verdict.IMPROVEMENT].sort(
        key=lambda f: (bool(f.confounded_with), -abs(f.gpu_days_per_week), f.effect_pct)
    )
    return by
