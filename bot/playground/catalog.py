"""Discovery, the pure part: listings from servers and folders into one catalog of runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.playground.config import PlaygroundConfig
from bot.playground.models import Catalog, Checkpoint
from bot.playground.naming import parse_model_id


@dataclass(frozen=True)
class ServedModel:
    """One entry of an endpoint's `GET /v1/models`."""

    endpoint: str
    model_id: str
    created: datetime | None = None
    loss: float | None = None
    tokens_seen: int | None = None


@dataclass(frozen=True)
class FolderCheckpoint:
    """A `<run>/step-<N>/` folder on shared storage, with what trainer_state.json says."""

    run: str
    step: int
    path: str
    loss: float | None = None
    tokens_seen: int | None = None
    created: datetime | None = None


def dir_model_id(folder: FolderCheckpoint, template: str) -> str:
    return (
        template.replace("{path}", folder.path)
        .replace("{run}", folder.run)
        .replace("{step}", str(folder.step))
    )


def build_catalog(
    served: Iterable[ServedModel],
    folders: Iterable[FolderCheckpoint],
    cfg: PlaygroundConfig,
    now: datetime,
    down: Sequence[str] = (),
    metadata: Mapping[tuple[str, int], tuple[float | None, int | None]] | None = None,
) -> Catalog:
    """Runs newest first. A checkpoint both served and in a folder is one entry: the server's
    model id, the folder's loss and time where the server gives none; then the training
    metric's loss and tokens (`metadata`, by run and step) where neither gave them."""
    found: dict[tuple[str, int], Checkpoint] = {}
    for m in served:
        parsed = parse_model_id(m.model_id, cfg.patterns)
        if parsed is None:
            continue
        run, step = parsed
        found.setdefault(
            (run, step),
            Checkpoint(
                run=run,
                step=step,
                model_id=m.model_id,
                endpoint=m.endpoint,
                loss=m.loss,
                tokens_seen=m.tokens_seen,
                created=m.created,
            ),
        )
    folder_endpoint = (
        cfg.endpoints[cfg.dir_endpoint].url if cfg.dir_endpoint < len(cfg.endpoints) else ""
    )
    for f in folders:
        known = found.get((f.run, f.step))
        if known is not None:
            found[(f.run, f.step)] = known.model_copy(
                update={
                    "loss": known.loss if known.loss is not None else f.loss,
                    "tokens_seen": known.tokens_seen or f.tokens_seen,
                    "created": known.created or f.created,
                }
            )
        elif folder_endpoint:
            found[(f.run, f.step)] = Checkpoint(
                run=f.run,
                step=f.step,
                model_id=dir_model_id(f, cfg.dir_model_id),
                endpoint=folder_endpoint,
                loss=f.loss,
                tokens_seen=f.tokens_seen,
                created=f.created,
            )
    for key, (loss, tokens) in (metadata or {}).items():
        known = found.get(key)
        if known is not None:
            found[key] = known.model_copy(
                update={
                    "loss": known.loss if known.loss is not None else loss,
                    "tokens_seen": known.tokens_seen or tokens,
                }
            )
    runs: dict[str, list[Checkpoint]] = {}
    for ckpt in found.values():
        runs.setdefault(ckpt.run, []).append(ckpt)
    return Catalog(
        runs={r: tuple(sorted(cs, key=lambda c: -c.step)) for r, cs in sorted(runs.items())},
        down=tuple(down),
        at=now,
    )


def default_picks(checkpoints: Sequence[Checkpoint], count: int = 2) -> list[Checkpoint]:
    """The newest and the one before it (or fewer when the run has fewer)."""
    return list(checkpoints[:count])


def newer_than(checkpoints: Sequence[Checkpoint], step: int) -> list[Checkpoint]:
    """Checkpoints after `step`, oldest first (the order a watch runs them in)."""
    return sorted((c for c in checkpoints if c.step > step), key=lambda c: c.step)


def unknown_run_sentence(run: str, catalog: Catalog) -> str:
    known = ", ".join(f"`{r}`" for r in list(catalog.runs)[:20]) or "none yet"
    more = f" and {len(catalog.runs) - 20} more" if len(catalog.runs) > 20 else ""
    return f"I know no run `{run}`. Known runs: {known}{more}."
