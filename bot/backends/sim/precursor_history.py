"""/hw-faults why's PrecursorHistory over the simulated fleet: its week of events and metrics.

The world (bot/backends/sim/hidden_precursors.py) holds a minute series of each default
candidate on every node; window extremes and the minutes around events are cut from it the
way the Prometheus adapter's queries cut them from Prometheus (`max_over_time` over the lead
ending at each multiple of it). A candidate the world has no profile for has no data here.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bot.backends.sim.hidden_precursors import MINUTE, PROFILES, PrecursorWorld
from bot.precursors.models import Candidate, Event, Series
from bot.triage.window import DataReach


class SimPrecursorHistory:
    name = "the simulated fleet"

    def __init__(self, world: PrecursorWorld) -> None:
        self.world = world

    def kinds(self) -> tuple[str, ...]:
        return self.world.kinds()

    async def reach(self, start: datetime, end: datetime) -> DataReach | None:
        """The world's minutes begin a day before its week: a longer window falls short."""
        if start.timestamp() >= self.world.t0:
            return None
        return DataReach(self.name, datetime.fromtimestamp(self.world.t0, UTC))

    async def events(
        self, kind: str, *, nodes: Sequence[str] | None, start: datetime, end: datetime
    ) -> list[Event]:
        return self.world.events_of(kind, nodes, start, end)

    def _extremes(
        self, c: Candidate, node: str, ends: np.ndarray, lead_s: float
    ) -> np.ndarray | None:
        values = self.world.series(c.name, node)
        if values is None:
            return None
        width = max(1, int(lead_s // MINUTE))
        view = sliding_window_view(values, width)
        pick = view.min(axis=1) if c.direction == "below" else view.max(axis=1)
        # The window ending at minute i is view[i - width + 1]: the `width` minutes up to i.
        idx = np.array([self.world.minute_of(t) for t in ends]) - width + 1
        ok = (idx >= 0) & (idx < len(pick))
        out = np.full(len(ends), np.nan)
        out[ok] = pick[idx[ok]]
        return out

    def _windows(
        self,
        candidates: Sequence[Candidate],
        nodes: Sequence[str],
        start_s: float,
        end_s: float,
        lead_s: float,
    ) -> list[Series]:
        first = math.ceil(start_s / lead_s) * lead_s
        ends = np.arange(first, end_s + 1, lead_s)
        out = []
        for c in candidates:
            if c.name not in PROFILES:
                continue
            part = self.world.part(c.name)
            for node in nodes:
                got = self._extremes(c, node, ends, lead_s)
                if got is None:
                    continue
                keep = ~np.isnan(got)
                out.append(
                    Series(
                        node, c.name, part, tuple(ends[keep].tolist()), tuple(got[keep].tolist())
                    )
                )
        return out

    async def windows(
        self,
        candidates: Sequence[Candidate],
        *,
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        lead_s: float,
    ) -> list[Series]:
        # A week of minutes of a hundred nodes: off the event loop.
        return await asyncio.to_thread(
            self._windows, candidates, nodes, start.timestamp(), end.timestamp(), lead_s
        )

    def _around(
        self,
        candidates: Sequence[Candidate],
        spans: Sequence[tuple[str, datetime, datetime]],
        step_s: int,
    ) -> list[Series]:
        by_node: dict[str, set[int]] = {}
        every = max(1, step_s // MINUTE)
        for node, a, b in spans:
            lo = math.ceil(self.world.minute_of(a.timestamp()) / every) * every
            hi = self.world.minute_of(b.timestamp())
            by_node.setdefault(node, set()).update(range(max(0, lo), hi + 1, every))
        out = []
        for c in candidates:
            if c.name not in PROFILES:
                continue
            part = self.world.part(c.name)
            for node, minutes in sorted(by_node.items()):
                values = self.world.series(c.name, node)
                if values is None:
                    continue
                idx = sorted(i for i in minutes if i < len(values))
                out.append(
                    Series(
                        node,
                        c.name,
                        part,
                        tuple(self.world.time_of(i) for i in idx),
                        tuple(float(values[i]) for i in idx),
                    )
                )
        return out

    async def around(
        self,
        candidates: Sequence[Candidate],
        spans: Sequence[tuple[str, datetime, datetime]],
        *,
        step_s: int,
    ) -> list[Series]:
        return await asyncio.to_thread(self._around, candidates, spans, step_s)

    def _current(self, c: Candidate, at_s: float, lead_s: float) -> list[Series]:
        if c.name not in PROFILES:
            return []
        part = self.world.part(c.name)
        ends = np.array([math.floor(at_s / MINUTE) * MINUTE], dtype=np.float64)
        out = []
        for node in self.world.names:
            got = self._extremes(c, node, ends, lead_s)
            if got is not None and not np.isnan(got[0]):
                out.append(Series(node, c.name, part, (float(ends[0]),), (float(got[0]),)))
        return out

    async def current(self, candidate: Candidate, *, at: datetime, lead_s: float) -> list[Series]:
        return await asyncio.to_thread(self._current, candidate, at.timestamp(), lead_s)
