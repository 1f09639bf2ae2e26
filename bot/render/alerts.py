"""Block Kit for channel alerts: one message per group, the storm summary, thread lines.

Every button and select carries the group's id (`GroupKey.id`) as its value, plus `|node` for
the drain and resume buttons of one node and `|<seconds>` (or `|custom`) for a silence option;
`split_value` reads them back. Whatever comes from labels and annotations is escaped, so an
alert summary can never ping a channel.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from bot.alerts.causes import xid_of
from bot.alerts.config import AlertsConfig
from bot.alerts.correlate import node_facts, picture
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Scope
from bot.alerts.pages import NODES_PER_PAGE, NodeRow, paged
from bot.alerts.policy import ACK, DRAIN_AFTER_JOBS, DRAIN_NOW, RESUME, SILENCE, offered_actions
from bot.alerts.standing import NO_SCHEDULER, Standing, Standings
from bot.alerts.sweep import REPEAT_LABEL
from bot.models import FaultKind, Severity
from bot.mrkdwn import code, escape, link, truncate, user_mention
from bot.render.blocks import Message, button, confirm_dialog, select
from bot.slack_message import SlackMessage
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

MAX_MEMBER_LINES = 15
STORM_TEXT_BUDGET = 9_000
"""Characters of event lines a storm summary holds (packed into sections of 3,000)."""

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


def _span(seconds: float) -> str:
    minutes = seconds / 60
    if minutes < 1:
        return "under 1 min"
    if minutes < 120:
        return f"{round(minutes)} min"
    return f"{minutes / 60:.0f} h"


def scope_phrase(group: AlertGroup) -> str:
    """ "on 40 nodes in 2 min", "on 32 nodes under leaf-07", "on node-001", "cluster-wide"
    (plain text, unescaped)."""
    nodes = picture(group).nodes
    count = f"{len(nodes):,} {plural(len(nodes), 'node')}"
    value = group.key.scope_value
    match group.key.scope:
        case Scope.EVENT:
            if len(nodes) == 1:
                return f"on {nodes[0]}"
            return f"on {count} in {_span(picture(group).span_s)}" if nodes else "cluster-wide"
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
    xid = xid_of(cause)
    if xid is not None:
        return escape(f"Xid {xid}")
    try:
        kind = FaultKind(cause)
    except ValueError:
        return code(cause)
    return f"{escape(words(kind))} ({code(cause)})"


def cause_words(cause: str) -> str:
    """`Xid 79` for an Xid, `InfiniBand link down (ib_link_down)` for a fault kind of the
    checks; an Alertmanager alert name as it is (its rule's author chose it)."""
    xid = xid_of(cause)
    if xid is not None:
        return f"Xid {xid}"
    try:
        kind = FaultKind(cause)
    except ValueError:
        return cause
    return f"{words(kind)} ({cause})"


BOTH_SOURCES = "seen by meowbot's sweep and Alertmanager"


def sources_note(alerts: Sequence[Alert]) -> str:
    """`seen by meowbot's sweep and Alertmanager` when both sources report the row, else ""."""
    return BOTH_SOURCES if len({a.source for a in alerts}) > 1 else ""


def _told(alerts: Sequence[Alert]) -> Alert:
    """Whose words a row of several alerts shows: a repeat offender's mark first, then the
    sweep's reading (the catalog's meaning and advice), then Alertmanager's annotation."""
    return min(
        alerts,
        key=lambda a: (
            REPEAT_LABEL not in a.labels,
            a.source is not AlertSource.SWEEP,
            not a.summary.strip(),
        ),
    )


def member_rows(group: AlertGroup) -> list[tuple[Alert, ...]]:
    """The group's alerts by node and GPU, firing rows first: the same fault reported by the
    sweep and by Alertmanager is one row, not two."""
    rows: dict[tuple[str, int | None] | str, list[Alert]] = {}
    for a in group.alerts:
        rows.setdefault((a.node, a.gpu) if a.node else a.fingerprint, []).append(a)
    return sorted(
        (tuple(r) for r in rows.values()),
        key=lambda r: (
            all(a.status is AlertStatus.RESOLVED for a in r),
            r[0].node or "",
            -1 if r[0].gpu is None else r[0].gpu,
        ),
    )


def _member_line(alerts: Sequence[Alert]) -> str:
    first = alerts[0]
    where = code(first.node) if first.node else "cluster"
    if first.gpu is not None:
        where += f" GPU {first.gpu}"
    firing = [a for a in alerts if a.status is AlertStatus.FIRING]
    if not firing:
        ended = max((a.ends_at for a in alerts if a.ends_at), default=None)
        return f"~{where}~ resolved" + (f" {ended:%H:%M} UTC" if ended else "")
    alert = _told(firing)
    summary = escape(truncate(" ".join(alert.summary.split()), 200, mrkdwn=False))
    line = f"{where}: {summary}" if summary else where
    note = sources_note(firing)
    return f"{line} ({note})" if note else line


def _tally(counts: Sequence[tuple[str, int]], limit: int = 8) -> str:
    shown = ", ".join(f"{escape(name)} {n}" for name, n in counts[:limit])
    return shown + (f", {len(counts) - limit} more" if len(counts) > limit else "")


def _picture_lines(group: AlertGroup) -> list[str]:
    """The event at a glance: its nodes as a hostlist, where they sit, what they share."""
    pic = picture(group)
    lines: list[str] = []
    if pic.nodes:
        label = "Nodes" if not group.firing else "Firing on"
        lines.append(f"*{label}:* {code(pic.hostlist)}")
    if pic.resolved_nodes:
        lines.append(f"*Resolved on:* {code(pic.resolved_hostlist)}")
    if len(pic.nodes) > 1:
        if pic.by_rack:
            lines.append(f"*By rack:* {_tally(pic.by_rack)}")
        if pic.by_leaf:
            lines.append(f"*By leaf switch:* {_tally(pic.by_leaf)}")
        if pic.shared:
            lines.append("*Shared:* " + ", ".join(f"{w} {code(v)}" for w, v in pic.shared))
        if pic.differ:
            lines.append("*Differ:* " + ", ".join(f"{w} ({n} values)" for w, n in pic.differ))
    return lines


def since_line(group: AlertGroup, now: datetime) -> str:
    """`Since 2026-12-06 02:10 UTC (2 h ago)`: from its earliest alert's start (the fault
    history's first sighting, Alertmanager's startsAt), not from when meowbot opened the
    group; a fault found when meowbot began watching says only that much."""
    alerts = group.firing or group.alerts
    if not alerts:
        return f"Since {_when(group.opened_at, now)}"
    start = min(a.starts_at for a in alerts)
    if all(a.began_unseen for a in alerts if a.starts_at == start):
        return (
            f"Seen since meowbot began watching at {_when(start, now)}; "
            "how long before that is not known"
        )
    return f"Since {_when(start, now)}"


def render_group(
    group: AlertGroup,
    cfg: AlertsConfig,
    now: datetime,
    stand: Standings = NO_SCHEDULER,
) -> SlackMessage:
    """The group's message: what, where, since when, who is on it, and the actions it offers.
    `stand`: where its nodes stand in the scheduler now, which decides each node's button
    (bot/alerts/standing.py).

    A big event (more than `IN_MESSAGE_NODES` nodes) shows its nodes as hostlists with counts
    and leaves the per-node lines and buttons to its thread (`render_page`)."""
    headline = _headline(group)
    pic = picture(group)
    fallback = f"{headline}: {pic.hostlist}" if len(pic.nodes) > 1 else headline
    msg = Message(truncate(fallback, 3000, mrkdwn=False)).header(headline)
    firing = len(group.firing)
    msg.section(
        f"*{firing}* firing, *{len(group.alerts) - firing}* resolved · severity "
        f"*{group.severity.value}*"
    )
    big = paged(group)
    if big:
        msg.lines(_picture_lines(group), bullet="")
    else:
        msg.lines(
            [_member_line(r) for r in member_rows(group)],
            max_items=MAX_MEMBER_LINES,
            more_hint="see /hw-faults",
        )
        if len(group.nodes) > 1:  # an event of several nodes names them, firing and resolved
            msg.lines(_picture_lines(group), bullet="")
    context = [since_line(group, now)]
    if group.claim is not None:
        context.append(f":eyes: {user_mention(group.claim.user_id)} is on it")
    if group.silenced_until is not None and group.silenced_until > now:
        context.append(f":mute: Silenced until {group.silenced_until:%Y-%m-%d %H:%M} UTC")
    msg.context(*context)
    if not group.resolved:
        if not big:
            held = standing_lines(group, stand)
            if held:
                msg.context(*held)
        buttons = _buttons(group, cfg, stand, per_node=not big)
        if buttons:
            msg.actions(*buttons)
        if big:
            msg.context(
                f"Each node's detail and its Drain button are in the thread "
                f"({plural_count(len(group.nodes), 'node')})."
            )
    return msg.build()


def node_line(node: str, alerts: Sequence[Alert]) -> str:
    """One node of a big event in its thread: its GPUs, what its alerts say, where it sits.
    Kept to one function so that more per node (its jobs, its fault history) joins here."""
    firing = [a for a in alerts if a.status is AlertStatus.FIRING]
    shown = firing or list(alerts)
    gpus = sorted({a.gpu for a in shown if a.gpu is not None})
    where = code(node) + (f" GPU {', '.join(map(str, gpus))}" if gpus else "")
    if not firing:
        ended = max((a.ends_at for a in alerts if a.ends_at), default=None)
        return f"{RESOLVED_EMOJI} ~{where}~ resolved" + (f" {ended:%H:%M} UTC" if ended else "")
    facts = node_facts(shown).get(node, {})
    place = " · ".join(escape(facts[k]) for k in ("rack", "leaf_switch") if facts.get(k))
    summary = _told(firing).summary
    text = f"{EMOJI[max(a.severity for a in firing)]} {where}"
    if summary.strip():
        text += f": {escape(truncate(' '.join(summary.split()), 160, mrkdwn=False))}"
    if place:
        text += f" ({place})"
    note = sources_note(firing)
    if note:
        text += f", {note}"
    if firing[0].starts_at:
        start = min(a.starts_at for a in firing)
        unseen = all(a.began_unseen for a in firing if a.starts_at == start)
        text += (
            f", seen since meowbot began watching at {start:%Y-%m-%d %H:%M} UTC"
            if unseen
            else f", since {start:%Y-%m-%d %H:%M} UTC"
        )
    return text


def render_page(
    group: AlertGroup,
    rows: Sequence[NodeRow],
    index: int,
    cfg: AlertsConfig,
    stand: Standings = NO_SCHEDULER,
) -> SlackMessage:
    """Reply `index` of a big event's per-node detail: one section a node, the button its
    scheduler state gives beside it (Drain, Resume, or none and who holds it); the buttons
    carry the same values as the message's."""
    total = -(-len(group.nodes) // NODES_PER_PAGE)
    first, last = rows[0][0], rows[-1][0]
    title = (
        f"{cause_words(group.key.cause)}: nodes {index * NODES_PER_PAGE + 1}-"
        f"{index * NODES_PER_PAGE + len(rows)} of {len(group.nodes)} ({first} … {last})"
    )
    msg = Message(truncate(title, 3000, mrkdwn=False))
    msg.context(escape(title) + (f" · page {index + 1} of {total}" if total > 1 else ""))
    offered = offered_actions(group)
    for node, alerts in rows:
        firing = any(a.status is AlertStatus.FIRING for a in alerts)
        accessory = _node_button(group, node, offered, stand) if firing else None
        line = node_line(node, alerts)
        said = _standing_words(node, stand) if firing else ""
        msg.section(f"{line} · {said}" if said else line, accessory=accessory)
    note = _scheduler_note(stand)
    if note and group.firing:
        msg.context(note)
    return msg.build()


def _node_button(
    group: AlertGroup, node: str, offered: list[str], stand: Standings
) -> dict[str, object] | None:
    """A node's one button, by where it stands (bot/alerts/standing.py): Drain in service,
    Resume once meowbot took it out, none where someone else holds it or no scheduler acts."""
    if not stand.scheduler:
        return None
    gid = group.key.id
    standing = stand.of(node)
    if standing is not None and standing.standing is Standing.OURS:
        return (
            button(f"Resume {node}", ALERT_RESUME_ACTION, f"{gid}|{node}")
            if RESUME in offered
            else None
        )
    if standing is not None and standing.standing is not Standing.IN_SERVICE:
        return None
    # In service, or the scheduler did not answer: a press reads the state before it acts.
    if DRAIN_NOW in offered:
        return _drain_now_button(gid, node)
    if DRAIN_AFTER_JOBS in offered:
        return button(f"Drain {node} after jobs", ALERT_DRAIN_ACTION, f"{gid}|{node}")
    return None


def _standing_words(node: str, stand: Standings) -> str:
    """`drained by root in Slurm ("maintenance"): left to them`, `drained by meowbot`; ""
    for a node in service or when nothing is known."""
    standing = stand.of(node)
    if standing is None or standing.standing is Standing.IN_SERVICE:
        return ""
    where = escape(stand.scheduler)
    if standing.standing is Standing.UNLISTED:
        return f"not a node {where} lists: no Drain or Resume"
    reason = f" ({code(truncate(standing.reason, 120, mrkdwn=False))})" if standing.reason else ""
    if standing.standing is Standing.OURS:
        return f"{standing.state} by meowbot in {where}{reason}"
    if not standing.reason and not standing.by:
        return (
            f"{standing.state} in {where}, not by meowbot (no reason given): "
            "no Drain or Resume here"
        )
    who = f"by {escape(standing.by)}" if standing.by else "by someone other than meowbot"
    return f"{standing.state} {who} in {where}{reason}: left to them, no Drain or Resume here"


def standing_lines(group: AlertGroup, stand: Standings) -> list[str]:
    """What the message says of its firing nodes' scheduler state where it decides their
    buttons: who holds a node meowbot leaves alone, which nodes meowbot took out, and when
    the scheduler could not say or there is none."""
    lines = []
    for node in sorted({a.node for a in group.firing if a.node}):
        said = _standing_words(node, stand)
        if said:
            lines.append(f"{code(node)} {said}")
    note = _scheduler_note(stand) if any(a.node for a in group.firing) else ""
    return [*lines, note] if note else lines


def _scheduler_note(stand: Standings) -> str:
    if not stand.scheduler:
        return "No scheduler is configured (SLURM_REST_URL or KUBECONFIG): no Drain or Resume."
    if stand.nodes is None:
        return (
            f"{escape(stand.scheduler)} did not answer when this was drawn: Drain is offered as "
            "for a node in service (a press reads the node first), Resume is not."
        )
    return ""


def _drain_now_button(gid: str, node: str) -> dict[str, object]:
    return button(
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


def _buttons(
    group: AlertGroup,
    cfg: AlertsConfig,
    stand: Standings,
    *,
    per_node: bool = True,
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
    nodes = sorted({a.node for a in group.firing if a.node}) if per_node else []
    for node in nodes:
        one = _node_button(group, node, offered, stand)
        if one is not None:
            elements.append(one)
    runbook = cfg.runbook(group.key.cause)
    if runbook:
        elements.append(button("Runbook", ALERT_RUNBOOK_ACTION, gid, url=runbook))
    return elements


def _storm_line(group: AlertGroup, to: str | None) -> str:
    """One event of a storm: its cause, how many nodes, and every one of them as a hostlist;
    for an event posted on its own, a link to its message (`to`)."""
    pic = picture(group)
    line = f"{EMOJI[group.severity]} {_cause_label(group.key.cause)}"
    if not pic.nodes:
        line = f"{line}: cluster-wide, {plural_count(len(group.firing), 'alert')}"
    else:
        line = f"{line} on {plural_count(len(pic.nodes), 'node')}: {code(pic.hostlist)}"
    if to:
        return f"{line} · {link(to, 'its message')}"
    if group.ts is not None:  # posted, its link unknown: still say it stands on its own
        return f"{line} · posted on its own in this channel"
    return line


def render_storm(
    channel_groups: Sequence[AlertGroup],
    now: datetime,
    links: Mapping[str, str] | None = None,
) -> SlackMessage:
    """One message for a storm of unrelated events: counted in events, each named with its
    nodes as a hostlist, worst first, an event posted on its own linked to its message
    (`links`, by group id). Its lines are packed into sections; only past Slack's 50 blocks
    are the last events left to /hw-faults, and the summary says how many."""
    to = links or {}
    open_groups = sorted((g for g in channel_groups if not g.resolved), key=_storm_order)
    if not open_groups:
        text = f"{RESOLVED_EMOJI} The alert storm is over; its events are posted on their own."
        return Message(text).section(text).context(f"Updated {now:%Y-%m-%d %H:%M:%S} UTC").build()
    nodes = {a.node for g in open_groups for a in g.firing if a.node}
    headline = (
        f":rotating_light: Alert storm: {plural_count(len(open_groups), 'event')} "
        f"on {plural_count(len(nodes), 'node')}"
    )
    causes = Counter(g.key.cause for g in open_groups)
    msg = Message(headline).header(headline)
    msg.section(
        f"{plural_count(len(causes), 'cause')}, "
        f"{plural_count(sum(len(g.firing) for g in open_groups), 'firing alert')}."
    )
    # What one message holds (Slack takes 11,000 characters of blocks' text): the rest are
    # counted, never cut silently.
    lines: list[str] = []
    used = 0
    for g in open_groups:
        line = _storm_line(g, to.get(g.key.id))
        if used + len(line) > STORM_TEXT_BUDGET:
            break
        lines.append(line)
        used += len(line) + 1
    msg.lines(lines, bullet="")
    left = open_groups[len(lines) :]
    if left:
        hidden = {a.node for g in left for a in g.firing if a.node}
        msg.context(
            f"…and {plural_count(len(left), 'more event')} on "
            f"{plural_count(len(hidden), 'node')}: /hw-faults lists them all."
        )
    alone = any(g.ts is not None for g in open_groups)
    msg.context(
        f"Updated {now:%Y-%m-%d %H:%M:%S} UTC. "
        + (
            "An event with its message linked has its per-node detail and buttons there; "
            "the others are posted on their own once the storm passes"
            if alone
            else "Each event is posted on its own, with its per-node detail and buttons, "
            "once the storm passes"
        )
        + "; /hw-faults shows them now."
    )
    return msg.build()


def _storm_order(group: AlertGroup) -> tuple[int, int, str]:
    return (-group.severity.rank, -len(group.nodes), group.key.id)


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
        standings: Standings,
    ) -> SlackMessage:
        return render_group(group, cfg, now, standings)

    def page(
        self,
        group: AlertGroup,
        rows: Sequence[NodeRow],
        index: int,
        cfg: AlertsConfig,
        standings: Standings,
    ) -> SlackMessage:
        return render_page(group, rows, index, cfg, standings)

    def storm(
        self, groups: Sequence[AlertGroup], now: datetime, links: Mapping[str, str]
    ) -> SlackMessage:
        return render_storm(groups, now, links)

    def reply(self, text: str) -> SlackMessage:
        return SlackMessage(text, [])
