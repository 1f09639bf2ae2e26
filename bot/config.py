"""Configuration: one name per setting, read from the environment and an optional `.env`.

Every variable of docs/configuration.md is a field here. A wrong value stops start-up with one
sentence naming the variable and what it expects (`ConfigError`), never a pydantic dump.
Secrets are `SecretStr`, so neither `repr` nor a log line can show them.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.highlights.rules import emoji_list
from bot.highlights.schedule import DigestSchedule
from bot.redis_url import BadRedisUrl, redacted, sentinel_address

SLACK_DEFAULT_API_URL = "https://slack.com/api/"
MAX_SIM_NODES = 50_000
_FLEET_RE = re.compile(r"^sim(?::(\d+))?$")


class ConfigError(Exception):
    """A setting is wrong; the message is one sentence for the person starting the bot."""


class SimBesideCluster(ValueError):
    """MEOWBOT_FLEET set beside a real cluster's variables: its sentence is the error."""

    def __init__(self, real: tuple[str, ...]) -> None:
        self.real = real
        super().__init__(
            f"MEOWBOT_FLEET runs the simulated fleet only when no cluster is configured, and "
            f"{' and '.join(real)} {'is' if len(real) == 1 else 'are'} set: unset MEOWBOT_FLEET "
            "to use the cluster (the simulator never stands in beside it)."
        )


class Mode(StrEnum):
    SOCKET = "socket"
    HTTP = "http"
    SHELL = "shell"


# What each variable expects, said once: used for the one-sentence start-up error.
EXPECTS: dict[str, str] = {
    "SLACK_BOT_TOKEN": "a bot token starting with xoxb-",
    "SLACK_APP_TOKEN": "an app-level token starting with xapp-",
    "SLACK_SIGNING_SECRET": "the app's signing secret (a non-empty string)",
    "SLACK_API_URL": "an http(s) URL ending in /api/",
    "PORT": "an integer between 1 and 65535",
    "REDIS_URL": (
        "a URL like redis://host:6379/0 or redis+sentinel://host:26379,host2:26379/mymaster/0"
    ),
    "PROMETHEUS_URL": "an http(s) URL like http://prometheus:9090",
    "ALERTMANAGER_URL": "an http(s) URL like http://alertmanager:9093",
    "ALERTMANAGER_WEBHOOK_TOKEN": "a non-empty bearer token",
    "SLURM_REST_URL": "an http(s) URL like http://slurmrestd:6820",
    "SLURM_JWT": "a Slurm JWT (scontrol token)",
    "SLURM_USER": "the Slurm user name sent with the token",
    "KUBECONFIG": "the path of a kubeconfig file (or several, separated by ':')",
    "MEOWBOT_KUBERNETES_IN_CLUSTER": "true or false",
    "PLAYGROUND_ENDPOINTS": "base URLs separated by ';', each optionally followed by ',key=...'",
    "PLAYGROUND_CHECKPOINT_DIRS": "folders separated by ':' or ','",
    "MEOWBOT_ASK_MODEL_URL": "an OpenAI-compatible base URL ending in /v1",
    "MEOWBOT_ASK_MODEL": "the model id the server serves",
    "MEOWBOT_ASK_MODEL_KEY": "an API key",
    "MEOWBOT_ASK_MODEL_DEADLINE": "seconds between 0.5 and 30",
    "MEOWBOT_FLEET": f"'sim' or 'sim:N' with N between 1 and {MAX_SIM_NODES}",
    "MEOWBOT_SEED": "an integer",
    "MEOWBOT_CONFIG": "the path of a readable YAML file holding a mapping",
    "MEOWBOT_ADMINS": "Slack user ids (U...) or user-group handles, comma-separated",
    "MEOWBOT_ALERT_CHANNEL": "a Slack channel id or name",
    "MEOWBOT_LOG_LEVEL": "one of debug, info, warning, error",
    "MEOWBOT_SWEEP_INTERVAL": "an integer number of seconds between 5 and 86400",
    "MEOWBOT_DIGEST_CHANNEL": "a Slack channel id (C...) or name",
    "MEOWBOT_DIGEST_SCHEDULE": (
        "a weekday, a time and an IANA timezone, like 'fri 16:00 Europe/Berlin'"
    ),
    "MEOWBOT_HIGHLIGHT_EMOJI": "emoji names separated by commas, like 'meow_party,tada'",
}


def _url(value: str | None, *, schemes: tuple[str, ...] = ("http", "https")) -> str | None:
    if value is None or value == "":
        return None
    if not re.match(rf"^({'|'.join(schemes)})://[^\s/]+", value):
        raise ValueError("bad url")
    return value


