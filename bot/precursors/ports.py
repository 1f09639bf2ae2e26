"""What the precursor finder reads, behind a port (Prometheus or the simulator, bot/backends)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from bot.precursors.models import Candidate, Event, Series
from bot.triage.window import DataReach


class PrecursorHistory(Protocol):
    name: str

    def kinds(self) -> tuple[str, ...]:
        """The fault kinds whose events it can find over days."""
        ...

    async def events(
        self, kind: str, *, nodes: Sequence[str] | None, start: datetime, end: datetime
    ) -> list[Event]:
        """Every event of `kind` in the window (on `nodes`, or anywhere): bounded queries
        whatever the fleet size."""
        ...

    async def reach(self, start: datetime, end: datetime) -> DataReach | None:
        """Where the metrics begin, when after `start` (None: they reach back to it, or
        nothing says): a few instant queries at most."""
        ...

    async def windows(
        self,
        candidates: Sequence[Candidate],
        *,
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        lead_s: float,
    ) -> list[Series]:
        """Each candidate on `nodes` as window extremes: a point every `lead_s` (on multiples
        of it), the highest value (the lowest, for a falling candidate) over the `lead_s`
        ending there. One query a candidate."""
        ...

    async def around(
        self,
        candidates: Sequence[Candidate],
        spans: Sequence[tuple[str, datetime, datetime]],
        *,
        step_s: int,
    ) -> list[Series]:
        """Each candidate finely (a point every `step_s`) over each (node, start, end) span:
        one query a candidate, whatever the number of spans."""
        ...

    async def current(self, candidate: Candidate, *, at: datetime, lead_s: float) -> list[Series]:
        """The candidate's extreme over the `lead_s` before `at` on every node: one query."""
        ...
