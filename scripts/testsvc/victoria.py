"""Debian's VictoriaMetrics on loopback, over the same fleet as the test Prometheus: the
history Prometheus was backfilled with (copied from its blocks by `vmctl prometheus`), the
same simulated exporter scraped every 5 s, and meowbot's recording rules evaluated by
`vmalert` into it. So the tests that read the fleet through Prometheus can read it through
VictoriaMetrics too (tests/integration/test_prometheus.py: BOTH), and any difference of the
engines shows.

It starts in a thread once the test Prometheus is up (its status file), and says so in a
status file of its own (MEOWBOT_TEST_VM_STATUS: `starting`, `ready <live_at>` or
`failed: <why>`), which tests/conftest.py's `need_service("VICTORIA_URL")` waits for.
`-search.latencyOffset` stays at its default (30 s), as sites run it: the newest 30 s of
samples are not read yet. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from .common import free_port, say, stop, wait_port

PACKAGES = {"victoria-metrics": "victoria-metrics"}  # vmctl and vmalert ship with it
N_NODES = 144  # tests/integration/prom_scenario.py: N_NODES
READY_METRIC = "DCGM_FI_DEV_GPU_TEMP"  # live only: the scrape brings it
LATENCY_OFFSET_S = 30  # VictoriaMetrics' default -search.latencyOffset
# Every 5 s, not the test Prometheus's 1 s: the tests read the fleet's state, not each second
# of it, and the scrape cost VictoriaMetrics 0.26 of this machine's 2 cores at 1 s (0.06).
SCRAPE_S = 5
LIVE_HISTORY_S = 40.0 + LATENCY_OFFSET_S  # as the test Prometheus's, once visible
WAIT_S = 600.0
SENTINELS = '{meowbot_recorded!=""}'
GROUP = re.compile(r"^- name: .*?(?=^- name: |\Z)", re.MULTILINE | re.DOTALL)
INTERVAL = re.compile(r"^  interval: (\d+)s$", re.MULTILINE)
SAYS = re.compile(r'("meowbot_recorded", ")\d+(")')
HEALTH_GROUP = "- name: meowbot-health-"  # bot/backends/prometheus_rules.py's group names


def _say(msg: str) -> None:
    say("victoria", msg)


def _query(url: str, promql: str) -> list[object]:
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as resp:
        body = json.loads(resp.read())
    result = body.get("data", {}).get("result", [])
    return result if isinstance(result, list) else []


def _count(url: str, promql: str) -> int:
    with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
        result = _query(url, f"count({promql})")
        return int(float(result[0]["value"][1])) if result else 0  # type: ignore[index]
    return 0


def _until(what: str, check: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what} within {timeout_s:.0f} s")


def _rules_for_vmalert(rules: str) -> str:
    """The test Prometheus's health rules, each sentinel saying its group's interval, as
    `meowbot prometheus-rules` writes them. Prometheus's window groups run every 30 s with
    sentinels saying 5 s (fresh for 70 s: scripts/testsvc/prometheus.py); here a rule's rows
    show 30 s after it ran (-search.latencyOffset), which leaves 70 s no room for a late run.
    /job-slow's, the regressions' and the precursors' groups are left out: no test reads them
    here, and they were a third of the rules' load on VictoriaMetrics."""

    def health_only(group: re.Match[str]) -> str:
        if not group[0].startswith(HEALTH_GROUP):
            return ""
        interval = INTERVAL.search(group[0])
        return SAYS.sub(rf"\g<1>{interval[1]}\g<2>", group[0]) if interval else group[0]

    return GROUP.sub(health_only, rules)


