"""MEOWBOT_CONFIG's sections and the environment names on top of them, parsed and validated.

Parsing only: every object built from these lives in the composition root, bot/app.py.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from bot.alerts.config import AlertsConfig
from bot.backends.kubernetes_config import KubernetesConfig
from bot.config import ConfigError, Settings
from bot.highlights.config import HighlightsConfig
from bot.playground.config import PlaygroundConfig, parse_dirs, parse_endpoints
from bot.precursors.config import PrecursorsConfig
from bot.regressions.config import RegressionsConfig
from bot.triage.checks import HealthConfig
from bot.triage.owners import JobNoticesConfig
from bot.triage.stragglers import StragglerConfig
from bot.triage.topology import TopologyConfig
from bot.validation.config import ValidationConfig

M = TypeVar("M", bound=BaseModel)


def _section(settings: Settings, key: str, model: type[M]) -> M:
    """One section of MEOWBOT_CONFIG, validated, with its first error in a sentence."""
    return _validated(key, settings.extra.get(key, {}), model)


def _validated(key: str, raw: Any, model: type[M]) -> M:
    try:
        return model.model_validate(raw or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(
            f"MEOWBOT_CONFIG's {key}.{where} is wrong: {err['msg'].lower()}."
        ) from None


def topology_config(settings: Settings) -> TopologyConfig:
    return _section(settings, "topology", TopologyConfig)


def kubernetes_config(settings: Settings) -> KubernetesConfig:
    """`kubernetes:`: the node selector, the user rule and the context of the kubeconfig."""
    return _section(settings, "kubernetes", KubernetesConfig)


def health_config(settings: Settings) -> HealthConfig:
    return _section(settings, "health", HealthConfig)


def straggler_config(settings: Settings) -> StragglerConfig:
    return _section(settings, "job_slow", StragglerConfig)


def regressions_config(settings: Settings) -> RegressionsConfig:
    """`regressions:`: the info metric and label of each component /regressions reads."""
    return _section(settings, "regressions", RegressionsConfig)


def precursors_config(settings: Settings) -> PrecursorsConfig:
    """`precursors:`: what /hw-faults why compares (the candidates) and how."""
    return _section(settings, "precursors", PrecursorsConfig)


def validation_config(settings: Settings) -> ValidationConfig:
    """`validation:`: the suite a drained node passes before it resumes (default: DCGM -r 2
    and a single-node all-reduce)."""
    return _section(settings, "validation", ValidationConfig)


def alerts_config(settings: Settings) -> AlertsConfig:
    return AlertsConfig.from_settings(settings)


def playground_config(settings: Settings) -> PlaygroundConfig:
    """PLAYGROUND_ENDPOINTS and PLAYGROUND_CHECKPOINT_DIRS, with the YAML `playground:` keys."""
    raw: Any = settings.extra.get("playground", {}) or {}
    if not isinstance(raw, dict):
        raise ConfigError("The playground section of MEOWBOT_CONFIG must be a mapping.")
    data = {
        **raw,
        "endpoints": parse_endpoints(settings.playground_endpoints),
        "checkpoint_dirs": parse_dirs(settings.playground_checkpoint_dirs),
    }
    return _validated("playground", data, PlaygroundConfig)


def highlights_config(settings: Settings) -> HighlightsConfig:
    """`highlights:` of MEOWBOT_CONFIG, with the three environment names on top."""
    raw: Any = settings.extra.get("highlights", {}) or {}
    if not isinstance(raw, dict):
        raise ConfigError("MEOWBOT_CONFIG's highlights must be a mapping.")
    for name in ("emoji", "schedule", "digest_channel"):
        if name in raw:
            raise ConfigError(
                f"MEOWBOT_CONFIG's highlights.{name} is set in the environment instead "
                "(MEOWBOT_HIGHLIGHT_EMOJI, MEOWBOT_DIGEST_SCHEDULE, MEOWBOT_DIGEST_CHANNEL)."
            )
    merged = {
        **raw,
        "emoji": settings.highlight_emoji,
        "schedule": settings.digest_schedule,
        "digest_channel": settings.digest_channel,
    }
    return _validated("highlights", merged, HighlightsConfig)


def job_notices_config(settings: Settings) -> JobNoticesConfig:
    return _section(settings, "job_notices", JobNoticesConfig)


def user_mapping(settings: Settings) -> dict[str, str]:
    """`users:` in MEOWBOT_CONFIG: Slack user id -> cluster user name."""
    raw: Any = settings.extra.get("users", {}) or {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ConfigError("MEOWBOT_CONFIG's users must map Slack user ids to cluster user names.")
    return {str(k): v for k, v in raw.items()}
