"""When the weekly digest fires: `fri 16:00 Europe/Berlin`, and the week each digest covers.

A digest covers the week that ends when it fires: from the previous firing (the same weekday
and local time seven days earlier, so daylight saving moves nothing) up to this one. A week is
named by the local date it ends on (`2026-12-04`), which is also its exactly-once key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_SCHEDULE_RE = re.compile(r"^\s*([a-z]{3})[a-z]*\s+(\d{1,2}):(\d{2})(?:\s+(\S+))?\s*$", re.I)


@dataclass(frozen=True)
class Week:
    start: datetime  # UTC, inclusive
    end: datetime  # UTC, exclusive: when its digest fires
    id: str  # the local date the week ends on

    def contains(self, at: datetime) -> bool:
        return self.start <= at < self.end


@dataclass(frozen=True)
class DigestSchedule:
    weekday: int = 4  # Monday is 0
    hour: int = 16
    minute: int = 0
    tz: str = "UTC"

    @classmethod
    def parse(cls, text: str) -> DigestSchedule:
        """`fri 16:00 Europe/Berlin` (the timezone is optional and defaults to UTC)."""
        m = _SCHEDULE_RE.match(text or "")
        if not m:
            raise ValueError(f"not a schedule: {text!r}")
        day, hour, minute, tz = m.group(1).lower(), int(m.group(2)), int(m.group(3)), m.group(4)
        if day not in WEEKDAYS or not (0 <= hour <= 23 and 0 <= minute <= 59):
            raise ValueError(f"not a schedule: {text!r}")
        try:
            ZoneInfo(tz or "UTC")
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone: {tz!r}") from None
        return cls(WEEKDAYS.index(day), hour, minute, tz or "UTC")

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def __str__(self) -> str:
        return f"{WEEKDAYS[self.weekday]} {self.hour:02d}:{self.minute:02d} {self.tz}"

    def _at(self, day: datetime) -> datetime:
        local = datetime.combine(day.date(), time(self.hour, self.minute), tzinfo=self.zone)
        return local.astimezone(UTC)

    def last_fire(self, now: datetime) -> datetime:
        """The latest firing at or before `now` (UTC)."""
        local = now.astimezone(self.zone)
        back = (local.weekday() - self.weekday) % 7
        fire = self._at(local - timedelta(days=back))
        if fire > now:
            fire = self._at(local - timedelta(days=back + 7))
        return fire

    def next_fire(self, now: datetime) -> datetime:
        """The first firing strictly after `now`."""
        return self._following(self.last_fire(now))

    def _following(self, fire: datetime) -> datetime:
        return self._at(fire.astimezone(self.zone) + timedelta(days=7))

    def _preceding(self, fire: datetime) -> datetime:
        return self._at(fire.astimezone(self.zone) - timedelta(days=7))

    def week_ending(self, fire: datetime) -> Week:
        """The week whose digest fires at `fire` (a firing time)."""
        return Week(self._preceding(fire), fire, fire.astimezone(self.zone).date().isoformat())

    def current_week(self, now: datetime) -> Week:
        """The week in progress at `now` (its digest has not fired yet)."""
        return self.week_ending(self.next_fire(now))

    def last_week(self, now: datetime) -> Week:
        """The last complete week: the one whose digest fired last."""
        return self.week_ending(self.last_fire(now))
