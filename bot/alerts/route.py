"""Route: which channel a group goes to, and whether quiet hours hold it back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.alerts.causes import named_in
from bot.alerts.config import AlertsConfig
from bot.alerts.models import AlertGroup

NO_CHANNEL = (
    "No alert channel is configured: set MEOWBOT_ALERT_CHANNEL or add an alerts route "
    "to MEOWBOT_CONFIG."
)


@dataclass(frozen=True)
class Route:
    """Where a group goes.

    `quiet`: the group is low severity and it is quiet hours. Such a group is HELD, not
    dropped: the notifier posts it at `hold_until` (the end of quiet hours) if it is still open
    then, and a group resolved before then is never posted. `error` is set (and `channel` empty)
    when no channel is configured at all: the notifier logs it and keeps the group.
    """

    channel: str
    quiet: bool = False
    hold_until: datetime | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def route(group: AlertGroup, cfg: AlertsConfig, now: datetime) -> Route:
    """The first matching route's channel (else the default), and the quiet-hours hold. A rule's
    cause matches that cause or, naming a fault kind, every cause of it (`xid`: `xid_79`)."""
    severity = group.severity
    channel = cfg.default_channel or ""
    for rule in cfg.routes:
        if rule.match.severity is not None and rule.match.severity is not severity:
            continue
        if rule.match.cause is not None and not named_in(group.key.cause, {rule.match.cause}):
            continue
        channel = rule.channel
        break
    if not channel:
        return Route(channel="", error=NO_CHANNEL)
    quiet = cfg.quiet_hours
    if quiet is not None and severity <= quiet.max_severity and quiet.contains(now):
        return Route(channel=channel, quiet=True, hold_until=quiet.ends_after(now))
    return Route(channel=channel)
