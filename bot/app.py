"""The composition root: the one place that knows all the parts and builds them from Settings.

Every entry builds through here and nowhere else: `meowbot run` (HTTP and Socket Mode, `serve`)
and the terminal shell (`create_bot`), the CLI verbs (`highlights_job` for `digest --now` and
`backfill-highlights`, `prometheus_rule_groups` for `prometheus-rules`), and the benchmarks
(`create_bot`, or `sim_triage` / `prometheus_triage` / `highlights_parts` over a fleet or a
store they set up themselves). One `make_*` function per part, so a new port is one more line
in the function that needs it.

What it leaves to others: bot/config_sections.py parses MEOWBOT_CONFIG's sections (no object
is built there), bot/server.py runs the assembled bot (serving, background loops, shutdown).

Everything is created inside the running event loop (`create_bot` is a coroutine): aiohttp
sessions and the Socket Mode handler bind to the loop they are made in, and making them at
import breaks under a second loop.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

import handlers
from bot.alerts.runtime import Alerting
from bot.ask.ports import Picker, ThreadMemory
from bot.authz import Authorizer
from bot.backends.alert_store import RedisAlertStore
from bot.backends.alertmanager import AlertmanagerClient
from bot.backends.ask_model import ModelPicker
from bot.backends.checkpoint_dirs import scan_async
from bot.backends.fault_history import MemoryFaultHistory, RedisFaultHistory
from bot.backends.highlight_store import RedisHighlightStore
from bot.backends.job_notice_store import MemoryJobNotices, RedisJobNotices
from bot.backends.openai_compat import CheckpointServers
from bot.backends.playground_store import MemoryPlaygroundStore, RedisPlaygroundStore
from bot.backends.prometheus import PrometheusInventory, PrometheusMetrics
from bot.backends.prometheus_history import PrometheusFleetHistory
from bot.backends.prometheus_precursors import PrometheusPrecursorHistory
from bot.backends.resume_store import MemoryResumes, RedisResumes
from bot.backends.retries import BackgroundRetries
from bot.backends.slack_directory import SlackDigestPoster, SlackDirectory
from bot.backends.slack_owners import SlackJobOwners
from bot.backends.slack_poster import SlackPoster
from bot.backends.state import MemoryStore, RedisStore
from bot.backends.thread_memory import MemoryThreadMemory, RedisThreadMemory
from bot.backends.training_metrics import TrainingMetrics
from bot.config import EXPECTS, ConfigError, Settings
from bot.config_sections import (
    alerts_config,
    health_config,
    highlights_config,
    job_notices_config,
    kubernetes_config,
    playground_config,
    precursors_config,
    regressions_config,
    straggler_config,
    topology_config,
    user_mapping,
    validation_config,
)
from bot.connect import kubernetes_of, make_scheduler, make_web_client
from bot.deps import (
    Deps,
    FaultsService,
    HighlightsService,
    JobSlowService,
    NodeHealthService,
    RegressionsService,
    ValidationService,
)
from bot.highlights.config import HighlightsConfig
from bot.highlights.runtime import DigestRunner
from bot.highlights.schedule import DigestSchedule
from bot.highlights.service import Highlights
from bot.inflight import InFlight, acks_counted
from bot.offload import Offload, favour_the_loop, keep_the_start
from bot.playground.config import Endpoint
from bot.playground.service import Playground
from bot.ports import Inventory, ResumeMemory, Scheduler, StateStore
from bot.precursors.ports import PrecursorHistory
from bot.regressions.ask import BUILT_IN
from bot.regressions.ports import FleetHistory
from bot.regressions.weekly import WeeklyRegressions
from bot.render.alerts import BlockKitAlertMessages
from bot.render.highlights import render_digest
from bot.render.job_notice import render_job_notice
from bot.server import (
    SLACK_EVENTS_PATH,
    Bot,
    ack_timer,
    healthz_endpoint,
    metrics_endpoint,
    slack_edge,
)
from bot.telemetry import Telemetry
from bot.triage.checks import HealthConfig
from bot.triage.owners import TellingScheduler
from bot.triage.ports import FaultHistory, JobNoticeLedger, Metrics
from bot.triage.service import Triage
from bot.triage.stragglers import StragglerConfig
from bot.triage.topology import Topology
from bot.usermap import UserMap
from handlers import alertmanager
from handlers import regressions as regressions_handlers
from handlers.alertmanager import ALERTMANAGER_PATH

if TYPE_CHECKING:
    from bot.backends.sim.fleet import SimFleet
    from bot.validation.config import ValidationConfig
    from bot.validation.ports import NodeTester

SIM_NEW_KERNEL = "5.15.0-113-generic"


# Slack's Web API ---------------------------------------------------------------------------------


# State -------------------------------------------------------------------------------------------


def make_store(settings: Settings) -> StateStore:
    if settings.redis_url:
        return RedisStore(settings.redis_url)
    return MemoryStore()


def make_job_notices(store: StateStore) -> JobNoticeLedger:
    # Shared where state is: three replicas processing one drain send one DM.
    return RedisJobNotices(store.redis) if isinstance(store, RedisStore) else MemoryJobNotices()


def make_resumes(store: StateStore) -> ResumeMemory:
    # Resumes are remembered where state is shared: an Xid that predates one is history.
    return RedisResumes(store.redis) if isinstance(store, RedisStore) else MemoryResumes()


def make_thread_memory(store: StateStore) -> ThreadMemory:
    # Shared where state is: a follow-up may reach another replica than the question did.
    return RedisThreadMemory(store.redis) if isinstance(store, RedisStore) else MemoryThreadMemory()


def make_picker(settings: Settings) -> Picker | None:
    """The model that picks a reading of an unsure question, when one is configured."""
    if not settings.ask_model_url or not settings.ask_model:
        return None
    endpoint = Endpoint(url=settings.ask_model_url.rstrip("/"), api_key=settings.ask_model_key)
    return ModelPicker(CheckpointServers(), endpoint, settings.ask_model)


def make_fault_history(store: StateStore, health: HealthConfig) -> FaultHistory:
    # Kept where state is shared: a fault seen through one replica counts in every other's.
    days, cap = health.repeat.keep_days, health.repeat.max_per_node
    if isinstance(store, RedisStore):
        return RedisFaultHistory(store.redis, keep_days=days, max_per_node=cap)
    return MemoryFaultHistory(keep_days=days, max_per_node=cap)


# Triage: the real cluster's adapters, or the simulated fleet ------------------------------------


def prometheus_triage(
    metrics: PrometheusMetrics,
    health: HealthConfig | None = None,
    stragglers: StragglerConfig | None = None,
    *,
    scheduler: Scheduler | None = None,
    topology: Topology | None = None,
    cpu: Offload | None = None,
) -> Triage:
    return Triage(
        metrics,
        PrometheusInventory(metrics, topology),
        scheduler,
        health or HealthConfig(),
        stragglers or StragglerConfig(),
        cpu=cpu or Offload(),
    )


def sim_triage(
    fleet: SimFleet,
    health: HealthConfig | None = None,
    stragglers: StragglerConfig | None = None,
    *,
    scheduler: Scheduler | None = None,
    sim_scheduler: bool = False,
    live: bool = False,
    cpu: Offload | None = None,
) -> Triage:
    """Triage over a simulated fleet. `scheduler` names a real one; `sim_scheduler` gives the
    fleet's own jobs instead (/job-slow needs a scheduler); `live` lets the fleet's clock run;
    `cpu` is the worker pool (a new one when not given)."""
    from bot.backends.sim.metrics import SimInventory, SimMetrics
    from bot.backends.sim.scheduler import SimScheduler

    if scheduler is None and sim_scheduler:
        scheduler = SimScheduler(fleet)
    cpu = cpu or Offload()  # one bound for the simulation and the evaluation of what it answers
    return Triage(
        SimMetrics(fleet, live=live, cpu=cpu),
        SimInventory(fleet),
        scheduler,
        health or HealthConfig(),
        stragglers or StragglerConfig(),
        cpu=cpu,
    )


@dataclass(frozen=True)
class Sources:
    """Where the bot reads the cluster: metrics (None with a real scheduler and no metrics
    source), the nodes, and the scheduler (None when there is none)."""

    metrics: Metrics | None
    inventory: Inventory
    scheduler: Scheduler | None


def make_sources(settings: Settings, cpu: Offload) -> Sources:
    """Prometheus' metrics when PROMETHEUS_URL is set; else, with a real scheduler, its nodes
    and no metrics (health is said not checked); the simulated fleet only when no cluster
    source is configured at all (Settings refuses MEOWBOT_FLEET beside one). `cpu` is the
    bot's one worker pool: the simulation computes on it."""
    scheduler = make_scheduler(settings)
    if not settings.prometheus_url and scheduler is None:
        return _sim_sources(settings, cpu)
    topology = Topology(topology_config(settings))
    metrics: Metrics | None = None
    inventory: Inventory
    if settings.prometheus_url:
        health = health_config(settings)
        prometheus = PrometheusMetrics(
            settings.prometheus_url, node_label=health.node_label, recorded=health.recorded_rules
        )
        metrics, inventory = prometheus, PrometheusInventory(prometheus, topology)
    else:
        from bot.backends.scheduler_inventory import SchedulerInventory

        assert scheduler is not None
        inventory = SchedulerInventory(scheduler, topology)
    kube = kubernetes_of(scheduler)
    if kube is not None:
        from bot.backends.kubernetes_inventory import KubernetesPlaces

        cfg = kubernetes_config(settings)
        inventory = KubernetesPlaces(
            inventory, kube, rack_labels=cfg.rack_labels, switch_labels=cfg.switch_labels
        )
    return Sources(metrics, inventory, scheduler)