def scrape_config(target: str, interval_s: int, timeout_s: int) -> str:
    """`-promscrape.config` scraping one exporter whose series carry their own instance and
    job (`honor_labels`), as the test Prometheus scrapes it (bench/health_prometheus.py too)."""
    return json.dumps(  # JSON is YAML
        {
            "global": {"scrape_interval": f"{interval_s}s", "scrape_timeout": f"{timeout_s}s"},
            "scrape_configs": [
                {
                    "job_name": "meowbot-sim",
                    "honor_labels": True,
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
    )


def victoria_command(data: Path, port: int, scrape: Path | None, *flags: str) -> list[str]:
    """Single-node VictoriaMetrics on loopback over `data`, scraping as `scrape` says (None:
    nothing, to import into), every other flag at its default but for `flags`."""
    return [
        "victoria-metrics",
        f"-storageDataPath={data}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        *([f"-promscrape.config={scrape}"] if scrape is not None else []),
        "-loggerLevel=WARN",
        *flags,
    ]


def vmalert_command(rules: Path, url: str, port: int) -> list[str]:
    """vmalert evaluating `rules` against the VictoriaMetrics at `url` and writing the
    recorded series back into it."""
    return [
        "vmalert",
        f"-rule={rules}",
        f"-datasource.url={url}",
        f"-remoteWrite.url={url}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-evaluationInterval=5s",
        "-loggerLevel=WARN",
    ]


def copy_blocks(blocks: Path, end: datetime, url: str, log: Path) -> None:
    """What Prometheus' blocks in `blocks` hold up to `end`, copied into the VictoriaMetrics at
    `url` (`vmctl prometheus`; the head block, not yet a block, is not copied)."""
    vmctl = [
        "vmctl",
        "prometheus",
        "-s",
        f"--prom-snapshot={blocks}",
        f"--prom-filter-time-end={end:%Y-%m-%dT%H:%M:%SZ}",
        "--prom-concurrency=2",
        "--vm-disable-progress-bar",
        f"--vm-addr={url}",
    ]
    with log.open("wb") as out:
        # vmctl 1.79 stops when its output is not a terminal: `script` gives it one.
        subprocess.run(
            ["script", "-qec", shlex.join(vmctl), "/dev/null"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=WAIT_S,
        )
    # Imported rows are searchable after VictoriaMetrics' next flush (about a second).
    _until("the copied rows were not searchable", lambda: _flushed(url), 30)


def _flushed(url: str) -> bool:
    with contextlib.suppress(OSError):
        urllib.request.urlopen(f"{url}/internal/force_flush", timeout=10).close()
        return True
    return False


@contextlib.contextmanager
def copied(tmp: Path, blocks: Path, end: datetime) -> Iterator[str]:
    """A VictoriaMetrics of its own, scraping nothing, holding what a test's own backfilled
    Prometheus holds in `blocks` up to `end`: the same history through the other engine.
    Yields its URL."""
    port = free_port()
    with (tmp / "victoria.log").open("wb") as err:
        vm = subprocess.Popen(
            victoria_command(tmp / "vm-data", port, None),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_port(port, 20, vm, "victoria-metrics")
        url = f"http://127.0.0.1:{port}"
        copy_blocks(blocks, end, url, tmp / "vmctl.log")
        yield url
    finally:
        stop(vm)


def _prometheus_ready(status: Path) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        text = status.read_text().strip()
        if text.startswith("ready"):
            return text
        if text.startswith("failed"):
            raise RuntimeError(f"the test Prometheus did not start ({text})")
        time.sleep(0.5)
    raise RuntimeError("the test Prometheus was not ready")


def _bring_up(
    tmp: Path, env: dict[str, str], port: int, procs: list[subprocess.Popen[bytes]]
) -> float:
    _prometheus_ready(Path(env["MEOWBOT_TEST_PROM_STATUS"]))
    started = time.monotonic()
    url = f"http://127.0.0.1:{port}"
    scrape = tmp / "scrape.json"  # JSON is YAML
    target = f"127.0.0.1:{env['MEOWBOT_TEST_EXPORTER_PORT']}"
    scrape.write_text(scrape_config(target, SCRAPE_S, 4))
    log = tmp / "victoria.log"
    with log.open("wb") as err:
        vm = subprocess.Popen(
            victoria_command(tmp / "data", port, scrape),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    procs.append(vm)
    wait_port(port, 20, vm, "victoria-metrics")
    # The backfilled history, from Prometheus' blocks (the live part is VictoriaMetrics' own).
    end = datetime.fromtimestamp(int(env["MEOWBOT_TEST_SIM_NOW"]), UTC)
    copy_blocks(Path(env["MEOWBOT_TEST_PROM_DATA"]), end, url, tmp / "vmctl.log")
    copied = time.monotonic()
    alert_port = free_port()
    rules = tmp / "rules.yml"
    rules.write_text(_rules_for_vmalert(Path(env["MEOWBOT_TEST_PROM_RULES"]).read_text()))
    with (tmp / "vmalert.log").open("wb") as err:
        procs.append(
            subprocess.Popen(
                vmalert_command(rules, url, alert_port),
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        )
    _until(
        "the whole fleet was not scraped",
        lambda: _count(url, f"group by (instance) ({READY_METRIC})") >= N_NODES,
        120,
    )
    scraped = time.monotonic()
    # Every rule run once and visible (the newest 30 s are hidden): as the test Prometheus
    # waits for its rules, so that no test reads raw for want of a first evaluation.
    lines = rules.read_text().splitlines()
    n_rules = sum(1 for line in lines if line.lstrip(" -").startswith("record:"))
    _until(
        f"not all {n_rules} recording rules ran",
        lambda: _count(url, SENTINELS) >= n_rules,
        120 + LATENCY_OFFSET_S,
    )
    live_at = time.time() + max(0.0, LIVE_HISTORY_S - (time.monotonic() - scraped))
    _say(
        f"up in {time.monotonic() - started:.1f} s after Prometheus (history copied in "
        f"{copied - started:.1f} s)"
    )
    return live_at


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    port = free_port()
    status = tmp / "status"
    status.write_text("starting")
    procs: list[subprocess.Popen[bytes]] = []

    def run() -> None:
        try:
            status.write_text(f"ready {_bring_up(tmp, env, port, procs):.3f}")
        except Exception as exc:  # said as the tests will see it
            status.write_text(f"failed: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=run, name="victoria", daemon=True)
    thread.start()
    try:
        yield {"VICTORIA_URL": f"http://127.0.0.1:{port}", "MEOWBOT_TEST_VM_STATUS": str(status)}
    finally:
        thread.join(WAIT_S)
        for proc in reversed(procs):
            stop(proc)
