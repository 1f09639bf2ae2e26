"""The running bot: Slack over HTTP or Socket Mode, the background loops, a graceful shutdown,
and the aiohttp endpoints beside Bolt's (/healthz, /metrics, the ack timer).

It assembles no part: bot/app.py, the composition root, hands it every one; what is made here
is only what serving makes (the listening socket, the Socket Mode connection, the tasks).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
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
from slack_sdk.web.async_client import AsyncWebClient

from bot import slack_payloads
from bot.config import Settings
from bot.deps import Deps
from bot.telemetry import Telemetry
from handlers import playground as playground_handlers
from handlers import validation as validation_handlers
from handlers.registry import Registered

log = logging.getLogger(__name__)

SLACK_EVENTS_PATH = "/slack/events"
SHUTDOWN_GRACE_S = 10.0
HANDOVER_S = 5.0  # for the stopped work to unwind, then again for its askers to be told
LISTEN_BACKLOG = 1024
SIGNATURE_MAX_AGE_S = 5 * 60  # as Slack documents and Bolt checks


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
        if digest and self.deps.regressions.weekly is not None:
            weekly = self.deps.regressions.weekly
            self.background.append(asyncio.create_task(weekly.loop(self.stopping)))
        if self.deps.playground is not None:
            post = playground_handlers.watch_poster(self.client)
            self.background.append(
                asyncio.create_task(self.deps.playground.watcher(self.stopping, post))
            )
        if self.deps.validation is not None:
            taking_up = validation_handlers.taking_up(
                self.deps.validation, self.client, self.stopping
            )
            self.background.append(asyncio.create_task(taking_up))
            if self.deps.validation.cfg.on_repair and not self.deps.validation.channel:
                log.warning("validation.on_repair needs MEOWBOT_ALERT_CHANNEL: not testing")
            elif self.deps.validation.cfg.on_repair:
                repairs = validation_handlers.on_repair(
                    self.deps.validation, self.client, self.stopping
                )
                self.background.append(asyncio.create_task(repairs))
        alerting = self.deps.alerting
        if alerting is None:
            log.warning("no REDIS_URL: channel alerts are off")
            return
        self.background.append(asyncio.create_task(alerting.notifier(self.stopping)))
        if sweep:
            self.background.append(asyncio.create_task(alerting.sweeper(self.stopping)))

    async def run(self) -> None:
        """Serves (HTTP, and Socket Mode when configured) with the background loops until
        SIGTERM or SIGINT, then closes gracefully: what `meowbot run` does once assembled."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        port = await self.start_http()
        if self.settings.mode.value == "socket":
            await self.start_socket_mode()
        self.start_background()
        log.info(
            "meowbot is up",
            extra={"mode": self.settings.mode.value, "port": port, **self.settings.backends()},
        )
        await stop.wait()
        log.info("shutting down", extra={"in_flight": self.deps.inflight.count})
        await self.close()

    async def close(self) -> None:
        """Stops taking requests, lets in-flight work finish (bounded), hands over what did not
        finish (stopped, its asker told to run it again), closes connections."""
        if self.socket_handler is not None:
            await self.socket_handler.disconnect_async()  # type: ignore[no-untyped-call]
            await self.socket_handler.close_async()  # type: ignore[no-untyped-call]
        if self.runner is not None:
            # Stop accepting first; answered requests may still have work running after ack.
            await self.runner.shutdown()
        finished = await self.deps.inflight.wait_idle(SHUTDOWN_GRACE_S)
        if not finished:
            # Left running, the work would be cut off mid-way when the loop ends, its asker
            # left with silence: stop it now, while its answer can still say so.
            stopped, told = await self.deps.inflight.hand_over(HANDOVER_S)
            log.warning("shutdown stopped unfinished work", extra={"count": stopped, "told": told})
        self.stopping.set()
        if self.background:
            await asyncio.wait(self.background, timeout=SHUTDOWN_GRACE_S)
        if self.deps.validation is not None:
            # Runs in flight stay recorded, their nodes held: a replica or the next start
            # takes them up once their lease runs out.
            for task in list(self.deps.validation.tasks):
                task.cancel()
        if self.deps.alerting is not None:
            await self.deps.alerting.release()  # the next replica leads at once, not in 5 s
            if self.deps.alerting.silencer is not None:
                await self.deps.alerting.silencer.close()
        if self.deps.playground is not None:
            await self.deps.playground.servers.close()
            if self.deps.playground.training is not None:
                await self.deps.playground.training.close()
        if self.deps.picker is not None:
            await self.deps.picker.close()
        scheduler = self.deps.triage.scheduler
        if scheduler is not None:
            # Its HTTP session closed, and DMs still waiting to be tried again dropped: their
            # claims are free, the next drain tells.
            await scheduler.close()
        if self.runner is not None:
            await self.runner.cleanup()
        await self.deps.store.close()
        await self.session.close()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _request_kind(body: bytes) -> str:
    if body.startswith(b"{"):
        return "event"
    if body.startswith(b"payload=") or b"&payload=" in body:
        return "interactive"
    if b"command=" in body:
        return "command"
    return "other"


def ack_timer(telemetry: Telemetry) -> Any:
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


def slack_edge(signing_secret: str) -> Any:
    """Answers at the edge what Bolt would answer with a traceback and a 500 (which Slack
    retries): the signature is verified first, on the raw bytes, so nothing unsigned is parsed
    (Bolt verifies it again behind this; the HMAC of a few kilobytes costs microseconds);
    then a body that does not parse, or lacks what Slack always sends, gets a 400 (an event a
    200: see bot/slack_payloads.py) and one log line, and reaches no listener."""
    key = signing_secret.encode()

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != SLACK_EVENTS_PATH or request.method != "POST":
            return await handler(request)
        raw = await request.read()  # cached by aiohttp: Bolt's adapter reads it again for free
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not signed(key, raw, stamp, signature, time.time()):
            return web.json_response({"error": "invalid request"}, status=401)
        parsed = slack_payloads.parse(raw, request.content_type)
        refusal = (
            parsed if isinstance(parsed, slack_payloads.Refusal) else slack_payloads.check(parsed)
        )
        if refusal is None:
            return await handler(request)
        log.warning(
            "slack request refused",
            extra={"reason": refusal.reason, "kind": refusal.kind, "status": refusal.status},
        )
        # The same body would fail the same way however often Slack sent it.
        return web.Response(status=refusal.status, headers={"X-Slack-No-Retry": "1"})

    return edge


def signed(key: bytes, raw: bytes, stamp: str, signature: str, now: float) -> bool:
    """Slack's v0 signature over the raw bytes, at most 5 minutes old. slack_sdk's
    SignatureVerifier decodes the body as UTF-8 first, so it cannot tell a signed body that is
    not UTF-8 (a 400) from a forged one (a 401)."""
    if not (stamp.isascii() and stamp.isdigit()) or abs(now - int(stamp)) > SIGNATURE_MAX_AGE_S:
        return False
    mac = hmac.new(key, b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256)
    return hmac.compare_digest("v0=" + mac.hexdigest(), signature)


def healthz_endpoint(deps: Deps) -> Handler:
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


def metrics_endpoint(deps: Deps) -> Handler:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=deps.telemetry.exposition(), content_type="text/plain")

    return metrics
