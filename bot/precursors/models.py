"""The precursor finder's models: events, candidates, the series read, and the answer.

No I/O. A candidate is one metric a node shows (a rate or a gauge, per node and, where the
candidate is split by a label such as the network device, per part); an event is one fault of
one kind on one node at one instant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from bot.triage.window import DataReach

Direction = Literal["above", "below"]


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    node: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Candidate:
    """A metric that may precede a fault. `query` is a PromQL template whose `$nodes` the
    Prometheus adapter replaces with a matcher of the nodes read (on `host_label`); the
    simulator knows the default candidates by name. `by` splits it into parts (a network
    device); `direction` says which way a precursor would go (an SM clock falls)."""

    name: str
    query: str
    unit: str
    direction: Direction = "above"
    host_label: str = "instance"
    by: str | None = None

    def part_name(self, part: str) -> str:
        return f"{self.name} ({part})" if part else self.name


@dataclass(frozen=True, slots=True)
class Series:
    """One node's values of one candidate (one part of it), in time order. Read finely
    around events (a point a minute), or coarsely as window extremes (each point the maximum,
    or for a falling candidate the minimum, over the `lead` that ends at its time)."""

    node: str
    candidate: str
    part: str
    times: tuple[float, ...]  # epoch seconds
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Reference:
    """One set of ordinary windows a candidate is compared against, and how many crossed."""

    name: str  # "same nodes", "peers", "peers at the same time"
    windows: int
    crossed: int

    @property
    def rate(self) -> float:
        return self.crossed / self.windows if self.windows else 0.0


@dataclass(frozen=True, slots=True)
class Ranked:
    """One candidate (part) against the events: the threshold that best tells the minutes
    before an event from ordinary ones, and how honestly it does."""

    candidate: Candidate
    part: str
    events: int  # events with data in their lead window
    preceded: int  # of those, how many followed a crossing of the threshold
    threshold: float | None
    leads_s: tuple[float, ...]  # each preceded event: how long before it the first crossing was
    references: tuple[Reference, ...]
    gap: float  # share of events preceded minus the highest ordinary rate (Youden's J)
    p_value: float  # one-sided Fisher's exact test, the least favourable reference
    p_corrected: float  # times every threshold of every candidate tried (Bonferroni)
    interval: tuple[float, float]  # 95 % Wilson interval of the share of events preceded
    claimed: bool
    no_difference: bool

    @property
    def name(self) -> str:
        return self.candidate.part_name(self.part)

    @property
    def ordinary(self) -> Reference:
        """The reference that crossed most often: the one the claim must beat."""
        return max(self.references, key=lambda r: (r.rate, r.windows))


CONCURRENT = "peers at the same time"
SAME_NODES = "the same nodes at other times"
PEERS = "peers at other times"


@dataclass(frozen=True, slots=True)
class PrecursorReport:
    kind: str
    start: datetime
    end: datetime
    lead_s: float
    events: tuple[Event, ...]
    nodes: tuple[str, ...]  # the events' nodes
    peers: tuple[str, ...]  # nodes without an event, read for comparison
    ranked: tuple[Ranked, ...]  # best first
    tried: int  # thresholds tried over every candidate: the correction's factor
    thin: bool  # fewer events than the finder trusts
    missing: tuple[str, ...] = ()  # candidates with no data at all
    around: tuple[Series, ...] = field(default=())  # the leading candidate around each event
    crossing_now: tuple[tuple[str, float], ...] = ()  # nodes above the warning level now
    min_events: int = 4  # what a claim needed, for the answer to say
    alpha: float = 0.01
    reach: DataReach | None = None  # where the metrics begin, when after `start`

    @property
    def leading(self) -> Ranked | None:
        return self.ranked[0] if self.ranked and self.ranked[0].claimed else None

    @property
    def no_difference(self) -> tuple[Ranked, ...]:
        return tuple(r for r in self.ranked if r.no_difference)
