"""Wires everything: the Bolt AsyncApp, its aiohttp web application, the stores and the listeners.

The only module that knows all the parts. Everything here is created inside the running event
loop (`create_bot` is a coroutine): aiohttp sessions and the Socket Mode handler bind to the
loop they are made in, and making them at import breaks under a second loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.web_runner import AppRunner, TCPSite
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

import handlers
from bot.alerts.runtime import Alerting
from bot.authz import Authorizer
from bot.backends.alert_store import RedisAlertStore
from bot.backends.alertmanager import AlertmanagerClient
from bot.backends.checkpoint_dirs import scan_async
from bot.backends.highlight_store import RedisHighlightStore
from bot.backends.openai_compat import CheckpointServers
from bot.backends.playground_store import MemoryPlaygroundStore, RedisPlaygroundStore
from bot.backends.prometheus import PrometheusMetrics
from bot.backends.resume_store import MemoryResumes, RedisResumes
from bot.backends.slack_directory import SlackDigestPoster, SlackDirectory
from bot.backends.slack_poster import SlackPoster
from bot.backends.state import MemoryStore, RedisStore
from bot.backends.training_metrics import TrainingMetrics
from bot.config import Settings
from bot.deps import Deps
from bot.highlights.runtime import DigestRunner
from bot.highlights.service import Highlights
from bot.inflight import InFlight
from bot.playground.service import Playground
from bot.ports import StateStore
from bot.render.alerts import BlockKitAlertMessages
from bot.render.highlights import render_digest
from bot.telemetry import Telemetry
from bot.triage.service import Triage
from bot.usermap import UserMap
from bot.wiring import (
    alerts_config,
    highlights_config,
    make_triage,
    playground_config,
    user_mapping,
)
from handlers import alertmanager
from handlers import playground as playground_handlers
from handlers.alertmanager import ALERTMANAGER_PATH
from handlers.registry import Registered

log = logging.getLogger(__name__)

SLACK_EVENTS_PATH = "/slack/events"
SHUTDOWN_GRACE_S = 10.0
SLACK_HTTP_TIMEOUT_S = 10
LISTEN_BACKLOG = 1024


@dataclass
class Bot:
    settings: Settings
    deps: Deps
    app: AsyncApp
    web: web.Application
    registered: Registered
    session: aiohttp.ClientSession
    runner: AppRunner | None = None
    socket_handler: AsyncSocketModeHandler | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def client(self) -> AsyncWebClient:
        return self.app.client

    async def start_http(self, host: str = "0.0.0.0", port: int | None = None) -> int:
        """Serves the web app; returns the bound port (port 0 picks a free one)."""
        self.runner = AppRunner(self.web, handle_signals=False, access_log=None)
        await self.runner.setup()
        # Slack delivers in bursts; aiohttp's default backlog of 128 drops SYNs past it and
        # each dropped connect then waits a full second for its retransmit.
        site = TCPSite(
            self.runner, host, self.settings.port if port is None else port, backlog=LISTEN_BACKLOG
        )
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else int(port or 0)

    async def start_socket_mode(self) -> None:
        token = self.settings.slack_app_token
        assert token is not None
        self.socket_handler = AsyncSocketModeHandler(self.app, token.get_secret_value())
        await self.socket_handler.connect_async()  # type: ignore[no-untyped-call]

    def start_background(self, *, sweep: bool = True, digest: bool = True) -> None:
        """The alert notifier (and the passive sweep), the digest scheduler when a digest
        channel is set, the playground's watches: `meowbot run` starts them; a test may."""
        runner = self.deps.digest
        if digest and runner is not None and runner.hl.cfg.digest_targets():
            self.background.append(asyncio.create_task(runner.loop(self.stopping)))
        if self.deps.playground is not None:
            post = playground_handlers.watch_poster(self.client)
            self.background.append(
                asyncio.create_task(self.deps.playground.watcher(self.stopping, post))
            )
        alerting = self.deps.alerting
        if alerting is None:
            log.warning("no REDIS_URL: channel alerts are off")
            return
        self.background.append(asyncio.create_task(alerting.notifier(self.stopping)))
        if sweep:
            self.background.append(asyncio.create_task(alerting.sweeper(self.stopping)))

    async def close(self) -> None:
        """Stops taking requests, lets in-flight work finish (bounded), closes connections."""
        if self.socket_handler is not None:
            await self.socket_handler.disconnect_async()  # type: ignore[no-untyped-call]
            await self.socket_handler.close_async()  # type: ignore[no-untyped-call]
        if self.runner is not None:
            # Stop accepting first; answered requests may still have work running after ack.
            await self.runner.shutdown()
        finished = await self.deps.inflight.wait_idle(SHUTDOWN_GRACE_S)
        if not finished:
            log.warning(
                "shutdown with work still running", extra={"count": self.deps.inflight.count}
            )
        self.stopping.set()
        if self.background:
            await asyncio.wait(self.background, timeout=SHUTDOWN_GRACE_S)
        if self.deps.alerting is not None:
            await self.deps.alerting.release()  # the next replica leads at once, not in 5 s
            if self.deps.alerting.silencer is not None:
                await self.deps.alerting.silencer.close()
        if self.deps.playground is not None:
            await self.deps.playground.servers.close()
            if self.deps.playground.training is not None:
                await self.deps.playground.training.close()
        if self.runner is not None:
            await self.runner.cleanup()
        await self.deps.store.close()
        await self.session.close()


