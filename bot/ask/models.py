"""What a question was read as: its entities, the command it amounts to, or a question back."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from bot.triage.job_ids import check_job_id


class Intent(StrEnum):
    NODE_HEALTH = "node_health"
    FAULTS = "faults"
    SLOW_JOB = "slow_job"
    REGRESSIONS = "regressions"
    PRECURSORS = "precursors"
    PLAYGROUND = "playground"
    HIGHLIGHTS = "highlights"
    HELP = "help"


class Entities(BaseModel):
    """What a question names. Kept per thread (the follow-ups read it) and the shape the
    language model fills, so every field is plain data."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: tuple[str, ...] = ()
    hostlist: str | None = Field(default=None, max_length=2000)
    # Slurm's number or Kubernetes' namespace/kind/name, as the scheduler writes it.
    job: Annotated[str, AfterValidator(check_job_id)] | None = None
    mine: bool = False  # "my job": the asker's
    run: str | None = Field(default=None, max_length=200)
    steps: tuple[int, ...] = ()
    prompt: str | None = Field(default=None, max_length=2000)
    since: str | None = Field(default=None, pattern=r"^\d{1,4}[hd]$")  # the commands' --since
    kind: str | None = Field(
        default=None, max_length=40
    )  # a fault kind's code or a /hw-faults word
    rack: str | None = Field(default=None, max_length=100)
    switch: str | None = Field(default=None, max_length=100)
    component: str | None = Field(default=None, max_length=100)
    repeat: bool = False  # repeat offenders
    last_week: bool = False  # highlights of the last complete week
    stats: bool = False  # highlights' totals


@dataclass(frozen=True)
class Route:
    """The command a question amounts to, as it would be typed."""

    intent: Intent
    command: str  # "/node-health"
    text: str  # "gpu-0042"
    entities: Entities

    @property
    def typed(self) -> str:
        return f"{self.command} {self.text}".strip()


@dataclass(frozen=True)
class Unsure:
    """Two or three readings close to each other: one short question, a button each."""

    candidates: tuple[Route, ...]
    entities: Entities


@dataclass(frozen=True)
class Menu:
    """Nothing meowbot answers, or help asked for: what it can do, with phrasings to copy."""

    entities: Entities
    asked: bool = False  # help was asked for (not a question it cannot answer)


@dataclass(frozen=True)
class MyJob:
    """A question about the asker's own job: which one is known only to the scheduler."""

    intent: Intent
    entities: Entities


@dataclass(frozen=True)
class DrainAsk:
    """ "drain it": the node's Drain button (pressed by someone allowed), never a drain; with
    no node named in the question or its thread (`node` None), "drain which node?"."""

    node: str | None
    entities: Entities


Understanding = Route | Unsure | Menu | MyJob | DrainAsk