def _sim_sources(settings: Settings, cpu: Offload) -> Sources:
    from bot.backends.sim.fleet import SimFleet
    from bot.backends.sim.metrics import SimInventory, SimMetrics
    from bot.backends.sim.scheduler import SimScheduler

    fleet = SimFleet(settings.sim_nodes or 512, seed=settings.seed)
    # The fleet has a week behind it, as a real one would: a kernel that rolled out over a day
    # five days ago made synchronous steps 2 % slower (what /regressions finds). It is done
    # everywhere, so no node drifts now, and /job-slow's 48 h never sees it move.
    fleet.add_rollout(
        "kernel",
        SIM_NEW_KERNEL,
        start=fleet.now - timedelta(days=5),
        duration=timedelta(hours=24),
        effect=0.02,
    )
    # The simulated fleet's own jobs: no real scheduler is configured beside it.
    return Sources(SimMetrics(fleet, live=True, cpu=cpu), SimInventory(fleet), SimScheduler(fleet))


def make_triage(settings: Settings, cpu: Offload | None = None) -> Triage:
    """The triage over the sources the settings name (tests and tools; the bot builds its
    own in `make_deps`, with the scheduler that tells job owners)."""
    cpu = cpu or Offload()
    src = make_sources(settings, cpu)
    return Triage(
        src.metrics,
        src.inventory,
        src.scheduler,
        health_config(settings),
        straggler_config(settings),
        cpu=cpu,
    )


