"""`meowbot doctor`'s Prometheus lines against real Prometheus servers: one of this test's own
that scrapes a fleet whose dcgm-exporter lacks the clock-event reasons (every other family
there), and the shared test Prometheus, whose recording rules began when it started: how far
back they reach, against Prometheus' own answer."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from bot import metric_names as m
from bot.backends.prometheus_rules import SENTINEL_LABEL
from bot.backends.sim.fleet import SimFleet
from bot.config import Settings, load_settings
from bot.config_sections import health_config, regressions_config, straggler_config
from bot.connect import prometheus_rule_groups
from bot.doctor.prometheus_part import history_reads
from bot.doctor.report import Line, Status
from bot.doctor.run import doctor
from tests.conftest import need_service
from tests.integration.scraping_prometheus import scraping

NODES = 8
BITMASK = m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS
UNABLE = ("throttle_hw_slowdown", "throttle_hw_thermal", "power_brake")
SCRAPED_WITHIN_S = 30


async def query(http: aiohttp.ClientSession, url: str, promql: str) -> list[dict[str, object]]:
    async with http.post(f"{url}/api/v1/query", data={"query": promql}) as resp:
        body = await resp.json()
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


@pytest.fixture
async def without_bitmask(tmp_path: Path) -> AsyncIterator[str]:
    """A Prometheus of this test's own scraping eight nodes of the newer dcgm-exporter (every
    node: its violation and clock-event counters, DCGM's health watches) without the
    clock-event reasons bitmask, under neither of its names."""
    need_service("PROMETHEUS_URL")  # the test environment installed Prometheus
    fleet = SimFleet(
        NODES, seed=5, fault_rate=0.0, host_label="hostname", disabled_metrics=[BITMASK]
    )
    exposition = fleet.exposition()
    assert BITMASK not in exposition and m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS not in exposition
    assert (
        m.DCGM_FI_DEV_POWER_VIOLATION in exposition and m.DCGM_EXP_CLOCK_EVENTS_TOTAL in exposition
    )

    async with scraping(exposition, tmp_path, "dcgm") as url:
        deadline = time.monotonic() + SCRAPED_WITHIN_S
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    # Two scrapes: the counters' increase over the window has two samples.
                    rows = await query(
                        http, url, f"count(count_over_time({m.DCGM_FI_DEV_GPU_TEMP}[1m]) >= 2)"
                    )
                    scraped = float(rows[0]["value"][1]) if rows else 0.0  # type: ignore[index]
                    if scraped == NODES * fleet.gpus_per_node:
                        break
                except aiohttp.ClientError:
                    pass
                assert time.monotonic() < deadline, "the test's Prometheus never scraped the fleet"
                await asyncio.sleep(0.3)
        yield url


def settings(prom: str) -> Settings:
    return load_settings(
        PROMETHEUS_URL=prom,
        SLACK_BOT_TOKEN=None,
        REDIS_URL=None,
        SLURM_REST_URL=None,
        KUBECONFIG=None,
        MEOWBOT_CONFIG=None,
    )


def prometheus_part(lines: list[Line]) -> list[Line]:
    return [line for line in lines if line.part == "Prometheus"]


async def test_an_exporter_without_the_clock_event_reasons_names_each_check_it_stops(
    without_bitmask: str,
) -> None:
    lines = prometheus_part(await doctor(settings(without_bitmask)))
    not_pass = [
        (line.what, line.status, line.said) for line in lines if line.status is not Status.PASS
    ]
    cannot = f"cannot run: no {BITMASK} in Prometheus"
    assert not_pass == [
        ("health checks", Status.WARN, f"21 of 24 can run over {NODES} nodes"),
        *((f"check {name}", Status.FAIL, cannot) for name in UNABLE),
        (
            "recording rules",
            Status.WARN,
            "none of meowbot's are kept up: every read is raw (slower /hw-faults, costlier "
            "sweeps on a big fleet)",
        ),
    ]
    for line in lines:
        if line.what.startswith("check "):
            assert line.fix.startswith("enable the field in dcgm-exporter's counters CSV")
    passed = {line.what: line.said for line in lines if line.status is Status.PASS}
    assert passed["server"] == f"answers at {without_bitmask}"
    assert passed["host label"] == "GPU series name their node by hostname"
    assert set(passed) == {"server", "host label", "sweep cost"}


async def test_the_rules_reach_back_as_far_as_prometheus_says_they_ran() -> None:
    """The shared test Prometheus has evaluated meowbot's rules since it started (minutes, not
    days): each answer that reads days of them is said to read raw, back to the first run of
    the rule that began last, as Prometheus' own samples of the rules' sentinels have it."""
    prom = need_service("PROMETHEUS_URL")
    lines = prometheus_part(await doctor(settings(prom)))
    got = {line.what: line for line in lines}
    assert got["recording rules"].status is Status.PASS
    reach = got["recording rules' reach"]
    assert reach.status is Status.WARN
    said = re.fullmatch(
        r"back to (\d{4}-\d\d-\d\d \d\d:\d\d) UTC \(([^)]+)\): (.*) read raw instead \(slower, "
        r"and coarser on a big fleet\) until the rules reach back that far",
        reach.said,
    )
    assert said, reach.said
    assert (
        said.group(3) == "/job-slow's 48 h pace, /regressions' 7 days and /hw-faults why's 7 days"
    )
    cfg = settings(prom)
    groups = prometheus_rule_groups(cfg, [], {})
    reads = history_reads(
        groups, regressions_config(cfg), straggler_config(cfg), health_config(cfg).node_label
    )
    records = sorted({record for read in reads for record in read.records})
    firsts = []
    async with aiohttp.ClientSession() as http:
        for record in records:
            # Every sentinel sample of the rule over the last day: the first is when it began.
            rows = await query(
                http, prom, f'min(min_over_time({record}{{{SENTINEL_LABEL}!=""}}[1d]))'
            )
            assert rows, f"{record} never ran"
            firsts.append(float(rows[0]["value"][1]))  # type: ignore[index]
    began = max(firsts)  # the answers read raw until the rule that began last reaches back
    shown = datetime.strptime(said.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
    # Looked for a minute at a time: at most a minute after the first sample, shown to the minute.
    assert began // 60 * 60 <= shown <= began + 60, (said.group(1), began)
    assert "create-blocks-from rules --start=" in reach.fix and f"--url={prom} " in reach.fix
