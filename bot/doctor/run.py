"""`meowbot doctor`: every configured part checked against what meowbot needs, one table of
parts, each part's lines in the order a person installing meowbot meets them."""

from __future__ import annotations

from datetime import UTC, datetime

import aiohttp

from bot.config import Settings
from bot.config_sections import (
    alerts_config,
    health_config,
    regressions_config,
    straggler_config,
)
from bot.connect import kubernetes_of, make_scheduler, make_web_client, prometheus_rule_groups
from bot.doctor.kubernetes_part import kubernetes_lines
from bot.doctor.prometheus_part import history_reads, prometheus_lines
from bot.doctor.redis_part import redis_lines
from bot.doctor.report import Line
from bot.doctor.services_part import alertmanager_lines, playground_lines, schedule_lines
from bot.doctor.slack_part import slack_lines
from bot.doctor.slurm_part import slurm_lines
from bot.ports import Scheduler
from bot.triage.checks import enabled_checks


def _schedulers(settings: Settings) -> tuple[Scheduler | None, str | None]:
    """The bot's own scheduler adapters, built as `meowbot run` builds them; and why Slurm's
    could not be (no SLURM_JWT), Kubernetes' then built alone."""
    try:
        return make_scheduler(settings), None
    except ValueError as exc:  # SlurmRest's refusal of the token or user
        alone = settings.model_copy(update={"slurm_rest_url": None})
        return make_scheduler(alone), str(exc)


async def doctor(settings: Settings) -> list[Line]:
    from bot.backends.both_schedulers import BothSchedulers
    from bot.backends.slurm import SlurmRest

    health = health_config(settings)
    alerts = alerts_config(settings)
    async with aiohttp.ClientSession() as session:
        client = make_web_client(settings, session) if settings.slack_bot_token else None
        lines = await slack_lines(settings, client)
    lines += await redis_lines(settings.redis_url)
    groups = prometheus_rule_groups(settings, [], {})
    lines += await prometheus_lines(
        settings.prometheus_url,
        health,
        enabled_checks(health),
        groups,
        settings.sweep_interval_s,
        float(alerts.sweep_window_s or health.window_s),
        history_reads(
            groups, regressions_config(settings), straggler_config(settings), health.node_label
        ),
    )
    lines += await alertmanager_lines(
        settings.alertmanager_url, settings.alertmanager_webhook_token is not None
    )
    lines += await playground_lines(settings.playground_endpoints)
    lines += schedule_lines(settings, datetime.now(UTC))
    scheduler, slurm_problem = _schedulers(settings)
    kube = kubernetes_of(scheduler)
    slurm = scheduler.slurm if isinstance(scheduler, BothSchedulers) else scheduler
    try:
        lines += await kubernetes_lines(kube)
        return lines + await slurm_lines(
            slurm if isinstance(slurm, SlurmRest) else None, slurm_problem
        )
    finally:
        if kube is not None:
            await kube.close()
        if isinstance(slurm, SlurmRest):
            await slurm.close()