def make_regressions_history(settings: Settings, triage: Triage) -> FleetHistory | None:
    """What /regressions reads: the Prometheus the triage reads (its info metrics and the
    recorded pace), or the simulated fleet's own history when the fleet is simulated."""
    from bot.backends.sim.metrics import SimMetrics

    if isinstance(triage.metrics, PrometheusMetrics):
        return PrometheusFleetHistory(
            triage.metrics, regressions_config(settings), triage.stragglers
        )
    if isinstance(triage.metrics, SimMetrics):
        from bot.backends.sim.history import SimFleetHistory

        regressions_config(settings)  # checked all the same: a wrong value stops start-up
        return SimFleetHistory(triage.metrics.fleet)
    return None


def make_precursor_history(settings: Settings, triage: Triage) -> PrecursorHistory | None:
    """What /hw-faults why reads: the Prometheus the triage reads, or, when the fleet is
    simulated, its week of metrics with a precursor hidden before its unexpected reboots."""
    from bot.backends.sim.metrics import SimMetrics

    cfg = precursors_config(settings)  # checked either way: a wrong value stops start-up
    if isinstance(triage.metrics, PrometheusMetrics):
        return PrometheusPrecursorHistory(triage.metrics, cfg)
    if isinstance(triage.metrics, SimMetrics):
        from bot.backends.sim.hidden_precursors import fleet_world
        from bot.backends.sim.precursor_history import SimPrecursorHistory

        return SimPrecursorHistory(fleet_world(triage.metrics.fleet))
    return None


