"""Fixtures of the integration tests."""

from __future__ import annotations

import pytest

from tests.conftest import need_service


@pytest.fixture(scope="module")
def prom_url(request: pytest.FixtureRequest) -> str:
    """The engine's URL: Prometheus, or the engine a BOTH test is run with
    (tests/integration/engines.py)."""
    return need_service(getattr(request, "param", "PROMETHEUS_URL"))
