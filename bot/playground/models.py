"""The playground's models: checkpoints, the catalog of runs, a request and its outputs."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from bot import models
from bot.models import UtcDatetime


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Checkpoint(models.Checkpoint):
    """The shared checkpoint, with the server that answers for it."""

    endpoint: str  # the endpoint's URL

    @property
    def label(self) -> str:
        return f"step {self.step:,}"


class Catalog(_Frozen):
    """Every run with its checkpoints, newest first, and the endpoints that did not answer."""

    runs: dict[str, tuple[Checkpoint, ...]]
    down: tuple[str, ...] = ()  # one sentence per endpoint or folder that could not be read
    at: UtcDatetime

    def run(self, name: str) -> tuple[Checkpoint, ...]:
        return self.runs.get(name, ())

    def find(self, run: str, step: int) -> Checkpoint | None:
        return next((c for c in self.run(run) if c.step == step), None)


class Mode(StrEnum):
    CHAT = "chat"
    COMPLETION = "completion"


class Prompt(_Frozen):
    """What is asked, the same for every checkpoint of a request."""

    run: str
    prompt: str = Field(min_length=1, max_length=8000)
    system: str = Field(default="", max_length=4000)
    mode: Mode = Mode.COMPLETION
    max_tokens: int = Field(128, ge=1, le=32768)
    temperature: float = Field(0.7, ge=0, le=2)
    seed: int | None = None


class OutputState(StrEnum):
    WAITING = "waiting"
    STREAMING = "streaming"
    DONE = "done"
    ERROR = "error"
    STALLED = "stalled"
    CANCELLED = "cancelled"


class Output(BaseModel):
    """One checkpoint's answer as it streams; mutable, owned by the one task streaming it."""

    checkpoint: Checkpoint
    state: OutputState = OutputState.WAITING
    text: str = ""
    tokens: int = 0
    started_at: float | None = None  # monotonic
    first_token_s: float | None = None
    elapsed_s: float | None = None
    finish_reason: str | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.state not in (OutputState.WAITING, OutputState.STREAMING)

    @property
    def tokens_per_s(self) -> float | None:
        if not self.elapsed_s or not self.tokens:
            return None
        return self.tokens / self.elapsed_s


class Watch(_Frozen):
    """A prompt re-run on each new checkpoint of its run; answers go to the thread."""

    id: str
    user_id: str
    prompt: Prompt
    channel: str
    thread_ts: str
    last_step: int
    created: datetime
