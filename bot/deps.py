"""What the listeners may use, built once by the composition root (bot/app.py `make_deps`) inside
the running loop. A command's runner receives only its own service (`handlers/commands.py`:
each entry's `service`): `NodeHealthService` for /node-health, `FaultsService` for /hw-faults,
and so on."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.ask.ports import Picker, ThreadMemory
from bot.authz import Authorizer
from bot.config import Settings
from bot.inflight import InFlight
from bot.offload import Offload
from bot.ports import Scheduler, StateStore
from bot.precursors.config import PrecursorsConfig
from bot.precursors.ports import PrecursorHistory
from bot.regressions.ask import BUILT_IN
from bot.regressions.ports import FleetHistory
from bot.render.validation import TestOffer
from bot.telemetry import Telemetry
from bot.triage.ports import FaultHistory, JobNoticeLedger
from bot.triage.repeat_config import RepeatConfig
from bot.triage.service import Triage
from bot.usermap import UserMap
from bot.validation.config import ValidationConfig
from bot.validation.ports import NodeTester, ValidationLedger
from bot.validation.service import time_limit_s

if TYPE_CHECKING:
    from bot.alerts.runtime import Alerting
    from bot.highlights.runtime import DigestRunner
    from bot.highlights.service import Highlights
    from bot.playground.service import Playground
    from bot.regressions.weekly import WeeklyRegressions


@dataclass
class ValidationService:
    """Testing drained nodes through the scheduler before they go back into service."""

    tester: NodeTester
    scheduler: Scheduler  # read back after each run: the wrapped one, as every action
    cfg: ValidationConfig
    ledger: ValidationLedger
    authz: Authorizer
    history: FaultHistory | None = None  # where failures count toward a repeat offender
    repeat: RepeatConfig = field(default_factory=RepeatConfig)
    channel: str | None = None  # where runs nobody asked for are posted (the alert channel)
    poll_s: float = 2.0
    # How long a run's watcher holds it without a poll before another replica takes it up.
    lease_s: int = 30
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # runs under way here

    @property
    def offer(self) -> TestOffer:
        """The "Test and resume" button's terms: the suite's longest run, in minutes."""
        return TestOffer(-(-time_limit_s(self.cfg) // 60), repaired=self.cfg.on_repair)


@dataclass(frozen=True)
class NodeHealthService:
    """/node-health, and `/node-health <node> test` where nodes can be tested."""

    triage: Triage
    validation: ValidationService | None = None


@dataclass(frozen=True)
class FaultsService:
    """/hw-faults and /hw-faults why: the fleet's faults, and what preceded them."""

    triage: Triage
    cpu: Offload  # the charts
    precursors: PrecursorHistory | None = None  # None without days of metrics
    config: PrecursorsConfig = field(default_factory=PrecursorsConfig)


@dataclass(frozen=True)
class JobSlowService:
    """/job-slow: the triage reads the job, the user map names its owner's Slack account."""

    triage: Triage
    users: UserMap
    cpu: Offload  # the diagnosis and the chart


@dataclass
class RegressionsService:
    """/regressions and its weekly post."""

    history: FleetHistory | None  # None without Prometheus or the simulated fleet
    cpu: Offload
    # What may be asked about: the built-in components and the configured ones.
    components: tuple[str, ...] = BUILT_IN
    weekly: WeeklyRegressions | None = None  # None without a channel or history


@dataclass
class HighlightsService:
    """/highlights: the reactions' counts, and the pool the stats chart is drawn on."""

    cpu: Offload
    hl: Highlights | None = None  # None without Redis: reactions are counted across replicas


@dataclass
class Deps:
    settings: Settings
    store: StateStore
    telemetry: Telemetry
    inflight: InFlight
    cpu: Offload  # the one worker pool: the triage's, the alerts' and the charts'
    triage: Triage
    authz: Authorizer
    users: UserMap
    node_health: NodeHealthService
    faults: FaultsService
    job_slow: JobSlowService
    regressions: RegressionsService
    highlights: HighlightsService
    alerting: Alerting | None = None  # None without Redis: alerts need shared state
    playground: Playground | None = None  # None without PLAYGROUND_ENDPOINTS
    job_notices: JobNoticeLedger | None = None  # None when job owners are not told
    digest: DigestRunner | None = None
    threads: ThreadMemory | None = None  # what each thread asked last (mentions and DMs)
    picker: Picker | None = None  # the model for unsure questions; None unless configured
    validation: ValidationService | None = None  # None unless validation.output_dir is set
