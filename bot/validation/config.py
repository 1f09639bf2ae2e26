"""`validation:` in MEOWBOT_CONFIG: the site's suite a drained node passes before it resumes.

Each step is a command (a list of arguments, run on the node through its scheduler), a
timeout and the parser that reads its output, with that parser's params:

    validation:
      steps:
        - name: dcgm
          command: [dcgmi, diag, -r, "2", -j]
          timeout_s: 600
          parser: dcgm_diag
        - name: all-reduce
          command: [all_reduce_perf, -b, 16G, -e, 16G, -f, "2", -g, "8", -c, "1"]
          timeout_s: 600
          parser: nccl_all_reduce
          params: {min_bus_bw_gbs: {H100: 460, H200: 480}}

`output_dir` turns testing on: a folder on a filesystem both the nodes and meowbot mount,
where the job writes each step's output. On Kubernetes, `kubernetes.image` names the image
the suite runs in (with the site's tools), `kubernetes.namespace` where its Jobs go, and
`kubernetes.volume` the volume mounted at `output_dir` (by default that path on the node).
Without `steps` the default suite runs: DCGM diagnostics level 2 and a single-node 8-GPU
all-reduce. No I/O.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.validation.parsers import PARSERS, StepResult, parser_params, read_step

ParserName = Literal["dcgm_diag", "nccl_all_reduce", "ib_write_bw", "exit_code"]

# DCGM's guidance: -r 1 takes seconds, -r 2 about 2 minutes, -r 3 about 15 minutes. The
# defaults leave room for a slow start (the hostengine, a loaded node) before a step is
# called hung.
DCGM_TIMEOUT_S = {1: 120, 2: 600, 3: 2700}
ALL_REDUCE_TIMEOUT_S = 600


class StepConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=40)
    command: tuple[str, ...] = Field(min_length=1)
    timeout_s: int = Field(ge=1, le=86400)
    parser: ParserName = "exit_code"
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("command")
    @classmethod
    def _args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not arg for arg in value) or not value[0].strip():
            raise ValueError("a command is a list of non-empty arguments, the program first")
        return value

    @model_validator(mode="after")
    def _params(self) -> StepConfig:
        try:
            parser_params(self.parser, self.params)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"params.{where} of the {self.parser} parser: {err['msg']}") from None
        return self

    def read(self, stdout: str, stderr: str, exit_code: int) -> StepResult:
        """This step's verdict on one run's output."""
        return read_step(self.parser, stdout, stderr, exit_code, self.params)


DEFAULT_STEPS: tuple[StepConfig, ...] = (
    StepConfig(
        name="dcgm-diag-r2",
        command=("dcgmi", "diag", "-r", "2", "-j"),
        timeout_s=DCGM_TIMEOUT_S[2],
        parser="dcgm_diag",
    ),
    StepConfig(
        name="nccl-all-reduce",
        # One process driving the node's 8 GPUs at a single 16 GB size, as Azure's check
        # does: the average bus bandwidth is then that size's, which the thresholds are for.
        command=("all_reduce_perf", "-b", "16G", "-e", "16G", "-f", "2", "-g", "8", "-c", "1"),
        timeout_s=ALL_REDUCE_TIMEOUT_S,
        parser="nccl_all_reduce",
    ),
)


class KubernetesValidation(BaseModel):
    """How the suite runs on a Kubernetes node: the image holding the site's tools, the
    namespace of its Jobs, and the volume of step files (a Kubernetes volume source, mounted
    at `output_dir`; by default that path on the node itself)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str = Field(min_length=1, max_length=500)
    namespace: str = Field("meowbot", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    volume: dict[str, Any] = Field(default_factory=dict)


class ValidationConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: tuple[StepConfig, ...] = Field(DEFAULT_STEPS, min_length=1)
    # Where the job writes each step's output, on storage the nodes and meowbot both see (a
    # shared filesystem). Without it, nodes are not tested: "Test and resume" is not offered.
    output_dir: str | None = None
    # Prepended to the job's PATH: where the site keeps dcgmi, all_reduce_perf, ib_write_bw.
    tools_path: str = ""
    # Validations running at once, across the fleet.
    max_at_once: int = Field(4, ge=1, le=256)
    # Off by default: a node meowbot drained for a fault is tested once it is repaired (the
    # scheduler says it booted since the drain), and resumed on a pass. Runs post in the
    # alert channel.
    on_repair: bool = False
    repair_check_s: int = Field(60, ge=5, le=3600)
    # Kubernetes nodes are tested only with an image to run the suite in.
    kubernetes: KubernetesValidation | None = None

    @field_validator("steps")
    @classmethod
    def _unique(cls, value: tuple[StepConfig, ...]) -> tuple[StepConfig, ...]:
        names = [s.name for s in value]
        if len(set(names)) != len(names):
            raise ValueError("step names must be unique")
        return value


assert set(PARSERS) == set(get_args(ParserName)), "ParserName and PARSERS must name the same"
