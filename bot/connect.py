"""How meowbot reaches its services from its settings: the Slack client, the scheduler
adapters (Slurm, Kubernetes or both) and the recording rules for Prometheus. Shared by the
composition root (bot/app.py) and `meowbot doctor` (bot/doctor/run.py), which checks the very
clients the bot would use and must not import the app (the app imports the handlers, and App
Home's setup check runs the doctor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.config_sections import (
    alerts_config,
    health_config,
    kubernetes_config,
    precursors_config,
    regressions_config,
    straggler_config,
)
from bot.ports import Scheduler

if TYPE_CHECKING:
    from bot.backends.kubernetes import KubernetesScheduler
    from bot.backends.prometheus_rules import RuleGroup

SLACK_HTTP_TIMEOUT_S = 10
# The backfill makes thousands of calls: it waits out many more 429s than a listener would.
BACKFILL_RATE_LIMIT_RETRIES = 20


def make_web_client(
    settings: Settings, session: aiohttp.ClientSession, *, patient: bool = False
) -> AsyncWebClient:
    """The bot token's client. `patient` is for the long by-hand jobs (the backfill): they wait
    out many more rate limits than a listener, which must answer while someone waits."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    # slack_sdk honours Retry-After on 429 itself; our own tenacity retries are for our
    # backends only, never stacked on Slack's rate limits.
    retry_handlers = (
        [
            AsyncConnectionErrorRetryHandler(max_retry_count=5),
            AsyncRateLimitErrorRetryHandler(max_retry_count=BACKFILL_RATE_LIMIT_RETRIES),
        ]
        if patient
        else [
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ]
    )
    return AsyncWebClient(
        token=token,
        base_url=settings.slack_api_url,
        session=session,
        timeout=SLACK_HTTP_TIMEOUT_S,
        retry_handlers=retry_handlers,
    )


def make_scheduler(settings: Settings) -> Scheduler | None:
    """Slurm (SLURM_REST_URL), Kubernetes (KUBECONFIG or in-cluster), or both at once: then a
    node in both is drained and resumed in both."""
    slurm = None
    if settings.slurm_rest_url:
        from bot.backends.slurm import SlurmRest

        token = settings.slurm_jwt.get_secret_value() if settings.slurm_jwt else ""
        slurm = SlurmRest(settings.slurm_rest_url, token=token, user=settings.slurm_user)
    if not settings.kubernetes:
        return slurm
    from bot.backends.kubernetes import KubernetesScheduler

    cfg = kubernetes_config(settings)
    kube = KubernetesScheduler(
        kubeconfig=settings.kubeconfig,
        context=cfg.context,
        in_cluster=settings.kubernetes_in_cluster,
        user_rule=cfg.user_rule(),
        node_selector=cfg.node_selector,
        page_size=cfg.page_size,
        timeout_s=cfg.timeout_s,
    )
    if slurm is None:
        return kube
    from bot.backends.both_schedulers import BothSchedulers

    return BothSchedulers(slurm, kube)


def kubernetes_of(scheduler: Scheduler | None) -> KubernetesScheduler | None:
    """The Kubernetes adapter inside the scheduler, when there is one (for Node labels)."""
    from bot.backends.both_schedulers import BothSchedulers
    from bot.backends.kubernetes import KubernetesScheduler

    if isinstance(scheduler, KubernetesScheduler):
        return scheduler
    if isinstance(scheduler, BothSchedulers):
        return scheduler.kube
    return None


def prometheus_rule_groups(
    settings: Settings, extra_windows: list[float], intervals: dict[str, int]
) -> list[RuleGroup]:
    """The recording rules for the checks as MEOWBOT_CONFIG configures them; `intervals` are
    rule_groups' `*_interval_s` keywords."""
    from bot.backends.prometheus_rules import rule_groups, windows_for

    health = health_config(settings)
    windows = windows_for(
        health, sweep_window_s=alerts_config(settings).sweep_window_s, extra=extra_windows
    )
    return rule_groups(
        health,
        straggler_config(settings),
        windows=windows,
        regressions=regressions_config(settings),
        precursors=precursors_config(settings),
        **intervals,
    )