def make_store(settings: Settings) -> StateStore:
    if settings.redis_url:
        return RedisStore(settings.redis_url)
    return MemoryStore()


def make_alerting(
    settings: Settings, store: StateStore, client: AsyncWebClient, triage: Triage
) -> Alerting | None:
    if not isinstance(store, RedisStore):
        return None  # alerts are shared state: without Redis there is nothing to share
    silencer = AlertmanagerClient(settings.alertmanager_url) if settings.alertmanager_url else None
    return Alerting(
        RedisAlertStore(store.redis),
        SlackPoster(client),
        alerts_config(settings),
        triage,
        BlockKitAlertMessages(),
        silencer=silencer,
    )


def make_playground(settings: Settings, store: StateStore) -> Playground | None:
    cfg = playground_config(settings)
    if not cfg.configured:
        return None
    shared = (
        RedisPlaygroundStore(store.redis) if isinstance(store, RedisStore)
        else MemoryPlaygroundStore()
    )  # fmt: skip
    training = None
    if settings.prometheus_url and (cfg.loss_metric or cfg.tokens_metric):
        training = TrainingMetrics(PrometheusMetrics(settings.prometheus_url), cfg)
    return Playground(cfg, CheckpointServers(), shared, scan_async, training)


def make_highlights(
    settings: Settings, store: StateStore, client: AsyncWebClient
) -> tuple[Highlights, DigestRunner] | None:
    cfg = highlights_config(settings)  # checked even without Redis: a wrong value stops start-up
    if not isinstance(store, RedisStore):
        return None  # reactions are counted across replicas: without Redis there is no count
    directory = SlackDirectory(client, channel_cache_s=cfg.channel_cache_s)
    hl = Highlights(RedisHighlightStore(store.redis), directory, cfg)
    return hl, DigestRunner(hl, SlackDigestPoster(client), directory.team, render_digest)


