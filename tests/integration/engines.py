"""The PromQL engines the integration tests read the fleet through: the test Prometheus, and
VictoriaMetrics over the same fleet when `make test` started it (scripts/testsvc/victoria.py).

Tests marked BOTH take `prom_url` once per engine, where the engines' functions, clocks and
rule runners could give another answer; the others read Prometheus alone (the `prom_url`
fixture of tests/integration/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from scripts.testsvc import victoria

ENGINES = ["PROMETHEUS_URL", *(["VICTORIA_URL"] if os.environ.get("VICTORIA_URL") else [])]


def engine_id(var: str) -> str:
    return "vm" if "VICTORIA" in var else "prom"


BOTH = pytest.mark.parametrize("prom_url", ENGINES, indirect=True, ids=engine_id)


@contextlib.contextmanager
def engine_urls(prom_url: str, tmp: Path, blocks: Path, end: datetime) -> Iterator[dict[str, str]]:
    """A test's own backfilled Prometheus and, under `make test`, a VictoriaMetrics holding
    the same blocks (the recorded series with them): each engine's URL, by ENGINES' names."""
    if "VICTORIA_URL" not in ENGINES:
        yield {"PROMETHEUS_URL": prom_url}
        return
    with victoria.copied(tmp, blocks, end) as vm_url:
        yield {"PROMETHEUS_URL": prom_url, "VICTORIA_URL": vm_url}
