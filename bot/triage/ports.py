"""The ports only triage takes: the metrics it reads (Prometheus and the simulator implement it,
in bot/backends/), the job owners' DMs and their shared ledger (bot/triage/owners.py), and
the fault history that finds repeat offenders (Redis, or in memory). The
inventory, the scheduler, where a node sits and the resume memory are shared with the alerts:
bot/ports.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from bot.triage.notice import JobNotice
from bot.triage.repeats import Occurrence
from bot.triage.stragglers import PacePoint, RankTime, StragglerConfig
from bot.triage.table import MetricRequest, Table
from bot.triage.window import DataReach


class Reader(Protocol):
    """The metrics port's read (`Metrics` extends it): all the resume memory needs."""

    async def read(
        self,
        requests: Sequence[MetricRequest],
        *,
        nodes: Sequence[str] | None,
        window_s: float,
        at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> Table: ...


class Metrics(Reader, Protocol):
    name: str

    async def step_times(
        self,
        job_id: str,
        cfg: StragglerConfig,
        *,
        at: datetime | None = None,
        timeout_s: float | None = None,
        metric: str | None = None,
    ) -> list[RankTime]:
        """Each rank's step time of a job (empty when it exports none), or another per-rank
        training metric of it (`cfg.compute_metric`, `cfg.wait_metric`)."""
        ...

    async def pace(
        self,
        job_id: str,
        cfg: StragglerConfig,
        *,
        start: datetime,
        end: datetime,
        step_s: int,
        timeout_s: float | None = None,
    ) -> list[PacePoint]:
        """A job's slowest and median rank over time."""
        ...


class JobOwners(Protocol):
    """Who owns a job on Slack, and their DM (Slack in production, bot/backends/)."""

    async def slack_user(self, cluster_user: str) -> str | None:
        """The Slack user id of a cluster user; None when nobody matches."""
        ...

    async def tell(self, slack_user: str, notice: JobNotice) -> None:
        """Sends the notice as a DM; raises `bot.errors.BackendError` when Slack refuses,
        `retryable` when the same DM may go through later (Slack down, slow or rate limiting)
        and not when it never will (no such user, a bot, a missing scope)."""
        ...


class JobNoticeLedger(Protocol):
    """What every replica shares of the notices (Redis): who was told, who said no."""

    async def claim(self, key: str, ttl_s: int) -> bool:
        """True for the one caller, across replicas, that claims `key` first within ttl_s."""
        ...

    async def release(self, key: str) -> None:
        """Gives a claim back (its DM was not sent): the next `claim` of `key` wins again."""
        ...

    async def opted_out(self, slack_user: str) -> bool: ...

    async def set_opted_out(self, slack_user: str, out: bool) -> None: ...


class Retries(Protocol):
    """Runs an attempt again later, off the request path, with backoff and bounded (tenacity,
    in bot/backends/): what a DM Slack failed to take is given."""

    def later(self, attempt: Callable[[], Awaitable[bool]], what: Mapping[str, str]) -> None:
        """Calls `attempt` again until it returns True (done: sent, or nothing left to send)
        or the tries run out; `what` names it in the log."""
        ...

    async def close(self) -> None:
        """Stops the attempts still waiting (the process is going away)."""
        ...


class FaultHistory(Protocol):
    """Each node's fault occurrences (bot/triage/repeats.py), shared by every replica and kept
    bounded: what the store keeps is its own concern, within `keep_days` and `max_per_node`."""

    async def occurrences(self, nodes: Sequence[str] | None) -> list[Occurrence]:
        """The occurrences of `nodes` (None: of every node with any)."""
        ...

    async def save(self, by_node: Mapping[str, Sequence[Occurrence]], now: datetime) -> None:
        """Replaces each named node's occurrences with the ones given; the first save, even of
        nothing, marks when the history began (`began`)."""
        ...

    async def began(self) -> datetime | None:
        """When this history began recording (None: nothing recorded yet): what it can say
        nothing about before, so that an empty history is not read as a finding."""
        ...


class PastEvent(Protocol):
    """One fault event in the past: its kind's code, its node, when."""

    @property
    def kind(self) -> str: ...

    @property
    def node(self) -> str: ...

    @property
    def at(self) -> datetime: ...


class EventHistory(Protocol):
    """Where past fault events are read over days: the one history `/hw-faults why` ranks
    precursors over (bot/precursors/ports.py: PrecursorHistory is one), which `/hw-faults
    --since` lists from too, so that both count the same events."""

    def kinds(self) -> tuple[str, ...]: ...

    async def events(
        self, kind: str, *, nodes: Sequence[str] | None, start: datetime, end: datetime
    ) -> Sequence[PastEvent]: ...

    async def reach(self, start: datetime, end: datetime) -> DataReach | None:
        """Where the metrics begin, when after `start` (None: they reach back to it, or
        nothing says): a few instant queries at most."""
        ...