# Channel alerts, the playground, highlights ------------------------------------------------------


def make_alerting(
    settings: Settings,
    store: StateStore,
    client: AsyncWebClient,
    triage: Triage,
    inventory: Inventory,
    scheduler: Scheduler | None,
    cpu: Offload,
) -> Alerting | None:
    """Given the triage whole (the sweep judges the fleet with it) and, on their own, the
    inventory, the scheduler (as the owners are told through it) and the worker pool."""
    if not isinstance(store, RedisStore):
        return None  # alerts are shared state: without Redis there is nothing to share
    silencer = AlertmanagerClient(settings.alertmanager_url) if settings.alertmanager_url else None
    return Alerting(
        RedisAlertStore(store.redis, wait_replicas=store.wait_replicas, cpu=cpu),
        SlackPoster(client),
        alerts_config(settings),
        triage,
        BlockKitAlertMessages(),
        inventory=inventory,
        scheduler=scheduler,
        cpu=cpu,
        silencer=silencer,
    )


def make_playground(settings: Settings, store: StateStore) -> Playground | None:
    cfg = playground_config(settings)
    if not cfg.configured:
        return None
    shared = (
        RedisPlaygroundStore(store.redis)
        if isinstance(store, RedisStore)
        else MemoryPlaygroundStore()
    )
    training = None
    if settings.prometheus_url and (cfg.loss_metric or cfg.tokens_metric):
        training = TrainingMetrics(PrometheusMetrics(settings.prometheus_url), cfg)
    return Playground(cfg, CheckpointServers(), shared, scan_async, training)


@dataclass
class HighlightsParts:
    """What the listeners, the digest scheduler and the by-hand verbs use of highlights."""

    hl: Highlights
    digest: DigestRunner
    directory: SlackDirectory
    store: RedisHighlightStore


def highlights_parts(
    store: RedisHighlightStore,
    client: AsyncWebClient,
    cfg: HighlightsConfig,
    *,
    clock: Callable[[], datetime] | None = None,
) -> HighlightsParts:
    directory = SlackDirectory(client, channel_cache_s=cfg.channel_cache_s)
    hl = (
        Highlights(store, directory, cfg)
        if clock is None
        else Highlights(store, directory, cfg, clock=clock)
    )
    digest = DigestRunner(hl, SlackDigestPoster(client), directory.team, render_digest)
    return HighlightsParts(hl, digest, directory, store)


def make_highlights(
    settings: Settings, store: StateStore, client: AsyncWebClient
) -> HighlightsParts | None:
    cfg = highlights_config(settings)  # checked even without Redis: a wrong value stops start-up
    if not isinstance(store, RedisStore):
        return None  # reactions are counted across replicas: without Redis there is no count
    hl_store = RedisHighlightStore(store.redis, wait_replicas=store.wait_replicas)
    return highlights_parts(hl_store, client, cfg)


# The listeners' dependencies and the bot -------------------------------------------------------


def make_weekly_regressions(
    settings: Settings, store: StateStore, client: AsyncWebClient, regressions: RegressionsService
) -> WeeklyRegressions | None:
    """The weekly /regressions post, when a channel is set and the fleet's history is read."""
    if settings.regressions_channel is None or regressions.history is None:
        return None
    cpu = regressions.cpu
    return WeeklyRegressions(
        history=regressions.history,
        components=regressions.components,
        schedule=DigestSchedule.parse(settings.regressions_schedule),
        claims=store,
        post=regressions_handlers.weekly_poster(client, settings.regressions_channel, cpu),
        compute=cpu.run,
    )


