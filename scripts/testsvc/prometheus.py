"""A real Prometheus on loopback, fed by the simulated fleet of tests/integration/prom_scenario.py.

1. ``now`` is the wall clock floored to the minute; the fleet (144 nodes, seed 7, one fault of
   every node kind) is built around it.
2. Three hours of history of the metrics read as counters (increase/changes) are written as
   OpenMetrics by the project's Python and backfilled with
   ``promtool tsdb create-blocks-from openmetrics`` into the data folder.
3. ``tests.integration.sim_exporter`` serves the fleet's live exposition on a free port.
4. Prometheus starts on that data folder and scrapes the exporter every second
   (``honor_labels``: the series carry their own instance and job), and we wait until a
   live-only metric shows all 144 nodes.
5. It loads meowbot's recording rules as ``meowbot prometheus-rules --interval 1`` prints
   them (bot/backends/prometheus_rules.py; default config, every group each second), and we
   wait until every rule has run once, so the tests read recorded series where a rule
   records their query (tests/integration/test_prometheus.py compares them with raw reads).

Yields PROMETHEUS_URL, MEOWBOT_TEST_PROM_STATUS (a file: `starting`, `ready <live_at>` or
`failed: <why>`), MEOWBOT_TEST_SIM_NOW (the epoch the tests rebuild the fleet from) and
MEOWBOT_TEST_JOB_ALIASES (the exporter's job id aliases file: see sim_exporter.py).
The fleet's data comes from ``sys.executable``: testenv runs under the venv's Python, which
can import ``bot``. Standard library only here.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from .common import fail, free_port, say, stop, wait_port

PACKAGES = {"prometheus": "prometheus"}  # promtool ships in the same package

ROOT = Path(__file__).resolve().parents[2]
N_NODES = 144  # tests/integration/prom_scenario.py: N_NODES
READY_METRIC = "DCGM_FI_DEV_GPU_TEMP"  # not backfilled: only the live scrape brings it
HISTORY_TIMEOUT_S = 180.0  # 128 nodes on 2 busy cores: about 45 s seen
BACKFILL_TIMEOUT_S = 180.0
SCRAPE_TIMEOUT_S = 60.0  # the first scrapes of 144 targets, on a loaded 2-core machine
RULES_TIMEOUT_S = 60.0  # every rule meowbot prints, on 2 busy cores
# The rules run every 5 s, not at the scrape's 1 s: at 1 s Prometheus kept 0.84 of this
# machine's two cores busy for the whole suite, at 5 s 0.29 (a 1 s scrape alone costs 0.2).
RULES_INTERVAL_S = 5
# The health counters' window groups compare every GPU's counter over its window; here every
# series is younger than a day, so each run reads all its samples: they run every 30 s. Their
# sentinels still say 5 s, so the bot reads them fresh for 70 s (two intervals and a minute).
WINDOW_RULES_INTERVAL_S = 30
WINDOW_GROUP = re.compile(r"^(- name: meowbot-health-\d+s-\S+\n  interval: )\d+s$", re.MULTILINE)
SENTINELS = '{meowbot_recorded!=""}'  # bot/backends/prometheus_rules.py: one a rule


def _say(msg: str) -> None:
    say("prometheus", msg)


def _fail(msg: str, logs: Sequence[Path] = ()) -> NoReturn:
    fail("prometheus", msg, logs)


def prometheus_command(config: Path, data: Path, port: int) -> list[str]:
    """Prometheus on loopback over a backfilled data folder (retention past the history)."""
    return [
        "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=30d",
        "--log.level=warn",
    ]


BLOCK_S = 7200
"""promtool writes blocks of 2 h, aligned to the epoch."""


def split_by_block(text: Path, folder: Path) -> list[Path]:
    """The OpenMetrics file `text` cut into one file a 2 h block in `folder` (each family's
    header repeated in each file it has samples in). promtool 2.42 reads its whole input once
    for each block it writes (three days of history: 37 reads of 150 MB); cut first, each
    sample is read once."""
    parts: dict[int, tuple[Path, TextIO]] = {}
    family = 0  # a new one at each header, after samples
    header: list[str] = []
    written: dict[int, int] = {}  # block -> the family whose header it has last
    in_header = False
    with contextlib.ExitStack() as stack, text.open() as src:
        for line in src:
            if line.startswith("#"):
                if line.startswith("# EOF"):
                    break
                if not in_header:
                    header, in_header = [], True
                    family += 1
                header.append(line)
                continue
            in_header = False
            block = int(float(line.rsplit(" ", 1)[1])) // BLOCK_S
            if block not in parts:
                path = folder / f"block-{block}.om"
                parts[block] = (path, stack.enter_context(path.open("w")))
            out = parts[block][1]
            if written.get(block) != family:
                out.writelines(header)
                written[block] = family
            out.write(line)
        for _, out in parts.values():
            out.write("# EOF\n")
    return [path for _, (path, _) in sorted(parts.items())]


def backfill_openmetrics(text: Path, data: Path, timeout_s: float = 300) -> None:
    """Writes the OpenMetrics history in `text` as blocks into `data`, then deletes `text`
    (a week of a fleet is gigabytes of text): one promtool a 2 h block, on every core."""
    folder = text.parent / f"{text.name}-blocks"
    folder.mkdir(exist_ok=True)
    try:
        parts = split_by_block(text, folder)
        text.unlink()
        deadline = time.monotonic() + timeout_s

        def one(part: Path) -> None:
            subprocess.run(
                ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(part), str(data)],
                check=True,
                capture_output=True,
                timeout=max(1.0, deadline - time.monotonic()),
            )
            part.unlink()

        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            for done in [pool.submit(one, part) for part in parts]:
                done.result()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class BackfilledPrometheus:
    """A Prometheus of its own over a backfilled data folder, on a free loopback port, for a
    test module or a bench: started, restarted (to read blocks added since) and stopped.
    It is ready when `ready_query` answers at `at_s` (the history's end), not at start-up:
    opening a week of blocks takes seconds."""

    def __init__(
        self, folder: Path, data: Path, ready_query: str, at_s: float, timeout_s: float = 60
    ) -> None:
        self.config = folder / "prometheus.yml"
        self.config.write_text(json.dumps({"global": {"scrape_interval": "1m"}}))
        self.data, self.ready_query, self.at_s, self.timeout_s = data, ready_query, at_s, timeout_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            prometheus_command(self.config, self.data, self.port),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.timeout_s
        query = urllib.parse.urlencode({"query": self.ready_query, "time": self.at_s})
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the backfilled Prometheus exited")
            with (
                contextlib.suppress(OSError, ValueError, KeyError),
                urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=5) as r,
            ):
                if json.load(r)["data"]["result"]:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"the backfilled Prometheus never answered {self.ready_query}")

    def blocks_loaded(self) -> int:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("prometheus_tsdb_blocks_loaded "):
                    return int(float(line.split()[1]))
        return -1

    def settle(self, most: int = 12, timeout_s: float = 900) -> int:
        """Waits for Prometheus to compact the backfill's 2 h blocks (promtool writes no
        larger) into the few large ones a week-old server holds: compaction would share the
        cores with a bench's reads, and 84 blocks cost every query 84 index lookups. Returns
        the blocks loaded."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                if 0 < self.blocks_loaded() <= most:
                    break
            time.sleep(5)
        time.sleep(10)  # past the last compaction's clean-up
        return self.blocks_loaded()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> BackfilledPrometheus:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def backfill_recording_rules(
    url: str, rules: Path, start_s: int, end_s: int, data: Path, timeout_s: float = 900
) -> int:
    """Recording rules as if they had run all along from `start_s` to `end_s`: promtool
    evaluates them against the Prometheus at `url` (each group at its interval, from
    `start_s`) and writes the blocks, which are moved into `data`. The Prometheus serving
    `data` must then be restarted to read them (it may overlap them with the raw blocks).
    Returns how many blocks were added."""
    out = data.parent / f"{data.name}-rules"
    out.mkdir(exist_ok=True)
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "rules",
            f"--url={url}",
            f"--start={start_s}",
            f"--end={end_s}",
            f"--output-dir={out}",
            "--quiet",
            str(rules),
        ],
        check=True,
        capture_output=True,
        timeout=timeout_s,
    )
    blocks = [b for b in out.iterdir() if (b / "meta.json").exists()]
    for block in blocks:
        block.rename(data / block.name)
    return len(blocks)


