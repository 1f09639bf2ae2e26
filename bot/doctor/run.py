"""`meowbot doctor`: every configured part checked against what meowbot needs, one table of
parts, each part's lines in the order a person installing meowbot meets them."""

from __future__ import annotations

from datetime import UTC, datetime

import aiohttp

from bot.config import Settings
from bot.config_sections import alerts_config, health_config
from bot.doctor.kubernetes_part import kubernetes_lines
from bot.doctor.prometheus_part import prometheus_lines
from bot.doctor.redis_part import redis_lines
from bot.doctor.report import Line, Status
from bot.doctor.services_part import alertmanager_lines, playground_lines, schedule_lines
from bot.doctor.slack_part import slack_lines
from bot.triage.checks import enabled_checks


def _slurm_line(settings: Settings) -> Line:
    """Slurm is not checked here: said, so that silence is not read as a pass."""
    if settings.slurm_rest_url:
        return Line(
            "Slurm", "configured", Status.UNCHECKED, "SLURM_REST_URL is set; not checked here"
        )
    return Line("Slurm", "configured", Status.OFF, "SLURM_REST_URL is not set")


async def doctor(settings: Settings) -> list[Line]:
    from bot.app import kubernetes_of, make_scheduler, make_web_client, prometheus_rule_groups

    health = health_config(settings)
    alerts = alerts_config(settings)
    async with aiohttp.ClientSession() as session:
        client = make_web_client(settings, session) if settings.slack_bot_token else None
        lines = await slack_lines(settings, client)
    lines += await redis_lines(settings.redis_url)
    lines += await prometheus_lines(
        settings.prometheus_url,
        health,
        enabled_checks(health),
        prometheus_rule_groups(settings, [], {}),
        settings.sweep_interval_s,
        float(alerts.sweep_window_s or health.window_s),
    )
    lines += await alertmanager_lines(
        settings.alertmanager_url, settings.alertmanager_webhook_token is not None
    )
    lines += await playground_lines(settings.playground_endpoints)
    lines += schedule_lines(settings, datetime.now(UTC))
    kube = kubernetes_of(make_scheduler(settings)) if settings.kubernetes else None
    try:
        lines += await kubernetes_lines(kube)
    finally:
        if kube is not None:
            await kube.close()
    return [*lines, _slurm_line(settings)]
