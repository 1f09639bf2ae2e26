"""The PromQL engines the integration tests read the fleet through: the test Prometheus, and
VictoriaMetrics over the same fleet when `make test` started it (scripts/testsvc/victoria.py).

Tests marked BOTH take `prom_url` once per engine, where the engines' functions, clocks and
rule runners could give another answer; the others read Prometheus alone (the `prom_url`
fixture of tests/integration/conftest.py).
"""

from __future__ import annotations

import os

import pytest

ENGINES = ["PROMETHEUS_URL", *(["VICTORIA_URL"] if os.environ.get("VICTORIA_URL") else [])]
BOTH = pytest.mark.parametrize(
    "prom_url", ENGINES, indirect=True, ids=lambda v: "vm" if "VICTORIA" in v else "prom"
)