def _config(exporter_port: int, rules: Path) -> str:
    # JSON is YAML: no YAML writer needed.
    return json.dumps(
        {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": "meowbot-sim",
                    "honor_labels": True,
                    "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
                }
            ],
        },
        indent=2,
    )


def _query(url: str, promql: str) -> list[object]:
    data = urllib.parse.urlencode({"query": promql}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=2) as resp:
        body = json.loads(resp.read())
    result = body.get("data", {}).get("result", [])
    return result if isinstance(result, list) else []


LIVE_HISTORY_S = 40.0
"""Seconds of live scrapes (one a second) before a test reads Prometheus: exported as the wall
time in the status file, which tests/conftest.py's `need_service` waits for, so the other
services and the tests that need no Prometheus do not wait with it."""


def _wait_for_fleet(url: str, proc: subprocess.Popen[bytes], logs: Sequence[Path]) -> None:
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    promql = f"group by (instance) ({READY_METRIC})"
    seen = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _fail(f"prometheus exited with {proc.returncode} at start-up", logs)
        with contextlib.suppress(OSError, ValueError):
            seen = len(_query(url, promql))
            if seen >= N_NODES:
                return
        time.sleep(0.2)
    _fail(f"only {seen} of {N_NODES} nodes scraped within {SCRAPE_TIMEOUT_S:.0f} s", logs)


