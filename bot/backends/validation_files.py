"""Reads a validation run's step files from the folder the job writes them into, on storage
meowbot and the nodes both mount: the same for every scheduler's job."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from bot.validation.run import StepFiles

MAX_OUTPUT = 1_000_000
"""Bytes of a step's output read back: a DCGM JSON report is tens of kB."""


async def read_step_files(folder: str, steps: Sequence[str]) -> dict[str, StepFiles]:
    return await asyncio.to_thread(_read_files, Path(folder), steps)


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            return f.read(MAX_OUTPUT).decode(errors="replace")
    except FileNotFoundError:
        return None


def _read_files(folder: Path, steps: Sequence[str]) -> dict[str, StepFiles]:
    out: dict[str, StepFiles] = {}
    for name in steps:
        rc = _read(folder / f"{name}.rc")
        code = int(rc.strip()) if rc is not None and rc.strip().lstrip("-").isdigit() else None
        out[name] = StepFiles(
            started=(folder / f"{name}.started").exists(),
            stdout=_read(folder / f"{name}.out"),
            stderr=_read(folder / f"{name}.err"),
            exit_code=code,
        )
    return out
