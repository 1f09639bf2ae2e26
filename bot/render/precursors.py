"""Block Kit for /hw-faults why: what preceded the faults, and how sure that is.

The answer says the leading candidate in one sentence with its counts, threshold, lead time
and ordinary rate ("7 of 8 unexpected reboots followed network transmit (eth0) above 30.2 Gbps
within 6 min"), then what else stood out, then the candidates that showed no difference; where
the events are few it says the evidence is thin and claims nothing. The thread gets the alert
rule to paste, the nodes crossing now, every candidate's counts and how the claim was made.
"""

from __future__ import annotations

from datetime import datetime

from bot.models import FaultKind
from bot.mrkdwn import code, code_block, escape
from bot.precursors.ask import say_window
from bot.precursors.models import CONCURRENT, PrecursorReport, Ranked
from bot.precursors.rule import alert_rule, number, warn_level
from bot.render.blocks import Message
from bot.render.triage import reach_note
from bot.slack_message import SlackMessage
from bot.triage.kinds import words
from bot.words import count
from bot.words import number as big

MAX_OTHER_LINES = 6
MAX_NOW = 20


def kind_words(kind: str, n: int) -> str:
    """`unexpected reboots`, `Xids`, `InfiniBand link downs`."""
    said = {
        "unexpected_reboot": ("unexpected reboot", "unexpected reboots"),
        "xid": ("Xid", "Xids"),
        "ib_link_down": ("InfiniBand link down", "InfiniBand link downs"),
    }.get(kind)
    if said is None:
        # Any other kind as /hw-faults says it: "double-bit ECC error events".
        known = {k.value: k for k in FaultKind}
        name = words(known[kind]) if kind in known else kind
        said = (f"{name} event", f"{name} events")
    return said[0] if n == 1 else said[1]


def when(at: datetime) -> str:
    return f"{at:%a} {at.day} {at:%b %H:%M} UTC"


def minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def value(r: Ranked, v: float) -> str:
    unit = r.candidate.unit
    return f"{number(v)} {unit}" if unit else number(v)


def pct(x: float) -> str:
    if x == 0:
        return "0 %"
    if x < 0.001:
        return "<0.1 %"
    return f"{x * 100:.1f} %" if x < 0.1 else f"{x * 100:.0f} %"


