"""Model ids into runs and steps: `<run>/step-<N>`, `<run>@<N>`, `<run>-step<N>`, or paths."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache


@lru_cache(maxsize=32)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def parse_model_id(model_id: str, patterns: Sequence[str]) -> tuple[str, int] | None:
    """(run, step) for a model id that names a checkpoint; None for any other model.

    A path (`/ckpt/tiny/step-300`, as `transformers serve` names a checkpoint folder) gives the
    run's folder name, so that a run reads the same from a server and from the folder.
    """
    for pattern in _compiled(tuple(patterns)):
        m = pattern.match(model_id)
        if m is None:
            continue
        run, step = m.group("run"), int(m.group("step"))
        if "/" in run and model_id.startswith("/"):
            run = run.rstrip("/").rsplit("/", 1)[-1]
        if run:
            return run, step
    return None


RUN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@:+-]{0,127}$")


def valid_run(name: str) -> bool:
    """A run name someone typed: letters, digits and `._/@:+-`, at most 128 characters."""
    return bool(RUN_RE.fullmatch(name))
