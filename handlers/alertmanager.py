"""`POST /alertmanager`: Alertmanager's webhook (version 4) into the alert pipeline.

Answers 200 only once every alert of the post is stored: while Redis is down the answer is 503,
and Alertmanager sends the post again later, so nothing is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from aiohttp import web
from redis.exceptions import RedisError

from bot.alerts.webhook import MAX_BODY_BYTES, WebhookError, authorized, parse_webhook
from bot.deps import Deps

log = logging.getLogger(__name__)

ALERTMANAGER_PATH = "/alertmanager"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def receiver(deps: Deps) -> Handler:
    settings = deps.settings
    token = settings.alertmanager_webhook_token
    secret = token.get_secret_value() if token else None

    async def receive(request: web.Request) -> web.Response:
        if not authorized(request.headers.get("Authorization"), secret):
            deps.telemetry.webhooks.labels(outcome="unauthorized").inc()
            return web.json_response({"error": "unauthorized"}, status=401)
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return web.json_response({"error": "payload too large"}, status=413)
        body = await request.content.read(MAX_BODY_BYTES + 1)
        try:
            alerts = parse_webhook(body)
        except WebhookError as exc:
            deps.telemetry.webhooks.labels(outcome="bad").inc()
            return web.json_response({"error": str(exc)}, status=400)
        alerting = deps.alerting
        if alerting is None:
            return web.json_response({"error": "alerts need REDIS_URL: nothing stored"}, status=503)
        try:
            done = await alerting.receive(alerts, datetime.now(UTC))
        except (RedisError, OSError) as exc:
            # Alertmanager retries a 5xx; the alerts arrive once Redis is back.
            log.warning("webhook not stored", extra={"error": type(exc).__name__})
            deps.telemetry.webhooks.labels(outcome="store_down").inc()
            return web.json_response({"error": "state store unavailable, retry"}, status=503)
        deps.telemetry.webhooks.labels(outcome="stored").inc()
        return web.json_response({"alerts": done.alerts, "groups": len(done.groups)})

    return receive