def lead_words(r: Ranked) -> str:
    """`within 2-9 min (median 6)`."""
    if not r.leads_s:
        return ""
    lo, hi = r.leads_s[0], r.leads_s[-1]
    mid = r.leads_s[len(r.leads_s) // 2]
    if minutes(lo) == minutes(hi):
        return f"{minutes(hi)} before"
    return f"{minutes(lo)[:-4]}-{minutes(hi)} before (median {minutes(mid)})"


def finding(report: PrecursorReport, r: Ranked) -> str:
    """`7 of 8 unexpected reboots followed network transmit (eth0) above 30.2 Gbps, 2-9 min
    before (median 6 min); ordinary windows: 0.3 % of 2,304`."""
    assert r.threshold is not None
    other = [x for x in r.references if x.name != CONCURRENT]
    windows, crossed = sum(x.windows for x in other), sum(x.crossed for x in other)
    same = next((x for x in r.references if x.name == CONCURRENT), None)
    word = "above" if r.candidate.direction == "above" else "below"
    text = (
        f"*{r.preceded} of {r.events}* {kind_words(report.kind, r.events)} followed "
        f"*{escape(r.name)} {word} {value(r, r.threshold)}*, {lead_words(r)}; ordinary windows: "
        f"{pct(crossed / windows if windows else 0.0)} of {big(windows)}"
    )
    if same is not None:
        text += f", peers at the same moments: {pct(same.rate)} of {big(same.windows)}"
    return text


def honesty(r: Ranked) -> str:
    lo, hi = r.interval
    return (
        f"95 % interval of the share preceded {lo * 100:.0f}-{hi * 100:.0f} %; "
        f"p = {r.p_corrected:.2g} after correcting for every threshold of every candidate tried"
    )


def render_progress(kind: str, window_s: float, step: str = "") -> SlackMessage:
    text = f"Looking at what preceded the {kind_words(kind, 2)} of the last {say_window(window_s)}…"
    msg = Message(text).section(f":hourglass_flowing_sand: {escape(text)}")
    if step:
        msg.context(escape(step))
    return msg.build()


def _summary(report: PrecursorReport) -> str:
    n = len(report.events)
    where = f"{count(len(report.nodes), 'node')}"
    return (
        f"{n} {kind_words(report.kind, n)} on {where} between {when(report.start)} and "
        f"{when(report.end)}; each candidate's {minutes(report.lead_s)} before them against "
        f"ordinary windows of the same nodes and of {count(len(report.peers), 'peer')}."
    )


def render_answer(report: PrecursorReport) -> SlackMessage:
    kind = kind_words(report.kind, 2)
    n = len(report.events)
    leading = report.leading
    fallback = (
        f"{report.kind}: {leading.name} precedes them"
        if leading
        else f"{report.kind}: no precursor found"
    )
    msg = Message(fallback)
    msg.header(f"What preceded the {kind}")
    reach = report.reach and reach_note(report.reach, (report.end - report.start).total_seconds())
    if n == 0:
        msg.section(
            f"No {kind} between {when(report.start)} and {when(report.end)}: nothing to look "
            "back from."
        )
        if reach:
            msg.context(reach)
        return msg.build()
    msg.context(escape(_summary(report)))
    if reach:
        msg.context(reach)
    if n == 1:
        msg.section(
            ":grey_question: *One event is not evidence*: nothing can be called a cause from a "
            "single fault. What its node showed before it is in the thread; a longer `--since` "
            "may gather more."
        )
    elif report.thin:
        msg.section(
            f":grey_question: *The evidence is thin*: {count(n, 'event')} are too few to "
            "tell a precursor from chance; the strongest differences are in the thread, "
            "to check by hand. A longer `--since` may gather more."
        )
    elif leading is not None:
        msg.section(f":mag: {finding(report, leading)}.")
        msg.context(escape(honesty(leading)))
        others = [r for r in report.ranked[1:] if r.claimed]
        if others:
            msg.section(
                "*Also before them*\n"
                + "\n".join(f"• {finding(report, r)}" for r in others[:MAX_OTHER_LINES])
            )
        msg.section(
            f":bell: An alert rule that warns at {value(leading, warn_level(leading))}, before "
            f"the threshold, is in the thread; {_now(report)}"
        )
    else:
        msg.section(
            f":white_circle: *No candidate separates* the minutes before these {kind} from "
            "ordinary ones: nothing the candidates measure rose (or fell) before them more "
            "often than at other times."
        )
    nothing = report.no_difference
    if nothing:
        names = ", ".join(escape(r.name) for r in nothing)
        # With too few events, "no difference" would claim more than was shown.
        label = "Not told apart with so few events" if report.thin else "No difference"
        msg.context(f"{label}: {names}")
    if report.missing:
        msg.context(f"No data: {', '.join(escape(c) for c in report.missing)}")
    return msg.build()


def _now(report: PrecursorReport) -> str:
    if not report.crossing_now:
        return "no node is past it."
    nodes = ", ".join(code(n) for n, _ in report.crossing_now[:MAX_NOW])
    more = len(report.crossing_now) - MAX_NOW
    tail = f" and {count(more, 'more')}" if more > 0 else ""
    return f"past it: {nodes}{tail}."


def _row(report: PrecursorReport, r: Ranked) -> str:
    if r.threshold is None:
        return f"{r.name}: no comparison ({count(r.events, 'event')} with data)"
    refs = ", ".join(f"{r2.name} {pct(r2.rate)} of {big(r2.windows)}" for r2 in r.references)
    word = "above" if r.candidate.direction == "above" else "below"
    verdict = "claimed" if r.claimed else ("no difference" if r.no_difference else "unclear")
    return (
        f"{r.name}: {r.preceded} of {r.events} {word} {value(r, r.threshold)} "
        f"(ordinary: {refs}); gap {r.gap:.2f}, p {r.p_value:.2g}, corrected {r.p_corrected:.2g}"
        f" [{verdict}]"
    )


def render_detail(report: PrecursorReport) -> SlackMessage:
    msg = Message(f"What preceded the {kind_words(report.kind, 2)}: the detail")
    leading = report.leading
    if leading is not None:
        msg.section("*Warn before it happens*: paste into your Prometheus rule files")
        msg.section(code_block(alert_rule(report.kind, leading)))
        msg.section(f"*At the warning level now*: {_now(report)}")
    if report.events:
        lines = [f"{when(e.at)} {e.node}" for e in report.events]
        msg.section(f"*The {count(len(lines), 'event')}*")
        msg.section(code_block("\n".join(lines[-30:])))
    if report.ranked:
        msg.section("*Every candidate*, best first")
        msg.section(code_block("\n".join(_row(report, r) for r in report.ranked)))
        msg.context(
            escape(
                f"How: each event's {minutes(report.lead_s)} up to its node's last sample "
                "before it, against windows as long that keep an hour away from any event of "
                "their node (the same nodes at other times, peers at other times) and the "
                "peers' windows at the same moments (which rules out a daily cycle or a "
                "fleet-wide load). Each event's value is tried as the threshold; the gap is the "
                "share of events preceded minus the highest ordinary rate, p Fisher's exact "
                "test against the least favourable comparison; the threshold kept has the "
                f"smallest p, which is then multiplied by the {report.tried} thresholds tried "
                "in all. "
                f"A claim needs {report.min_events} events or more, 3 preceded, and p below "
                f"{report.alpha:g}."
            )
        )
    return msg.build()
