"""Checkpoint loss from a training metric, read from a real Prometheus of this test's own that
scrapes a small exporter on loopback (the shared test Prometheus holds the simulated fleet)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from bot.backends.prometheus import PrometheusMetrics
from bot.backends.training_metrics import TrainingMetrics, metric_query
from bot.errors import BackendError
from bot.playground.catalog import ServedModel, build_catalog
from bot.playground.config import PlaygroundConfig, parse_endpoints
from scripts.testsvc.common import free_port
from tests.conftest import need_service
from tests.integration.scraping_prometheus import scraping

EXPOSITION = """\
# TYPE train_loss gauge
train_loss{run="tiny-zen",step="100"} 2.5
train_loss{run="tiny-zen",step="200"} 1.25
train_loss{run="tiny-zen",step="latest"} 0.5
# TYPE train_tokens_seen gauge
train_tokens_seen{run="tiny-zen",step="100"} 51200
"""
CFG = PlaygroundConfig(
    endpoints=parse_endpoints("http://a/v1"),
    loss_metric="train_loss",
    tokens_metric="train_tokens_seen",
)


@pytest.fixture
async def prometheus(tmp_path: Path) -> AsyncIterator[str]:
    need_service("PROMETHEUS_URL")  # the test environment installed Prometheus

    async with scraping(EXPOSITION, tmp_path, "train") as url:
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                try:
                    async with http.get(
                        f"{url}/api/v1/query", params={"query": "train_tokens_seen"}
                    ) as r:
                        if r.status == 200 and (await r.json())["data"]["result"]:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.3)
            else:
                raise RuntimeError("the test's Prometheus never scraped the exporter")
        yield url


async def test_loss_and_tokens_come_from_prometheus_in_one_query_a_metric(prometheus: str) -> None:
    prom = PrometheusMetrics(prometheus)
    training = TrainingMetrics(prom, CFG)
    try:
        meta = await training.read()
    finally:
        await training.close()
    assert meta == {("tiny-zen", 100): (2.5, 51200), ("tiny-zen", 200): (1.25, None)}
    assert prom.queries == 2  # one per metric, whatever the number of checkpoints
    served = [
        ServedModel("http://a/v1", f"tiny-zen/step-{s}", loss=9.0 if s == 200 else None)
        for s in (100, 200, 300)
    ]
    cat = build_catalog(served, [], CFG, datetime.now(UTC), metadata=meta)
    by_step = {c.step: c for c in cat.run("tiny-zen")}
    assert by_step[100].loss == 2.5 and by_step[100].tokens_seen == 51200
    assert by_step[200].loss == 9.0  # the server's own figure wins
    assert by_step[300].loss is None


async def test_prometheus_down_is_a_sentence_and_names_only_checked() -> None:
    training = TrainingMetrics(PrometheusMetrics(f"http://127.0.0.1:{free_port()}"), CFG)
    try:
        with pytest.raises(BackendError, match="Prometheus"):
            await training.read(timeout_s=1)
    finally:
        await training.close()
    assert metric_query("train_loss", "run", "step") == (
        "max by (run, step) (last_over_time(train_loss[30d]))"
    )
    with pytest.raises(ValueError, match="not a Prometheus metric"):
        PlaygroundConfig(loss_metric="x) or vector(1) #")