def _rules(tmp: Path) -> tuple[Path, int]:
    """meowbot's recording rules for the default config, and how many there are."""
    rules = tmp / "rules.yml"
    log = tmp / "rules.log"
    env = {k: v for k, v in os.environ.items() if k != "MEOWBOT_CONFIG"}
    with log.open("wb") as err:
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "bot",
                "prometheus-rules",
                "--interval",
                str(RULES_INTERVAL_S),
                "-o",
                str(rules),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            timeout=60,
        )
    if code != 0:
        _fail(f"meowbot prometheus-rules failed with {code}", [log])
    text = rules.read_text()
    count = sum(1 for line in text.splitlines() if line.startswith("  - record: "))
    return rules, count


def _slow_windows(rules: Path, prom: subprocess.Popen[bytes]) -> None:
    """The window groups from now on every WINDOW_RULES_INTERVAL_S: they load at the 5 s of
    the rest, so the wait for every rule's first run is not one of their 30 s intervals, and
    then go slower for the suite (SIGHUP: Prometheus reloads its rules)."""
    rules.write_text(WINDOW_GROUP.sub(rf"\g<1>{WINDOW_RULES_INTERVAL_S}s", rules.read_text()))
    prom.send_signal(signal.SIGHUP)


def _wait_for_rules(url: str, expected: int, logs: Sequence[Path]) -> None:
    """Until every rule has run since the whole fleet was scraped. The rules load with
    Prometheus and may first run before the first scrape, recording nothing of the live-only
    metrics; on a busy machine their next run can be seconds away, so "ran once" is not
    enough (a test once read an empty recorded throttle series that way)."""
    deadline = time.monotonic() + RULES_TIMEOUT_S
    since = time.time()
    promql = f"count({SENTINELS} > {since:.3f})"  # a sentinel's value: when its rule ran
    seen = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
            result = _query(url, promql)
            seen = int(float(result[0]["value"][1])) if result else 0  # type: ignore[index]
            if seen >= expected:
                return
        time.sleep(0.2)
    _fail(f"only {seen} of {expected} recording rules ran within {RULES_TIMEOUT_S:.0f} s", logs)


def _backfill(tmp: Path, now_s: int, data: Path) -> None:
    history = tmp / "history.om"
    log = tmp / "history.log"
    with log.open("wb") as err:
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "tests.integration.sim_exporter",
                "--now",
                str(now_s),
                "--history",
                str(history),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
            timeout=HISTORY_TIMEOUT_S,
        )
    if code != 0:
        _fail(f"writing the fleet's history failed with {code}", [log])
    try:
        # About 480 MB of text; the blocks hold it in a few MB.
        backfill_openmetrics(history, data, timeout_s=BACKFILL_TIMEOUT_S)
    except subprocess.CalledProcessError as exc:
        blog = tmp / "promtool.log"
        blog.write_bytes(exc.stdout + exc.stderr)
        _fail(f"promtool backfill failed with {exc.returncode}", [blog])


