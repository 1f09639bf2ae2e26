"""One validation run, pure: the batch script that runs the suite on the node, and what its
output folder says about each step so far. No I/O: the scheduler's adapter writes the script
and reads the folder.

The script runs the steps in order, each under `timeout` (exit 124 when stopped, as the
parsers expect), and writes `<step>.out`, `<step>.err` and, last, `<step>.rc` into the run's
folder; a step's `.started` marks it running. It runs every step, even after one failed: a
failing diagnostic and a slow all-reduce are both worth knowing, and the verdict is read
here, not in the script.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from bot.validation.config import StepConfig
from bot.validation.parsers import StepResult

KILL_AFTER_S = 10
"""How long `timeout` waits after its TERM before it kills a step that ignores it."""


class StepState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"


@dataclass(frozen=True)
class StepFiles:
    """What the run's folder holds of one step: None where a file is not there yet."""

    started: bool = False
    stdout: str | None = None
    stderr: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class StepOutcome:
    name: str
    state: StepState
    result: StepResult | None = None  # once it has ended

    @property
    def line(self) -> str:
        """One line for Slack: `dcgm-diag-r2: passed (all 8 GPUs passed)`."""
        if self.result is None:
            return f"{self.name}: {self.state.value}"
        said = self.result.figure if self.result.passed else self.result.reason
        return f"{self.name}: {self.state.value} ({said})"


def batch_script(steps: tuple[StepConfig, ...], folder: str) -> str:
    """The job's script: every step under its timeout, its output into `folder`."""
    lines = [
        "#!/bin/bash",
        "# Written by meowbot: the site's validation suite on this node.",
        f"out={shlex.quote(folder)}",
        'mkdir -p "$out"',
        # Once only: a job the scheduler runs again (Slurm requeues a batch job after a node
        # failure; slurmrestd 22.05 takes no `requeue: false`) would truncate the step files
        # the first run wrote while meowbot reads them. The second run ends at once instead.
        '[ -e "$out/.ran" ] && exit 3',
        ': > "$out/.ran"',
        # Cancelled (scancel sends TERM first): the running step is stopped with the script,
        # not left behind (`timeout` runs it in a process group of its own).
        'trap \'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143\' TERM INT',
        "step() {",
        "  name=$1; limit=$2; shift 2",
        '  : > "$out/$name.started"',
        f'  timeout --kill-after={KILL_AFTER_S} "$limit" "$@" \\',
        '    > "$out/$name.out" 2> "$out/$name.err" &',
        "  child=$!",
        '  wait "$child"',
        '  echo $? > "$out/$name.rc.part" && mv "$out/$name.rc.part" "$out/$name.rc"',
        "}",
    ]
    for s in steps:
        args = " ".join(shlex.quote(a) for a in s.command)
        lines.append(f"step {shlex.quote(s.name)} {s.timeout_s} {args}")
    return "\n".join(lines) + "\n"


def outcomes(
    steps: tuple[StepConfig, ...], files: Mapping[str, StepFiles], *, job_ended: bool = False
) -> list[StepOutcome]:
    """Each step's state from its files. Once the job has ended, a step with no exit code
    never finished (the job was cancelled or died): failed, saying so."""
    out: list[StepOutcome] = []
    for s in steps:
        f = files.get(s.name, StepFiles())
        if f.exit_code is not None:
            result = s.read(f.stdout or "", f.stderr or "", f.exit_code)
            state = StepState.PASSED if result.passed else StepState.FAILED
            out.append(StepOutcome(s.name, state, result))
        elif job_ended:
            why = "the job ended before this step finished" if f.started else "never started"
            failed = StepResult(passed=False, figure=why, message=why)
            out.append(StepOutcome(s.name, StepState.FAILED, failed))
        else:
            out.append(StepOutcome(s.name, StepState.RUNNING if f.started else StepState.QUEUED))
    return out


def verdict(done: list[StepOutcome]) -> StepOutcome | None:
    """The first failed step (what the node's drain reason names), or None when all passed.
    Only meaningful once every step has ended."""
    return next((o for o in done if o.state is StepState.FAILED), None)


def all_ended(done: list[StepOutcome]) -> bool:
    return all(o.state in (StepState.PASSED, StepState.FAILED) for o in done)
