"""What the listeners may use, built once by the composition root (bot/app.py `make_deps`) inside
the running loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.ask.ports import Picker, ThreadMemory
from bot.authz import Authorizer
from bot.config import Settings
from bot.inflight import InFlight
from bot.offload import Offload
from bot.ports import StateStore
from bot.precursors.config import PrecursorsConfig
from bot.precursors.ports import PrecursorHistory
from bot.regressions.ask import BUILT_IN
from bot.regressions.ports import FleetHistory
from bot.telemetry import Telemetry
from bot.triage.ports import JobNoticeLedger
from bot.triage.service import Triage
from bot.usermap import UserMap

if TYPE_CHECKING:
    from bot.alerts.runtime import Alerting
    from bot.highlights.runtime import DigestRunner
    from bot.highlights.service import Highlights
    from bot.playground.service import Playground
    from bot.regressions.ports import FleetHistory
    from bot.regressions.weekly import WeeklyRegressions


@dataclass
class Deps:
    settings: Settings
    store: StateStore
    telemetry: Telemetry
    inflight: InFlight
    cpu: Offload  # the worker pool, the triage's too: charts are drawn on it
    triage: Triage
    authz: Authorizer
    users: UserMap
    alerting: Alerting | None = None  # None without Redis: alerts need shared state
    playground: Playground | None = None  # None without PLAYGROUND_ENDPOINTS
    highlights: Highlights | None = None  # None without Redis, likewise
    job_notices: JobNoticeLedger | None = None  # None when job owners are not told
    digest: DigestRunner | None = None
    regressions_history: FleetHistory | None = None  # None without Prometheus or the sim
    # What /regressions may be asked about: the built-in components and the configured ones.
    regressions_components: tuple[str, ...] = BUILT_IN
    regressions_weekly: WeeklyRegressions | None = None  # None without a channel or history
    precursors: PrecursorHistory | None = None  # /hw-faults why; None without days of metrics
    precursors_config: PrecursorsConfig = field(default_factory=PrecursorsConfig)
    threads: ThreadMemory | None = None  # what each thread asked last (mentions and DMs)
    picker: Picker | None = None  # the model for unsure questions; None unless configured