BACKGROUND_VAR = "MEOWBOT_TEST_PROM_BACKGROUND"
"""Set (by `make test`), the start returns at once and Prometheus comes up in a thread while
the first tests (the unit tests, which need no service) run; the tests that read it wait for
its status file (tests/conftest.py: need_service). Unset (a benchmark under testenv), the
start waits until Prometheus is up, as before."""
STATUS_WAIT_S = HISTORY_TIMEOUT_S + BACKFILL_TIMEOUT_S + SCRAPE_TIMEOUT_S + RULES_TIMEOUT_S


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    now_s = int(time.time()) // 60 * 60
    port, exporter_port = free_port(), free_port()
    aliases = tmp / "job-aliases.json"  # written by tests, read by the exporter at each scrape
    status = tmp / "status"
    status.write_text("starting")
    procs: list[subprocess.Popen[bytes]] = []

    def run() -> None:
        try:
            live_at = _bring_up(tmp, now_s, port, exporter_port, aliases, procs)
            status.write_text(f"ready {live_at:.3f}")
        except SystemExit as exc:  # _fail: the reason is its message
            status.write_text(f"failed: {exc.code}")
        except Exception as exc:  # a start-up's own error, said as the tests will see it
            status.write_text(f"failed: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=run, name="prometheus", daemon=True)
    thread.start()
    try:
        if not env.get(BACKGROUND_VAR):
            thread.join(STATUS_WAIT_S)
            text = status.read_text()
            if not text.startswith("ready"):
                sys.exit(f"testenv: prometheus: {text.removeprefix('failed: ')}")
        yield {
            "PROMETHEUS_URL": f"http://127.0.0.1:{port}",
            "MEOWBOT_TEST_PROM_STATUS": str(status),
            "MEOWBOT_TEST_SIM_NOW": str(now_s),
            "MEOWBOT_TEST_JOB_ALIASES": str(aliases),
            # For scripts/testsvc/victoria.py: the same history, exporter and rules.
            "MEOWBOT_TEST_PROM_DATA": str(tmp / "data"),
            "MEOWBOT_TEST_EXPORTER_PORT": str(exporter_port),
            "MEOWBOT_TEST_PROM_RULES": str(tmp / "rules.yml"),
        }
    finally:
        thread.join(STATUS_WAIT_S)  # a start still under way ends before its processes stop
        # Newest first: Prometheus before the target it scrapes; each waited for.
        for proc in reversed(procs):
            stop(proc)


def _bring_up(
    tmp: Path,
    now_s: int,
    port: int,
    exporter_port: int,
    aliases: Path,
    procs: list[subprocess.Popen[bytes]],
) -> float:
    """The exporter, the history backfilled, Prometheus and its rules; when the live history
    is long enough for the medians the tests read (epoch seconds)."""
    started = time.monotonic()
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    exporter_log = tmp / "exporter.log"
    prom_log = tmp / "prometheus.log"
    # The exporter starts while the history is written and backfilled.
    with exporter_log.open("wb") as err:
        exporter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.sim_exporter",
                "--now",
                str(now_s),
                "--port",
                str(exporter_port),
                "--aliases",
                str(aliases),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    procs.append(exporter)
    _backfill(tmp, now_s, data)
    rules, n_rules = _rules(tmp)
    backfilled = time.monotonic()
    wait_port(exporter_port, 20, exporter, "the simulated fleet's exporter")
    config = tmp / "prometheus.yml"
    config.write_text(_config(exporter_port, rules))
    with prom_log.open("wb") as err:
        prom = subprocess.Popen(
            prometheus_command(config, data, port), stdout=subprocess.DEVNULL, stderr=err
        )
    procs.append(prom)
    url = f"http://127.0.0.1:{port}"
    wait_port(port, 20, prom, "prometheus")
    _wait_for_fleet(url, prom, [prom_log, exporter_log])
    scraped = time.monotonic()
    _wait_for_rules(url, n_rules, [prom_log])
    _slow_windows(rules, prom)
    # /job-slow reads its proxies as medians over the window: with a few seconds of live
    # samples, one GPU read between two steps (a dip of a few seconds) would be the median.
    live_at = time.time() + max(0.0, LIVE_HISTORY_S - (time.monotonic() - scraped))
    _say(
        f"up in {time.monotonic() - started:.1f} s "
        f"(history and backfill {backfilled - started:.1f} s), fleet now={now_s}, "
        f"{n_rules} recording rules"
    )
    return live_at