class Settings(BaseSettings):
    """The bot's settings. Field aliases are the environment variable names."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        frozen=True,
    )

    slack_bot_token: SecretStr | None = Field(None, alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(None, alias="SLACK_APP_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, alias="SLACK_SIGNING_SECRET")
    slack_api_url: str = Field(SLACK_DEFAULT_API_URL, alias="SLACK_API_URL")
    port: int = Field(3000, alias="PORT", ge=1, le=65535)
    redis_url: str | None = Field(None, alias="REDIS_URL")
    prometheus_url: str | None = Field(None, alias="PROMETHEUS_URL")
    alertmanager_url: str | None = Field(None, alias="ALERTMANAGER_URL")
    alertmanager_webhook_token: SecretStr | None = Field(None, alias="ALERTMANAGER_WEBHOOK_TOKEN")
    slurm_rest_url: str | None = Field(None, alias="SLURM_REST_URL")
    slurm_jwt: SecretStr | None = Field(None, alias="SLURM_JWT")
    slurm_user: str = Field("root", alias="SLURM_USER")
    kubeconfig: str | None = Field(None, alias="KUBECONFIG")
    kubernetes_in_cluster: bool = Field(False, alias="MEOWBOT_KUBERNETES_IN_CLUSTER")
    playground_endpoints: str | None = Field(None, alias="PLAYGROUND_ENDPOINTS")
    playground_checkpoint_dirs: str | None = Field(None, alias="PLAYGROUND_CHECKPOINT_DIRS")
    # The language model that picks a reading of an unsure question (optional).
    ask_model_url: str | None = Field(None, alias="MEOWBOT_ASK_MODEL_URL")
    ask_model: str | None = Field(None, alias="MEOWBOT_ASK_MODEL")
    ask_model_key: SecretStr | None = Field(None, alias="MEOWBOT_ASK_MODEL_KEY")
    ask_model_deadline_s: float = Field(4.0, alias="MEOWBOT_ASK_MODEL_DEADLINE", ge=0.5, le=30)
    fleet: str | None = Field(None, validation_alias=AliasChoices("MEOWBOT_FLEET", "fleet"))
    seed: int = Field(0, alias="MEOWBOT_SEED")
    config_file: Path | None = Field(None, alias="MEOWBOT_CONFIG")
    admins: str = Field("", alias="MEOWBOT_ADMINS")
    alert_channel: str | None = Field(None, alias="MEOWBOT_ALERT_CHANNEL")
    sweep_interval_s: int = Field(5, alias="MEOWBOT_SWEEP_INTERVAL", ge=1, le=86400)
    digest_channel: str | None = Field(None, alias="MEOWBOT_DIGEST_CHANNEL")
    digest_schedule: str = Field("fri 16:00 UTC", alias="MEOWBOT_DIGEST_SCHEDULE")
    highlight_emoji: str = Field("meow_party", alias="MEOWBOT_HIGHLIGHT_EMOJI")
    regressions_channel: str | None = Field(None, alias="MEOWBOT_REGRESSIONS_CHANNEL")
    regressions_schedule: str = Field("mon 09:00 UTC", alias="MEOWBOT_REGRESSIONS_SCHEDULE")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", alias="MEOWBOT_LOG_LEVEL"
    )
    # The YAML file's contents (rules, routes, mappings), loaded once at start-up.
    extra: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value().startswith("xoxb-"):
            raise ValueError("bad token")
        return v or None

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value().startswith("xapp-"):
            raise ValueError("bad token")
        return v or None

    @field_validator("slack_signing_secret", "alertmanager_webhook_token", "slurm_jwt")
    @classmethod
    def _non_empty_secret(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value().strip():
            return None
        return v

    @field_validator("slack_api_url")
    @classmethod
    def _api_url(cls, v: str) -> str:
        if _url(v) is None or not v.endswith("/api/"):
            raise ValueError("bad url")
        return v

    @field_validator("prometheus_url", "alertmanager_url", "slurm_rest_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        url = _url(v)
        return url.rstrip("/") if url else None

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        sentinel_address(v)  # BadRedisUrl says what is wrong
        return v

    @field_validator("fleet")
    @classmethod
    def _fleet(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        m = _FLEET_RE.match(v.strip())
        if not m or (m.group(1) is not None and not 1 <= int(m.group(1)) <= MAX_SIM_NODES):
            raise ValueError("bad fleet")
        return v.strip()

    @field_validator("digest_channel", "regressions_channel")
    @classmethod
    def _digest_channel(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if not re.fullmatch(r"#?[a-z0-9][a-z0-9._-]{0,79}|[CG][A-Z0-9]{2,}", v.strip()):
            raise ValueError("bad channel")
        return v.strip()

    @field_validator("digest_schedule", "regressions_schedule")
    @classmethod
    def _digest_schedule(cls, v: str) -> str:
        DigestSchedule.parse(v)  # raises ValueError with the reason
        return v.strip()

    @field_validator("highlight_emoji")
    @classmethod
    def _highlight_emoji(cls, v: str) -> str:
        names = emoji_list(v)
        if not names or not all(re.fullmatch(r"[a-z0-9_+'\-]+", n) for n in names):
            raise ValueError("bad emoji")
        return ",".join(names)

    @field_validator("admins")
    @classmethod
    def _admins(cls, v: str) -> str:
        for item in _split(v):
            if not re.fullmatch(r"[UW][A-Z0-9]{2,}|@?[a-z0-9][a-z0-9._-]*|S[A-Z0-9]{2,}", item):
                raise ValueError("bad admin")
        return v

    @model_validator(mode="after")
    def _load_yaml(self) -> Settings:
        if self.config_file is None:
            return self
        try:
            data = yaml.safe_load(self.config_file.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError("unreadable config") from exc
        if not isinstance(data, dict):
            raise ValueError("config is not a mapping")
        object.__setattr__(self, "extra", data)
        return self

    # Derived facts, so that no caller re-decides them.

    @property
    def mode(self) -> Mode:
        if self.slack_bot_token and self.slack_app_token:
            return Mode.SOCKET
        if self.slack_bot_token and self.slack_signing_secret:
            return Mode.HTTP
        return Mode.SHELL

    @model_validator(mode="after")
    def _sim_alone(self) -> Settings:
        """The simulated fleet never stands beside a real cluster: its nodes, faults and
        buttons would pass for the cluster's."""
        real = self.cluster_backends
        if self.fleet is not None and real:
            raise SimBesideCluster(real)
        return self

    @property
    def cluster_backends(self) -> tuple[str, ...]:
        """The real cluster sources configured, by their variables."""
        named = {
            "PROMETHEUS_URL": bool(self.prometheus_url),
            "SLURM_REST_URL": bool(self.slurm_rest_url),
            "KUBECONFIG": bool(self.kubeconfig),
            "MEOWBOT_KUBERNETES_IN_CLUSTER": self.kubernetes_in_cluster,
        }
        return tuple(name for name, on in named.items() if on)

    @property
    def sim_nodes(self) -> int | None:
        """Nodes of the simulated fleet, or None when a real cluster backend is configured."""
        if self.cluster_backends:
            return None
        m = _FLEET_RE.match(self.fleet or "sim")
        assert m is not None  # validated above
        return int(m.group(1)) if m.group(1) else 512

    @property
    def scheduler_kind(self) -> str:
        """Which real scheduler answers: slurm, kubernetes, both or none."""
        slurm, kube = bool(self.slurm_rest_url), self.kubernetes
        return "both" if slurm and kube else "slurm" if slurm else "kubernetes" if kube else "none"

    @property
    def kubernetes(self) -> bool:
        """Whether a Kubernetes cluster is configured (a kubeconfig, or in-cluster)."""
        return bool(self.kubeconfig) or self.kubernetes_in_cluster

    @property
    def admin_list(self) -> tuple[str, ...]:
        return tuple(_split(self.admins))

    def backends(self) -> dict[str, str]:
        """Which backends are configured, for /healthz, App Home and the start-up line (no
        secrets): `fleet` only when it is simulated; else where metrics and the scheduler's
        state come from (`none` said as such: nothing stands in for a missing source)."""
        sim = self.sim_nodes
        sources = (
            {"fleet": f"simulated ({sim} nodes)"}
            if sim
            else {
                "metrics": "prometheus" if self.prometheus_url else "none",
                "scheduler": self.scheduler_kind,
            }
        )
        return {
            "redis": "configured" if self.redis_url else "in-process stand-in",
            "prometheus": "configured" if self.prometheus_url else "not configured",
            "slurm": "configured" if self.slurm_rest_url else "not configured",
            "kubernetes": "configured" if self.kubernetes else "not configured",
            "alertmanager": "configured" if self.alertmanager_url else "not configured",
            "playground": "configured" if self.playground_endpoints else "not configured",
            **sources,
        }


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _env_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else ""
    info = Settings.model_fields.get(field)
    if info is not None:
        if info.alias:
            return info.alias
        if isinstance(info.validation_alias, AliasChoices):
            return str(info.validation_alias.choices[0])
    return field


def load_settings(**overrides: Any) -> Settings:
    """Reads the settings, turning the first validation error into one sentence."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = _env_name(err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, SimBesideCluster):
            raise ConfigError(str(cause)) from None
        if not err["loc"]:  # the model validator: only the YAML file is checked there
            raise ConfigError(f"MEOWBOT_CONFIG must be {EXPECTS['MEOWBOT_CONFIG']}.") from None
        got = err.get("input")
        if name == "REDIS_URL" and isinstance(got, str):
            got = redacted(got)  # its password is not for logs
        shown = "" if name in _SECRET_NAMES or isinstance(got, dict) else f" (got {got!r})"
        expects = EXPECTS.get(name, "a valid value")
        reason = (err.get("ctx") or {}).get("error")
        why = f": {reason}" if isinstance(reason, BadRedisUrl) else ""
        raise ConfigError(f"{name} must be {expects}{shown}{why}.") from None


_SECRET_NAMES = {
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLURM_JWT",
    "ALERTMANAGER_WEBHOOK_TOKEN",
}
