"""Checkpoint folders on shared storage: `<dir>/<run>/step-<N>/`, with `trainer_state.json`."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bot.playground.catalog import FolderCheckpoint

STEP_DIR = re.compile(r"^(?:step-|checkpoint-)(\d+)$")
MAX_STATE_BYTES = 4 * 1024 * 1024


def _trainer_state(folder: Path) -> tuple[float | None, int | None]:
    """The last logged loss and the tokens seen, as HF's Trainer writes them."""
    path = folder / "trainer_state.json"
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            return None, None
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, None
    loss: float | None = None
    for row in state.get("log_history") or []:
        if isinstance(row, dict) and isinstance(row.get("loss"), int | float):
            loss = float(row["loss"])
    tokens = state.get("num_input_tokens_seen")
    return loss, tokens if isinstance(tokens, int) else None


def _complete(folder: Path) -> bool:
    """A checkpoint is usable once its weights are written (a half-saved one is skipped)."""
    return (
        (folder / "config.json").is_file()
        and any((folder / name).is_file() for name in ("model.safetensors", "pytorch_model.bin"))
    ) or (folder / "adapter_config.json").is_file()


def scan(dirs: Sequence[Path]) -> tuple[list[FolderCheckpoint], list[str]]:
    """Every complete checkpoint folder, and a sentence per folder that cannot be read."""
    found: list[FolderCheckpoint] = []
    problems: list[str] = []
    for root in dirs:
        try:
            runs = [p for p in root.iterdir() if p.is_dir()]
        except OSError as exc:
            problems.append(f"The checkpoint folder {root} cannot be read ({exc.strerror}).")
            continue
        for run in runs:
            try:
                steps = list(run.iterdir())
            except OSError:
                continue
            for folder in steps:
                m = STEP_DIR.match(folder.name)
                if m is None or not folder.is_dir() or not _complete(folder):
                    continue
                loss, tokens = _trainer_state(folder)
                created = datetime.fromtimestamp(folder.stat().st_mtime, UTC)
                found.append(
                    FolderCheckpoint(
                        run=run.name,
                        step=int(m.group(1)),
                        path=str(folder.resolve()),
                        loss=loss,
                        tokens_seen=tokens,
                        created=created,
                    )
                )
    return found, problems


async def scan_async(dirs: Sequence[Path]) -> tuple[list[FolderCheckpoint], list[str]]:
    return await asyncio.to_thread(scan, dirs)
