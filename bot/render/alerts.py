"""Block Kit for channel alerts: one message per group, the storm summary, thread lines.

Every button and select carries the group's id (`GroupKey.id`) as its value, plus `|node` for
the drain and resume buttons of one node and `|<seconds>` (or `|custom`) for a silence option;
`split_value` reads them back. Whatever comes from labels and annotations is escaped, so an
alert summary can never ping a channel.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from bot.alerts.config import AlertsConfig
from bot.alerts.models import Alert, AlertGroup, AlertStatus, GroupKey, Scope
from bot.alerts.policy import ACK, DRAIN_AFTER_JOBS, DRAIN_NOW, RESUME, SILENCE, offered_actions
from bot.models import FaultKind, Severity
from bot.mrkdwn import code, escape, truncate, user_mention
from bot.render.blocks import Message, SlackMessage, button, confirm_dialog, select
from bot.triage.kinds import words
from bot.words import count as plural_count
from bot.words import plural

ALERT_ACK_ACTION = "meowbot_alert_ack"
ALERT_SILENCE_ACTION = "meowbot_alert_silence"
ALERT_DRAIN_ACTION = "meowbot_alert_drain"
ALERT_RESUME_ACTION = "meowbot_alert_resume"
ALERT_CONFIRM_DRAIN_ACTION = "meowbot_alert_confirm_drain"
ALERT_RESUME_ANYWAY_ACTION = "meowbot_alert_resume_anyway"
ALERT_RUNBOOK_ACTION = "meowbot_alert_runbook"  # a link: Slack still sends the click
CUSTOM_SILENCE = "custom"

MAX_NODE_BUTTONS = 3
"""Nodes that get their own drain/resume buttons; the others go through /node-health."""
MAX_MEMBER_LINES = 15
MAX_STORM_LINES = 20

EMOJI = {
    Severity.CRITICAL: ":red_circle:",
    Severity.WARNING: ":large_orange_circle:",
    Severity.INFO: ":large_blue_circle:",
}
RESOLVED_EMOJI = ":white_check_mark:"


def split_value(value: str) -> tuple[GroupKey, str]:
    """A button or option value back into the group key and its extra part ("" when none)."""
    parts = value.split("|")
    if len(parts) < 3:
        raise ValueError(f"not an alert group value: {value!r}")
    return GroupKey.parse("|".join(parts[:3])), "|".join(parts[3:])


def _duration(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


def _when(at: datetime, now: datetime) -> str:
    minutes = max(0, int((now - at).total_seconds() // 60))
    ago = f"{minutes} min ago" if minutes < 120 else f"{minutes // 60} h ago"
    return f"{at:%Y-%m-%d %H:%M} UTC ({ago})"


def scope_phrase(group: AlertGroup) -> str:
    """ "on 32 nodes under leaf-07", "on node-001", "cluster-wide" (plain text, unescaped)."""
    nodes = group.nodes
    count = f"{len(nodes):,} {plural(len(nodes), 'node')}"
    value = group.key.scope_value
    match group.key.scope:
        case Scope.LEAF_SWITCH:
            return f"on {count} under {value}"
        case Scope.RACK:
            return f"on {count} in rack {value}"
        case Scope.JOB:
            return f"on {count} of job {value}"
        case Scope.NODE:
            return f"on {value or (nodes[0] if nodes else 'one node')}"
        case _:
            return "cluster-wide" if not nodes else f"on {count}"


def _headline(group: AlertGroup) -> str:
    prefix = f"{RESOLVED_EMOJI} RESOLVED: " if group.resolved else f"{EMOJI[group.severity]} "
    return f"{prefix}{cause_words(group.key.cause)} {scope_phrase(group)}"


def _cause_label(cause: str) -> str:
    """`InfiniBand link down (`ib_link_down`)` in mrkdwn; an alert name as code alone."""
    try:
        kind = FaultKind(cause)
    except ValueError:
        return code(cause)
    return f"{escape(words(kind))} ({code(cause)})"


def cause_words(cause: str) -> str:
    """`InfiniBand link down (ib_link_down)` for a fault kind of the checks; an Alertmanager
    alert name as it is (its rule's author chose it)."""
    try:
        kind = FaultKind(cause)
    except ValueError:
        return cause
    return f"{words(kind)} ({cause})"


def _member_line(alert: Alert) -> str:
    where = code(alert.node) if alert.node else "cluster"
    if alert.gpu is not None:
        where += f" GPU {alert.gpu}"
    summary = escape(truncate(" ".join(alert.summary.split()), 200, mrkdwn=False))
    if alert.status is AlertStatus.RESOLVED:
        return f"~{where}~ resolved" + (f" {alert.ends_at:%H:%M} UTC" if alert.ends_at else "")
    return f"{where}: {summary}" if summary else where


def render_group(
    group: AlertGroup,
    cfg: AlertsConfig,
    now: datetime,
    out_of_service: frozenset[str] | None = None,
) -> SlackMessage:
    """The group's message: what, where, since when, who is on it, and the actions it offers.
    `out_of_service`: the nodes the scheduler has out of scheduling now (None: it cannot say)."""
    headline = _headline(group)
    msg = Message(headline).header(headline)
    members = sorted(group.alerts, key=lambda a: (a.status is AlertStatus.RESOLVED, a.node or ""))
    firing = len(group.firing)
    msg.section(
        f"*{firing}* firing, *{len(group.alerts) - firing}* resolved · severity "
        f"*{group.severity.value}*"
    )
    msg.lines(
        [_member_line(a) for a in members],
        max_items=MAX_MEMBER_LINES,
        more_hint="see the thread or /hw-faults",
    )
    context = [f"Since {_when(group.opened_at, now)}"]
    if group.claim is not None:
        context.append(f":eyes: {user_mention(group.claim.user_id)} is on it")
    if group.silenced_until is not None and group.silenced_until > now:
        context.append(f":mute: Silenced until {group.silenced_until:%Y-%m-%d %H:%M} UTC")
    msg.context(*context)
    if not group.resolved:
        buttons = _buttons(group, cfg, out_of_service)
        if buttons:
            msg.actions(*buttons)
        firing_nodes = sorted({a.node for a in group.firing if a.node})
        if len(firing_nodes) > MAX_NODE_BUTTONS:
            msg.context(
                f"Drain or resume the other "
                f"{plural_count(len(firing_nodes) - MAX_NODE_BUTTONS, 'node')} with /node-health."
            )
    return msg.build()


def _buttons(
    group: AlertGroup, cfg: AlertsConfig, out_of_service: frozenset[str] | None
) -> list[dict[str, object]]:
    gid = group.key.id
    offered = offered_actions(group)
    elements: list[dict[str, object]] = []
    if ACK in offered:
        elements.append(button("Acknowledge", ALERT_ACK_ACTION, gid, style="primary"))
    if SILENCE in offered:
        options = [(_duration(s), f"{gid}|{s}") for s in cfg.silence_durations_s]
        options.append(("custom…", f"{gid}|{CUSTOM_SILENCE}"))
        elements.append(select("Silence…", ALERT_SILENCE_ACTION, options))
    nodes = sorted({a.node for a in group.firing if a.node})[:MAX_NODE_BUTTONS]
    for node in nodes:
        # A node out of scheduling already offers Resume, one in service Drain; both only
        # when the scheduler could not say which it is.
        out = out_of_service is not None and node in out_of_service
        if not out and DRAIN_NOW in offered:
            elements.append(
                button(
                    f"Drain {node}",
                    ALERT_DRAIN_ACTION,
                    f"{gid}|{node}",
                    style="danger",
                    confirm=confirm_dialog(
                        f"Drain {node} now?",
                        f"This takes {code(node)} out of scheduling now.",
                        confirm="Drain",
                        style="danger",
                    ),
                )
            )
        elif not out and DRAIN_AFTER_JOBS in offered:
            elements.append(button(f"Drain {node} after jobs", ALERT_DRAIN_ACTION, f"{gid}|{node}"))
        if RESUME in offered and (out or out_of_service is None):
            elements.append(button(f"Resume {node}", ALERT_RESUME_ACTION, f"{gid}|{node}"))
    runbook = cfg.runbook(group.key.cause)
    if runbook:
        elements.append(button("Runbook", ALERT_RUNBOOK_ACTION, gid, url=runbook))
    return elements


def render_storm(channel_groups: Sequence[AlertGroup], now: datetime) -> SlackMessage:
    """One message for a storm: open groups counted per cause and scope, worst first."""
    open_groups = [g for g in channel_groups if not g.resolved]
    if not open_groups:
        text = f"{RESOLVED_EMOJI} The alert storm is over; its groups are posted on their own."
        return Message(text).section(text).context(f"Updated {now:%Y-%m-%d %H:%M:%S} UTC").build()
    alerts = sum(len(g.firing) for g in open_groups)
    headline = f":rotating_light: Alert storm: {len(open_groups)} groups, {alerts} firing alerts"
    tally: Counter[tuple[str, Scope]] = Counter()
    worst: dict[tuple[str, Scope], Severity] = {}
    nodes: dict[tuple[str, Scope], set[str]] = {}
    for g in open_groups:
        key = (g.key.cause, g.key.scope)
        tally[key] += 1
        worst[key] = max(worst.get(key, Severity.INFO), g.severity)
        nodes.setdefault(key, set()).update(a.node for a in g.firing if a.node)
    order = sorted(tally, key=lambda k: (-worst[k].rank, -tally[k], k[0], k[1].value))
    lines = [
        f"{EMOJI[worst[k]]} {_cause_label(k[0])}: {tally[k]} group{'s' if tally[k] != 1 else ''} "
        f"by {k[1].value.replace('_', ' ')}, {len(nodes[k]):,} {plural(len(nodes[k]), 'node')}"
        for k in order
    ]
    msg = Message(headline).header(headline)
    msg.lines(lines, max_items=MAX_STORM_LINES)
    msg.context(
        f"Updated {now:%Y-%m-%d %H:%M:%S} UTC. Groups are posted on their own once the storm "
        f"passes; /hw-faults shows them all now."
    )
    return msg.build()


def confirm_drain_message(pending_id: str, node: str, asker: str) -> SlackMessage:
    """Past the hourly drain limit: a button for a second authorised person (not the asker)."""
    text = (
        f"@{escape(asker)} asked to drain {code(node)}, past the hourly drain limit: "
        "a second authorised person must confirm."
    )
    msg = Message(text).section(text)
    msg.actions(
        button(f"Confirm drain of {node}", ALERT_CONFIRM_DRAIN_ACTION, pending_id, style="danger")
    )
    return msg.build()


class BlockKitAlertMessages:
    """The notifier's messages as Block Kit (`bot.alerts.ports.AlertMessages`)."""

    def group(
        self,
        group: AlertGroup,
        cfg: AlertsConfig,
        now: datetime,
        out_of_service: frozenset[str] | None,
    ) -> SlackMessage:
        return render_group(group, cfg, now, out_of_service)

    def storm(self, groups: Sequence[AlertGroup], now: datetime) -> SlackMessage:
        return render_storm(groups, now)

    def reply(self, text: str) -> SlackMessage:
        return SlackMessage(text, [])