def make_validation(
    settings: Settings,
    store: StateStore,
    raw: Scheduler | None,
    scheduler: Scheduler | None,
    authz: Authorizer,
) -> ValidationService | None:
    """Testing drained nodes, when `validation.output_dir` is set and the scheduler can run
    the suite: Slurm (its reservations and jobs), Kubernetes with `validation.kubernetes` (its
    taints and Jobs), or both. `raw` is the scheduler as built, `scheduler` the one every
    action goes through (read back with it)."""
    cfg = validation_config(settings)  # checked either way: a wrong value stops start-up
    tester = _tester(cfg, raw)
    if tester is None or scheduler is None:
        return None
    from bot.backends.validation_store import MemoryValidationLedger, RedisValidationLedger

    ledger = (
        RedisValidationLedger(store.redis)
        if isinstance(store, RedisStore)
        else MemoryValidationLedger()
    )
    return ValidationService(tester, scheduler, cfg, ledger, authz)


def _tester(cfg: ValidationConfig, raw: Scheduler | None) -> NodeTester | None:
    """The port that runs the suite through `raw`'s scheduler, None where none can."""
    from bot.backends.both_schedulers import BothSchedulers
    from bot.backends.both_validation import BothTester
    from bot.backends.kubernetes import KubernetesScheduler
    from bot.backends.kubernetes_validation import KubeTester
    from bot.backends.slurm import SlurmRest
    from bot.backends.slurm_validation import SlurmTester

    out, path = cfg.output_dir, cfg.tools_path
    if out is None:
        return None
    if isinstance(raw, SlurmRest):
        return SlurmTester(raw, out, extra_path=path)
    if isinstance(raw, KubernetesScheduler) and cfg.kubernetes is not None:
        return KubeTester(raw, out, cfg.kubernetes, extra_path=path)
    if isinstance(raw, BothSchedulers):
        return BothTester(
            SlurmTester(raw.slurm, out, extra_path=path),
            KubeTester(raw.kube, out, cfg.kubernetes, extra_path=path),
        )
    return None


def tell_owners(
    settings: Settings, store: StateStore, client: AsyncWebClient, scheduler: Scheduler | None
) -> tuple[Scheduler | None, JobNoticeLedger | None]:
    """The scheduler every drain goes through, wrapped so that none can forget to tell the
    jobs' owners (when they are told), and the ledger of what they were told."""
    if scheduler is None or not job_notices_config(settings).enabled:
        return scheduler, None
    notices = job_notices_config(settings)
    ledger = make_job_notices(store)
    owners = SlackJobOwners(
        client, render_job_notice, mapping=user_mapping(settings), email_domain=notices.email_domain
    )
    return TellingScheduler(scheduler, owners, ledger, BackgroundRetries()), ledger


