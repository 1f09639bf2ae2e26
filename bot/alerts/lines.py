"""The lines an alert's thread gets: who did what (`audit_line`), an alert firing again
(`repeat_line`). They are stored in the group (`AlertGroup.replies`) and posted as they are, so
they are written here in mrkdwn, with whatever came from people and Alertmanager escaped."""

from __future__ import annotations

from bot.alerts.models import Alert
from bot.mrkdwn import code, escape, truncate


def audit_line(user_name: str, verb: str, detail: str = "") -> str:
    """A thread reply recording an action: "@ana drained node-7: meowbot: xid by @ana"."""
    line = f"{escape('@' + user_name)} {escape(verb)}"
    if detail:
        line += f": {escape(detail)}"
    return truncate(line, 3000)


def repeat_line(alert: Alert) -> str:
    """A thread reply for an alert that fired again while its group is open."""
    where = code(alert.node) if alert.node else "cluster"
    if alert.gpu is not None:
        where += f" GPU {alert.gpu}"
    summary = escape(" ".join(alert.summary.split()))
    return truncate(
        f":repeat: {where} again: {summary}" if summary else f":repeat: {where} again", 3000
    )
