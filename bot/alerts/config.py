"""The alert pipeline's settings: routes, quiet hours, storm and drain limits.

Read once at start-up from the `alerts:` mapping of the YAML file (`MEOWBOT_CONFIG`) and from
the environment (`MEOWBOT_ALERT_CHANNEL`, `MEOWBOT_SWEEP_INTERVAL`). A wrong value raises
`ConfigError` with one sentence, never a pydantic dump.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.alerts.causes import lookup, named_in
from bot.alerts.models import Scope
from bot.config import ConfigError, Settings
from bot.models import Severity

SEVERITY_NAMES = frozenset(s.value for s in Severity)


class _Cfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RouteMatch(_Cfg):
    severity: Severity | None = None
    cause: str | None = None


class RouteRule(_Cfg):
    """`{match: {severity?, cause?}, channel}`: every given key must match; first rule wins."""

    match: RouteMatch = Field(default_factory=RouteMatch)
    channel: str = Field(min_length=1)


class QuietHours(_Cfg):
    """Local hours (in `timezone`) during which groups of `max_severity` or lower are held."""

    start: time
    end: time
    timezone: str = "UTC"
    max_severity: Severity = Severity.INFO

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError("not an IANA timezone") from exc
        return v

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def contains(self, now: datetime) -> bool:
        """Whether `now` falls in the quiet hours; an empty window (start == end) never does."""
        local = now.astimezone(self.zone).time()
        if self.start == self.end:
            return False
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end

    def ends_after(self, now: datetime) -> datetime:
        """The first end of quiet hours after `now`, in the timezone of `now`."""
        local = now.astimezone(self.zone)
        for days in range(3):
            day = local.date() + timedelta(days=days)
            end = datetime.combine(day, self.end, tzinfo=self.zone)
            if end > local:
                return end.astimezone(now.tzinfo)
        return now  # unreachable: some end lies within three days


class AlertsConfig(_Cfg):
    # 5 s: with the recording rules loaded a 4,096-node sweep takes a fraction of it and an Xid
    # reaches the channel within the target (bench/fault_latency.py, docs/benchmarks.md);
    # without the rules such a fleet's raw sweep takes seconds, so set 10 s there.
    sweep_interval_s: int = Field(5, ge=1, le=86400)
    sweep_window_s: int | None = Field(None, ge=60, le=86400)
    """How far back a sweep's counter checks look: a fault clears once it is this quiet.
    Unset, the health window (`health.window_s`): the alerts then fire and clear with the
    verdict /node-health and App Home give, rather than on a window of their own."""
    default_channel: str | None = None
    routes: tuple[RouteRule, ...] = ()
    quiet_hours: QuietHours | None = None
    storm_groups: int = Field(20, ge=1)
    """Above this many open groups in one channel, new groups go into one storm summary."""
    storm_own_nodes: int = Field(10, ge=1)
    """In a storm, an event firing on this many nodes or more is still posted on its own (with
    its thread's per-node Drain buttons): twice what a message carries itself (5 nodes), above
    the few nodes of the per-host rules a storm is made of, and a fault on 10 nodes at once is
    a fleet cause (a driver push, a switch, a PDU) that must not wait for the storm to pass."""
    storm_own_events: int = Field(3, ge=0)
    """At most this many such events open on their own message at once in a storm (those
    posted since its summary), worst and biggest first, so a storm of big events cannot flood
    the channel; one resolving frees its place (0: none, all are summed up)."""
    burst_quiet_s: float = Field(2.0, ge=0, le=60)
    """Alertmanager's new events wait to be posted until no event has opened in their channel
    for this long (at most `burst_hold_s`): it sends one burst as a webhook per group, and a
    storm must be counted whole before its first small events are posted one by one."""
    burst_hold_s: float = Field(15.0, ge=0, le=300)
    drain_share_per_hour: float = Field(0.02, gt=0, le=1)
    auto_drain_causes: frozenset[str] = frozenset()
    group_scope: dict[str, Scope] = Field(default_factory=dict)
    runbooks: dict[str, str] = Field(default_factory=dict)
    runbook_template: str = ""
    """For causes without a runbook: a URL with `{cause}` in it, or empty for no button."""
    silence_durations_s: tuple[int, ...] = (3600, 14400, 86400)
    post: frozenset[str] = frozenset({Severity.CRITICAL.value, Severity.WARNING.value})
    """What goes to a channel: severities (`critical`, `warning`, `info`) and causes or fault
    kinds (`xid_13`, `xid`). By default critical and warning only: an info finding (an
    application's Xid 13, 31, 43, 45 on a healthy node) asks nobody to act, so it is kept
    (the fault history, /hw-faults) but not posted."""

    @field_validator("post")
    @classmethod
    def _post(cls, v: frozenset[str]) -> frozenset[str]:
        # A severity in any case; a cause as spelled (an Alertmanager alertname keeps its case).
        names = frozenset(
            n.lower() if n.lower() in SEVERITY_NAMES else n for n in map(str.strip, v)
        )
        if not names or "" in names:
            raise ValueError("name severities (critical, warning, info) or causes to post")
        return names

    def posts(self, severity: Severity, cause: str) -> bool:
        """Whether a group of `severity` and `cause` is posted to a channel (`post`)."""
        return severity.value in self.post or named_in(cause, self.post - SEVERITY_NAMES)

    @field_validator("silence_durations_s")
    @classmethod
    def _durations(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(d < 60 or d > 90 * 86400 for d in v):
            raise ValueError("durations must be between 60 s and 90 days")
        return tuple(sorted(set(v)))

    @field_validator("runbooks")
    @classmethod
    def _urls(cls, v: dict[str, str]) -> dict[str, str]:
        for url in v.values():
            if not url.startswith(("http://", "https://")):
                raise ValueError("a runbook must be an http(s) URL")
        return v

    @field_validator("runbook_template")
    @classmethod
    def _template(cls, v: str) -> str:
        if v and (not v.startswith(("http://", "https://")) or "{cause}" not in v):
            raise ValueError("an http(s) URL holding {cause}")
        return v

    def runbook(self, cause: str) -> str | None:
        """The cause's runbook, else its fault kind's (`xid` for `xid_79`), else the template's."""
        found = lookup(cause, self.runbooks)
        if found is not None:
            return found
        return self.runbook_template.replace("{cause}", cause) if self.runbook_template else None

    @classmethod
    def from_settings(cls, settings: Settings) -> AlertsConfig:
        raw: Any = settings.extra.get("alerts", {}) or {}
        if not isinstance(raw, dict):
            raise ConfigError("The alerts section of MEOWBOT_CONFIG must be a mapping.")
        data = dict(raw)
        data.setdefault("default_channel", settings.alert_channel)
        data["sweep_interval_s"] = settings.sweep_interval_s
        return cls.parse(data)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> AlertsConfig:
        """Validates a plain mapping (the YAML `alerts:` section), one sentence on error."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(part) for part in err["loc"]) or "alerts"
            reason = str(err["msg"]).removeprefix("Value error, ")
            raise ConfigError(
                f"alerts.{where} in MEOWBOT_CONFIG is wrong: {reason[:1].lower()}{reason[1:]}."
            ) from None