def make_web_client(settings: Settings, session: aiohttp.ClientSession) -> AsyncWebClient:
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return AsyncWebClient(
        token=token,
        base_url=settings.slack_api_url,
        session=session,
        timeout=SLACK_HTTP_TIMEOUT_S,
        # slack_sdk honours Retry-After on 429 itself; our own tenacity retries are for our
        # backends only, never stacked on Slack's rate limits.
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


async def create_bot(settings: Settings, *, store: StateStore | None = None) -> Bot:
    session = aiohttp.ClientSession()
    client = make_web_client(settings, session)
    secret = settings.slack_signing_secret
    app = AsyncApp(
        name="meowbot",
        client=client,
        # Socket Mode envelopes carry no signature (Bolt skips the check for them), but the
        # HTTP endpoint is always verified: without a secret, a random one refuses every post.
        signing_secret=secret.get_secret_value() if secret else secrets.token_hex(32),
        process_before_response=False,
    )
    deps = Deps(
        settings=settings,
        store=store or make_store(settings),
        telemetry=Telemetry(),
        inflight=InFlight(),
        triage=make_triage(settings),
        authz=Authorizer(settings.admin_list),
        users=UserMap(user_mapping(settings)),
    )
    # Resumes are remembered where state is shared: an Xid that predates one is history.
    deps.triage.resumes = (
        RedisResumes(deps.store.redis) if isinstance(deps.store, RedisStore) else MemoryResumes()
    )
    deps.alerting = make_alerting(settings, deps.store, client, deps.triage)
    deps.playground = make_playground(settings, deps.store)
    highlights = make_highlights(settings, deps.store, client)
    if highlights is not None:
        deps.highlights, deps.digest = highlights
    registered = handlers.register(app, deps)
    web_app = app.web_app(path=SLACK_EVENTS_PATH, port=settings.port)
    web_app.router.add_post(ALERTMANAGER_PATH, alertmanager.receiver(deps))
    web_app.middlewares.append(_ack_timer(deps.telemetry))
    web_app.router.add_get("/healthz", _healthz(deps))
    web_app.router.add_get("/metrics", _metrics(deps))
    return Bot(settings, deps, app, web_app, registered, session)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _request_kind(body: bytes) -> str:
    if body.startswith(b"{"):
        return "event"
    if body.startswith(b"payload=") or b"&payload=" in body:
        return "interactive"
    if b"command=" in body:
        return "command"
    return "other"


def _ack_timer(telemetry: Telemetry) -> Any:
    @web.middleware
    async def timer(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != SLACK_EVENTS_PATH:
            return await handler(request)
        started = time.perf_counter()
        body = await request.read()  # cached by aiohttp: Bolt's adapter reads it again for free
        response = await handler(request)
        kind = _request_kind(body)
        telemetry.ack_latency.labels(kind=kind).observe(time.perf_counter() - started)
        if response.status == 404 and kind == "event":
            # An event nobody listens to will not be handled by a retry either.
            response.headers["X-Slack-No-Retry"] = "1"
        return response

    return timer


def _healthz(deps: Deps) -> Handler:
    async def healthz(_: web.Request) -> web.Response:
        backends = deps.settings.backends()
        try:
            await asyncio.wait_for(deps.store.ping(), 2.0)
            state = "ok" if deps.store.name == "redis" else "in-process stand-in (not shared)"
            healthy = True
        except Exception as exc:  # any failure to reach the store is "down", said in words
            state = f"down: {type(exc).__name__}"
            healthy = False
        body = {
            "ok": healthy,
            "mode": deps.settings.mode.value,
            "redis": state,
            "backends": backends,
        }
        return web.json_response(body, status=200 if healthy else 503)

    return healthz


def _metrics(deps: Deps) -> Handler:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=deps.telemetry.exposition(), content_type="text/plain")

    return metrics


async def serve(settings: Settings) -> None:
    """Runs the bot in HTTP or Socket Mode until SIGTERM or SIGINT, then shuts down gracefully."""
    bot = await create_bot(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    port = await bot.start_http()
    if settings.mode.value == "socket":
        await bot.start_socket_mode()
    bot.start_background()
    log.info(
        "meowbot is up",
        extra={"mode": settings.mode.value, "port": port, **settings.backends()},
    )
    await stop.wait()
    log.info("shutting down", extra={"in_flight": bot.deps.inflight.count})
    await bot.close()