def make_deps(settings: Settings, store: StateStore, client: AsyncWebClient) -> Deps:
    """Builds the sources, the scheduler and the worker pool once, and hands each service
    what it uses of them."""
    inflight = InFlight()
    # The one worker pool, for the triage, the alerts and the charts: its jobs wait for the
    # acks on their way (bot/inflight.py).
    cpu = Offload()
    cpu.before = inflight.acks_out
    src = make_sources(settings, cpu)
    scheduler, ledger = tell_owners(settings, store, client, src.scheduler)
    health = health_config(settings)
    triage = Triage(
        src.metrics,
        src.inventory,
        scheduler,
        health,
        straggler_config(settings),
        resumes=make_resumes(store),
        history=make_fault_history(store, health),
        cpu=cpu,
    )
    users = UserMap(user_mapping(settings))
    history = make_regressions_history(settings, triage)
    regressions = RegressionsService(history, cpu)
    if history is not None:
        regressions.components = tuple(dict.fromkeys((*BUILT_IN, *history.components())))
    regressions.weekly = make_weekly_regressions(settings, store, client, regressions)
    highlights = make_highlights(settings, store, client)
    authz = Authorizer(settings.admin_list)
    validation = make_validation(settings, store, src.scheduler, scheduler, authz)
    if validation is not None:  # failures count where repeat offenders are found
        validation.history, validation.repeat = triage.history, health.repeat
        validation.channel = settings.alert_channel
    return Deps(
        settings=settings,
        store=store,
        telemetry=Telemetry(),
        inflight=inflight,
        cpu=cpu,
        triage=triage,
        authz=authz,
        users=users,
        node_health=NodeHealthService(triage, validation),
        validation=validation,
        faults=FaultsService(
            triage, cpu, make_precursor_history(settings, triage), precursors_config(settings)
        ),
        job_slow=JobSlowService(triage, users, cpu),
        regressions=regressions,
        highlights=HighlightsService(cpu, highlights.hl if highlights else None),
        # The scheduler it is given is the wrapped one: the alerts' drains tell the owners too.
        alerting=make_alerting(settings, store, client, triage, src.inventory, scheduler, cpu),
        playground=make_playground(settings, store),
        job_notices=ledger,
        digest=highlights.digest if highlights else None,
        threads=make_thread_memory(store),
        picker=make_picker(settings),
    )


def signing_secret(settings: Settings) -> str:
    """Socket Mode envelopes carry no signature (Bolt skips the check for them), but the HTTP
    endpoint is always verified: without a secret, a random one refuses every post."""
    secret = settings.slack_signing_secret
    return secret.get_secret_value() if secret else secrets.token_hex(32)


def make_bolt_app(client: AsyncWebClient, secret: str) -> AsyncApp:
    return AsyncApp(
        name="meowbot",
        client=client,
        signing_secret=secret,
        process_before_response=False,
    )


async def create_bot(settings: Settings, *, store: StateStore | None = None) -> Bot:
    """The whole bot, ready to serve: `meowbot run`, the shell, the tests and the benchmarks."""
    favour_the_loop()
    session = aiohttp.ClientSession()
    client = make_web_client(settings, session)
    secret = signing_secret(settings)
    app = make_bolt_app(client, secret)
    deps = make_deps(settings, store or make_store(settings), client)
    registered = handlers.register(app, deps)
    web_app = app.web_app(path=SLACK_EVENTS_PATH, port=settings.port)
    web_app.router.add_post(ALERTMANAGER_PATH, alertmanager.receiver(deps))
    web_app.middlewares.append(ack_timer(deps.telemetry))  # outermost: times the edge too
    web_app.middlewares.append(slack_edge(secret))
    web_app.middlewares.append(acks_counted(deps.inflight, SLACK_EVENTS_PATH))
    web_app.router.add_get("/healthz", healthz_endpoint(deps))
    web_app.router.add_get("/metrics", metrics_endpoint(deps))
    return Bot(settings, deps, app, web_app, registered, session)


async def serve(settings: Settings) -> None:
    """Runs the bot in HTTP or Socket Mode until SIGTERM or SIGINT, then shuts down gracefully."""
    bot = await create_bot(settings)
    keep_the_start()
    await bot.run()


# The CLI verbs -----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def highlights_job(
    settings: Settings, *, patient: bool = False
) -> AsyncIterator[HighlightsParts]:
    """Highlights' parts as the running bot has them (the bot token's client, Redis, the Slack
    directory) for one by-hand job (`digest --now`, `backfill-highlights`); closed after it."""
    if settings.slack_bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN must be set (a bot token starting with xoxb-).")
    if not settings.redis_url:
        raise ConfigError(f"REDIS_URL must be set ({EXPECTS['REDIS_URL']}).")
    cfg = highlights_config(settings)
    redis = RedisStore(settings.redis_url)
    async with aiohttp.ClientSession() as session:
        client = make_web_client(settings, session, patient=patient)
        try:
            hl_store = RedisHighlightStore(redis.redis, wait_replicas=redis.wait_replicas)
            yield highlights_parts(hl_store, client, cfg)
        finally:
            await redis.close()
