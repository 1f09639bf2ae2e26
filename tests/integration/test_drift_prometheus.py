"""A node on another driver, asked about every way, against a real Prometheus.

The exporter here is shaped like the one of the trial the project had never seen: dcgm-exporter
series (the driver as label `DCGM_FI_DRIVER_VERSION` on every series, `Hostname` on some hosts
and `hostname` on others, Kubernetes' empty `container`/`namespace`/`pod`) all served by one
scrape target, as behind a proxy or an exporter of exporters, so that every series carries the
same `instance`. There, /hw-faults named the drifted node while /node-health of the node called
it healthy and /node-health of the hostlist left it out: the fleet's version count was taken
per `instance`, which made a fleet of two. This test starts its own Prometheus (the binary
`make test` installs) on loopback, scraping that exporter every second, with meowbot's
recording rules loaded, and asks raw and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from bot import metric_names as m
from bot.backends.prometheus import PrometheusInventory, PrometheusMetrics
from bot.backends.prometheus_rules import (
    NODE_KEY,
    SENTINEL_LABEL,
    rule_groups,
    rules_yaml,
    with_node_key,
)
from bot.models import FaultKind, VerdictLevel
from bot.triage import service
from bot.triage.checks import HealthConfig
from bot.triage.service import Triage
from bot.triage.table import node_name
from scripts.testsvc.common import free_port
from tests.conftest import IN_CI
from tests.every_way import ALONE, HOSTLIST, HW_FAULTS, SWEEP, ask_every_way, counts

NODES = [f"dgx-a{i:02d}" for i in range(1, 13)]
DRIFTED = "dgx-a07"
FLEET_DRIVER = "550.90.07"
OTHER_DRIVER = "535.104.05"
GPUS = 8
READY_TIMEOUT_S = 60.0


def exposition() -> str:
    """What one dcgm-exporter target answers for all the nodes: the metrics dcgm-exporter
    exports by default that the checks read, nothing simulated beyond their labels."""
    lines = [
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).",
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge",
    ]
    rows: dict[str, list[str]] = {"DCGM_FI_DEV_GPU_TEMP": [], "DCGM_FI_DEV_XID_ERRORS": []}
    for n, node in enumerate(NODES):
        host = m.LABEL_HOSTNAME if n % 2 else m.LABEL_HOSTNAME_NEW
        driver = OTHER_DRIVER if node == DRIFTED else FLEET_DRIVER
        for gpu in range(GPUS):
            labels = (
                f'gpu="{gpu}",UUID="GPU-{n:04x}{gpu:04x}-0000-0000-0000-000000000000",'
                f'pci_bus_id="00000000:{0x18 + gpu:02X}:00.0",device="nvidia{gpu}",'
                f'modelName="NVIDIA H100 80GB HBM3",{host}="{node}",'
                f'DCGM_FI_DRIVER_VERSION="{driver}",container="",namespace="",pod=""'
            )
            rows["DCGM_FI_DEV_GPU_TEMP"].append(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {40 + gpu}")
            rows["DCGM_FI_DEV_XID_ERRORS"].append(f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} 0")
    lines += rows["DCGM_FI_DEV_GPU_TEMP"]
    lines += [
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
        *rows["DCGM_FI_DEV_XID_ERRORS"],
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _exporter() -> Iterator[int]:
    body = exposition().encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _query(url: str, promql: str) -> list[dict[str, Any]]:
    data = urllib.parse.urlencode({"query": promql}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=2) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return result if isinstance(result, list) else []


def _wait(url: str, promql: str, want: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the query's first value reaches `want` (a count)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            result = _query(url, promql)
            seen = int(float(result[0]["value"][1])) if result else 0
            if seen >= want:
                return
        time.sleep(0.2)
    pytest.fail(f"{promql} reached {seen} of {want} in {READY_TIMEOUT_S:.0f} s")


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        msg = "prometheus is not installed: `make test` installs it"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    tmp = tmp_path_factory.mktemp("drift-prometheus")
    groups = rule_groups(HealthConfig(), value_interval_s=1, window_interval_s=1, day_interval_s=1)
    n_rules = sum(len(g.rules) for g in groups)
    (tmp / "rules.yml").write_text(rules_yaml(groups))
    with _exporter() as exporter_port:
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(tmp / "rules.yml")],
            # No honor_labels: Prometheus sets `instance` to the one target, on every series.
            "scrape_configs": [
                {
                    "job_name": "dcgm-exporter",
                    "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
                }
            ],
        }
        (tmp / "prometheus.yml").write_text(json.dumps(config))
        port = free_port()
        log = tmp / "prometheus.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            hosts = "count(count by (Hostname, hostname) (DCGM_FI_DEV_GPU_TEMP))"
            _wait(url, hosts, len(NODES), proc, log)
            # Every rule has run since the whole fleet was scraped: recorded reads see it all.
            _wait(url, f'count({{{SENTINEL_LABEL}!=""}} > {time.time():.3f})', n_rules, proc, log)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_exporter_has_the_shape_that_hid_the_drift(prom_url: str) -> None:
    # One instance for every node: counted by instance, the fleet was one node per driver.
    by_instance = _query(
        prom_url,
        f"count by ({m.LABEL_DRIVER_VERSION}) "
        f"(count by ({m.LABEL_DRIVER_VERSION}, instance) (DCGM_FI_DEV_GPU_TEMP))",
    )
    assert sorted(int(float(r["value"][1])) for r in by_instance) == [1, 1]


@pytest.mark.parametrize("recorded", [False, True], ids=["raw", "recorded"])
async def test_a_drifted_node_gets_one_verdict_whichever_command_asks(
    prom_url: str, recorded: bool
) -> None:
    metrics = PrometheusMetrics(prom_url, timeout_s=10.0, recorded=recorded)
    triage = Triage(metrics, PrometheusInventory(metrics), None, HealthConfig())
    try:
        for _ in range(5):
            answers = await ask_every_way(triage, NODES, NODES)
            # The one target's scrape may time out (1 s) on a loaded machine: its series are
            # stale until the next, and a rule that ran then recorded none of them, so the
            # surfaces asked in that second see no fleet, or (the gauges read raw, the
            # versions recorded) see it without its versions and all agree on no drift.
            # Asked again, a real disagreement or a missed drift stays.
            if not answers.disagreements() and answers.levels[SWEEP].get(DRIFTED) is (
                VerdictLevel.DEGRADED
            ):
                break
            await asyncio.sleep(2.0)
        subset = await service.node_health(triage, "dgx-a[06-08]")
        one = await service.hw_faults(triage, f"{DRIFTED} drift")
    finally:
        await metrics.close()
    assert answers.disagreements() == []
    expected = {n: VerdictLevel.HEALTHY for n in NODES} | {DRIFTED: VerdictLevel.DEGRADED}
    for surface in (ALONE, HOSTLIST, HW_FAULTS, SWEEP):
        assert answers.levels[surface] == expected, surface
    assert answers.home == counts(expected)
    # No VBIOS label (dcgm-exporter's default) and no node_exporter: said, not passed over.
    assert {"firmware_drift", "kernel_drift"} <= set(answers.summary.not_run)
    assert answers.summary.not_run["firmware_drift"] == [
        f"{m.DCGM_FI_DEV_GPU_TEMP}{{{m.LABEL_VBIOS_VERSION}}}"
    ]
    (fault,) = answers.reports[DRIFTED].faults
    assert fault.kind is FaultKind.DRIVER_DRIFT
    assert fault.summary == f"driver {OTHER_DRIVER} differs from the fleet's {FLEET_DRIVER}"
    assert fault.evidence[0].note == f"fleet majority {FLEET_DRIVER} on 11 of 12 nodes"
    # A smaller hostlist is judged against the fleet, not against its three nodes.
    assert isinstance(subset, service.FleetSummary)
    assert {v.node: v.level for v in subset.verdicts}[DRIFTED] is VerdictLevel.DEGRADED
    assert subset.counts[VerdictLevel.DEGRADED] == 1
    assert isinstance(one, service.FaultsReport)
    assert [(f.node, f.kind) for g in one.groups for f in g.faults] == [
        (DRIFTED, FaultKind.DRIVER_DRIFT)
    ]
    if recorded:
        assert metrics.recorded_reads > 0  # the rules were read, not only the raw series
    await asyncio.sleep(0)


LABEL_SETS = [
    {"Hostname": "a", "instance": "x:9400"},
    {"hostname": "b", "instance": "x:9400"},
    {"Hostname": "a", "hostname": "b"},
    {"instance": "gpu-7:9100"},
    {"instance": "gpu-7"},
    {"instance": "h:abc"},
    {"instance": "a:1:2"},
    {"node": "n1"},
    {"instance": "x:9100", "node": "n1"},
]


@pytest.mark.parametrize(
    "labels", LABEL_SETS, ids=[",".join(ls) + str(i) for i, ls in enumerate(LABEL_SETS)]
)
def test_prometheus_names_a_series_node_as_the_checks_do(
    prom_url: str, labels: dict[str, str]
) -> None:
    """The fleet's version counts name nodes in PromQL; the checks in Python. They must agree
    on every spelling, or a node is counted under one name and judged under another."""
    expr = "vector(1)"
    for key, value in labels.items():
        expr = f'label_replace({expr}, "{key}", "{value}", "", "")'
    (row,) = _query(prom_url, with_node_key(expr, "node"))
    assert row["metric"][NODE_KEY] == node_name(labels)
