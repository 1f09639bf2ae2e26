"""The playground's settings: endpoints and checkpoint folders from the environment, the rest
from the `playground:` section of MEOWBOT_CONFIG, every key with a default."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from bot.config import ConfigError

PROM_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
DEFAULT_PATTERNS = (
    r"^(?P<run>.+)/step-(?P<step>\d+)$",  # <run>/step-<N>, and checkpoint folders by path
    r"^(?P<run>[^@]+)@(?P<step>\d+)$",  # <run>@<N>
    r"^(?P<run>.+?)-step-?(?P<step>\d+)$",  # vLLM LoRA adapter names: <run>-step<N>
)


class Endpoint(BaseModel):
    """One OpenAI-compatible server: its base URL (ending in /v1) and optional API key."""

    model_config = ConfigDict(frozen=True)

    url: str
    api_key: SecretStr | None = None

    @property
    def name(self) -> str:
        """How the endpoint is named to people: host and port, never the key."""
        parts = urlsplit(self.url)
        return parts.netloc or self.url


def parse_endpoints(raw: str | None) -> tuple[Endpoint, ...]:
    """`http://a:8000/v1,key=sk-1;http://b:8000/v1` into endpoints; a sentence on error."""
    out: list[Endpoint] = []
    for item in (raw or "").split(";"):
        item = item.strip()
        if not item:
            continue
        url, *options = (p.strip() for p in item.split(","))
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"PLAYGROUND_ENDPOINTS must list http(s) URLs separated by ';' (got {url!r})."
            )
        key: str | None = None
        for option in options:
            name, _, value = option.partition("=")
            if name.strip() != "key" or not value.strip():
                raise ConfigError(
                    "PLAYGROUND_ENDPOINTS options are `key=<api key>` after a comma "
                    f"(got {name.strip()!r})."
                )
            key = value.strip()
        out.append(Endpoint(url=url.rstrip("/"), api_key=SecretStr(key) if key else None))
    return tuple(out)


def parse_dirs(raw: str | None) -> tuple[Path, ...]:
    return tuple(Path(p.strip()) for p in (raw or "").replace(",", ":").split(":") if p.strip())


class PlaygroundConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoints: tuple[Endpoint, ...] = ()
    checkpoint_dirs: tuple[Path, ...] = ()
    dir_model_id: str = "{path}"
    """A checkpoint folder's model id on its server: `{path}` (transformers serve), or e.g.
    `{run}/step-{step}` for a server started with --served-model-name."""
    dir_endpoint: int = Field(0, ge=0)
    """Which of PLAYGROUND_ENDPOINTS serves the checkpoint folders (by position)."""
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    discovery_ttl_s: float = Field(15.0, ge=0, le=3600)
    max_checkpoints: int = Field(4, ge=1, le=4)
    max_tokens: int = Field(64, ge=1, le=4096)
    """The form's default: 64 fits the demo model's 128-token context with a prompt."""
    max_tokens_cap: int = Field(1024, ge=1, le=32768)
    temperature: float = Field(0.7, ge=0, le=2)
    per_user_concurrency: int = Field(2, ge=1)
    per_user_per_minute: int = Field(20, ge=1)
    global_concurrency: int = Field(16, ge=1)
    first_token_timeout_s: float = Field(60.0, gt=0)
    stall_timeout_s: float = Field(20.0, gt=0)
    request_timeout_s: float = Field(180.0, gt=0)
    update_interval_s: float = Field(1.0, ge=1.0)
    """Slack allows about one chat.update a second a message: never less."""
    section_chars: int = Field(1500, ge=200, le=2800)
    watch_poll_s: float = Field(30.0, ge=1)
    watch_limit: int = Field(10, ge=1)
    loss_metric: str | None = None
    """A training metric in Prometheus (PROMETHEUS_URL) with the loss per run and step, for
    checkpoints whose server and folder say none: `<loss_metric>{<run_label>, <step_label>}`."""
    tokens_metric: str | None = None
    run_label: str = "run"
    step_label: str = "step"

    @field_validator("loss_metric", "tokens_metric", "run_label", "step_label")
    @classmethod
    def _prom_name(cls, v: str | None) -> str | None:
        # These reach PromQL: only a metric or label name may, never an expression.
        if v is not None and not PROM_NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a Prometheus metric or label name")
        return v

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for p in v:
            try:
                groups = re.compile(p).groupindex
            except re.error as exc:
                raise ValueError(f"{p!r} is not a regular expression ({exc})") from None
            if "run" not in groups or "step" not in groups:
                raise ValueError(f"{p!r} needs the groups (?P<run>...) and (?P<step>...)")
        return v

    @property
    def configured(self) -> bool:
        return bool(self.endpoints)
