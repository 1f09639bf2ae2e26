"""/hw-faults over 4,096 nodes from a real Prometheus or VictoriaMetrics: run by hand.

    .venv/bin/python bench/health_prometheus.py [--nodes 4096] [--runs 20] [--hours 25]
        [--step 1800] [--scrape-interval 30] [--profile] [--job] [--settle SECONDS]
        [--engine prometheus|victoria] [--sweeps N] [--engine-flag FLAG ...]

Target: < 2 s p95, with a number of PromQL queries that does not grow with the node count.
The set-up follows scripts/testsvc/prometheus.py (the test environment's Prometheus), at scale:

1. ``now`` is the wall clock floored to the minute; ``SimFleet.scenario(seed=1, n_nodes=4096)``
   is built around it (every fault kind, a leaf switch outage, about 3 % of nodes faulty).
2. The history of the metrics /hw-faults reads with increase()/changes() (the counters and the
   boot time, as in tests/integration/prom_scenario.HISTORY_METRICS) is written as OpenMetrics
   over the whole 24 h window /hw-faults reads (default 25 h every 30 min, ~240k series) and
   backfilled with ``promtool tsdb create-blocks-from openmetrics``. Counters are read as the
   difference of a few instants (the window's start and its halves down to an hour), which
   the 30-minute step hits exactly, so each query finds the samples it would on a day-old
   Prometheus. The window is cut where promtool cuts its 2 h blocks anyway, so the slices are
   written and backfilled in parallel (one per core) and give the very blocks one run would.
3. Meanwhile a child process (this script with ``--serve``) renders the fleet's live exposition
   once (~850k series, ~200 MB) and serves those bytes on a free port: the counters carry on
   from exactly where the history ends.
4. Prometheus starts on that data folder and scrapes the exporter every ``--scrape-interval``
   seconds (default 30; ingesting 850k series takes ~16 s of one of this machine's 2 cores, so
   a longer interval shows the queries' own cost; the timeout is 5 s short of the interval;
   ``honor_labels``: the series carry their own instance and job); we wait, bounded, until
   ``count(DCGM_FI_DEV_GPU_TEMP)`` is the number of GPUs exported (8 a node, less the GPUs the
   scenario's GPU_MISSING faults took away: 32,762 of 32,768 at 4,096 nodes).
5. Prometheus loads meowbot's recording rules as ``meowbot prometheus-rules`` prints them
   without a config (bot/backends/prometheus_rules.py: gauges every 30 s, counter windows
   every 120 s, the 24 h window every 240 s, /job-slow's pace every 60 s), and we wait until
   every rule has run since the fleet's first full scrape (a run before it records nothing of
   the live-only metrics; up to a 240 s interval), then ``--settle`` seconds more, past the
   burst of the groups' first runs; ``--no-rules`` loads none (every read raw: the old figure).
   ``--steady N`` samples Prometheus' CPU use at rest over N seconds after the runs.
6. ``bot.triage.service.hw_faults`` runs ``--runs`` times over the whole fleet, each time with a
   fresh ``PrometheusInventory`` (so every call lists the nodes too: the worst case) and a
   fresh read of every series (nothing is cached between calls: the recorded series are
   Prometheus' own, re-evaluated on its schedule), then once on a two-node hostlist to show
   that the query count is the same.

``--job`` measures /job-slow instead: a clean fleet runs one training job on every
node, one node 5 % slow from a power cap; 48 h of its per-rank step times (32k series at
4,096 nodes) are backfilled every 5 min, inside Prometheus' 5 min lookback, so every step of
the 48 h pace range finds every rank; with the rules, the pace group is backfilled over those
48 h as an operator would (``promtool tsdb create-blocks-from rules`` against this Prometheus,
blocks moved into its data folder); ``slow_job`` (step times, pace, health and proxies over
the job's 4,096 nodes) runs ``--runs`` times, then on 16 of the nodes for the query count.
Target: < 2 s, a fixed number of queries. ``--job --proxies`` reads the same job under an id
that no step-time series carries, so its pace comes from the proxies over its 4,096 nodes.

``--sweeps N``: after the /hw-faults runs, the fleet is read N times as the alert sweep reads it
(bot/alerts/runtime.py's ``_sweep``: ``fleet_faults`` over the sweep's window, one triage kept
across sweeps, back to back), after one sweep not counted that also lists the nodes (the
inventory's listing, reloaded once a minute, is counted apart). Printed: P50 and max wall time,
PromQL queries a sweep, and the engine's CPU a sweep: its CPU seconds (from /proc) across the N
sweeps, less its rate at rest (ingest, rules) measured just before over as long as the sweeps
should take and at least a cycle of the periodic work (the scrape interval, the slowest rule
group: 240 s), times the sweeps' span, over N. From those, at the bot's default sweep every 5 s:
queries and engine CPU seconds a minute, for the fleet and per 1,000 nodes.

``--engine victoria`` reads Debian's VictoriaMetrics (1.79) instead, started as
scripts/testsvc/victoria.py starts it for the tests (the command lines are shared). The history
is the same OpenMetrics, written per slice as above and pushed, instead of promtool's blocks,
to ``/api/v1/import/prometheus`` of a VictoriaMetrics of its own over the data folder (its
whole-second timestamps sent in milliseconds, the text format's unit; 1.79 would also take a
number below 2^31 as seconds), stopped once its rows are flushed and counted. The measured
VictoriaMetrics then starts over that folder and scrapes the exporter at ``--scrape-interval``
(``honor_labels``), every flag at its default but two the one-target exporter needs: a
``-promscrape.maxScrapeSize`` past its 200 MB a scrape at 4,096 nodes (16 MB by default; a
site's targets are one a node) and ``-promscrape.streamParse``. ``vmalert`` evaluates the same
rules file (every group) into it, at its defaults: it asks each rule at its run's time rounded
down to the group's interval (``-datasource.queryTimeAlignment``), so a 240 s group's rows
are up to 240 s older than its run. ``-search.latencyOffset`` stays at 30 s, as sites run it:
the newest 30 s of samples are hidden from every query, so the fleet shows 30 s after its
first full scrape and each rule's rows 30 s after its run; the waits allow for both
(docs/prometheus.md, "VictoriaMetrics"). RSS and CPU are given for VictoriaMetrics and for
vmalert apart. ``--engine-flag`` adds a flag to the engine's command line (a VictoriaMetrics
limit such as ``-search.maxQueryDuration``, 30 s by default). ``--job`` reads Prometheus only.

Only the last hour of the history is at a finer step than 30 min on a real day-old Prometheus;
increase() reads that hour of samples for series younger than an hour, and the difference
terms read one sample each whatever the step. For the in-process figure see bench/health.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.alerts.config import AlertsConfig
from bot.app import prometheus_triage, sim_triage
from bot.backends.http import Deadline
from bot.backends.prometheus import (
    PrometheusInventory,
    PrometheusMetrics,
    counts_events,
    moved_query,
)
from bot.backends.prometheus_rules import (
    SENTINEL_LABEL,
    RuleGroup,
    rule_groups,
    rules_yaml,
    windows_for,
)
from bot.backends.promql import _offsets, query_for
from bot.backends.sim.fleet import SimFleet
from bot.models import FaultKind, Job
from bot.triage import service
from bot.triage.checks import HealthConfig, enabled_checks, requests_for
from bot.triage.jobs import SlowJobReport, slow_job
from bot.triage.service import FaultsReport, fleet_faults
from bot.triage.stragglers import StragglerConfig, proxy_requests
from bot.triage.table import Reading
from scripts.testsvc.common import free_port, stop, wait_port
from scripts.testsvc.prometheus import prometheus_command
from scripts.testsvc.victoria import (
    LATENCY_OFFSET_S,
    scrape_config,
    victoria_command,
    vmalert_command,
)
from tests.integration.prom_scenario import floor_minute
from tests.integration.sim_exporter import CONTENT_TYPE

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
SEED = 1
READY_METRIC = "DCGM_FI_DEV_GPU_TEMP"  # not backfilled: only the live scrape brings it
BLOCK_S = 7200  # promtool cuts its blocks at multiples of 2 h since the epoch
EXPORTER_START_S = 120.0
BACKFILL_TIMEOUT_S = 1800.0  # promtool on a loaded 2-core machine took over 600 s once
READY_TIMEOUT_S = 300.0
DENSE_STEP_S = 240  # under the 5-minute lookback
DENSE_SPAN_S = 2400  # the benchmark reads within 40 minutes of `now`
RULES_TIMEOUT_S = 420.0
SENTINELS = f'{{{SENTINEL_LABEL}!=""}}'  # one row a recording rule, valued when it last ran
PACE_GROUP = "meowbot-job-slow-pace"
PROGRESS_EVERY_S = 10.0

T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f} s] {msg}", flush=True)


def tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return ""
    return f"--- {path} (last lines)\n" + "\n".join(
        path.read_text(errors="replace").splitlines()[-lines:]
    )


# --- the exporter (child process) --------------------------------------------------------------
JOB_NAME = "train-big"
JOB_CAUSE = FaultKind.THROTTLE_POWER
JOB_SLOWDOWN = 0.05
NO_STEP_TIMES_ID = "1"  # --proxies: the job read under an id that no step-time series carries


def build_fleet(now_s: int, n_nodes: int, job: bool) -> SimFleet:
    """/hw-faults: the seeded scenario. /job-slow (``job``): a clean fleet running one training
    job on every node, one node of it 5 % slow from a power cap since 3 h before ``now``."""
    now = datetime.fromtimestamp(now_s, UTC)
    if not job:
        return SimFleet.scenario(seed=SEED, n_nodes=n_nodes, now=now)
    fleet = SimFleet(n_nodes, seed=SEED, now=now, fault_rate=0.0)
    big = fleet.add_job(fleet.nodes, name=JOB_NAME)
    fleet.inject_straggler(
        big.job_id, JOB_CAUSE, since=now - timedelta(hours=3), slowdown=JOB_SLOWDOWN
    )
    return fleet


RERENDER_S = 60.0
"""With --job, how often the exposition is rendered again at the wall clock: /job-slow reads
its proxies as medians over 10 minutes, and a GPU sampled between two steps at one instant must
not stay so for the whole window, as it would in bytes rendered once."""


def serve(now_s: int, n_nodes: int, port: int, job: bool = False) -> None:
    """The fleet's exposition at ``now``, rendered once and served as the same bytes each
    scrape; with ``job``, rendered again every minute at the wall clock, as an exporter moves."""
    started = time.perf_counter()
    fleet = build_fleet(now_s, n_nodes, job)
    body = fleet.exposition(at=fleet.now).encode()
    series = body.count(b"\n") - body.count(b"\n#") - body.startswith(b"#")
    if job:

        def rerender() -> None:
            nonlocal body
            while True:
                time.sleep(RERENDER_S)
                body = fleet.exposition(at=datetime.now(UTC)).encode()

        threading.Thread(target=rerender, name="render", daemon=True).start()
    else:
        del fleet  # only the bytes are served
    print(
        f"exposition: {series} series, {len(body) / 1e6:.0f} MB, "
        f"rendered in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            data = body  # one render for the whole answer, whatever the renderer does meanwhile
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    try:
        server.serve_forever()
    finally:
        server.server_close()


# --- history and backfill ----------------------------------------------------------------------
@dataclass(frozen=True)
class Slice:
    first_s: int
    last_s: int
    step_s: int
    path: Path
    out: Path


@dataclass(frozen=True)
class SliceDone:
    samples: int
    text_bytes: int
    gen_s: float
    load_s: float  # promtool's blocks, or VictoriaMetrics' import


_FLEET: SimFleet | None = None  # set before the workers fork; they inherit it
_HISTORY: list[str] = []
_IMPORT_URL: list[str] = []  # VictoriaMetrics to push the history to; empty: promtool's blocks


def slices(now_s: int, hours: float, step_s: int, tmp: Path) -> list[Slice]:
    """The history's instants (every ``step_s`` up to ``now``) cut at promtool's block edges."""
    count = int(hours * 3600) // step_s
    times = [now_s - (count - k) * step_s for k in range(count + 1)]
    groups: dict[int, list[int]] = {}
    for t in times:
        groups.setdefault(t // BLOCK_S, []).append(t)
    return [
        Slice(ts[0], ts[-1], step_s, tmp / f"history-{i}.om", tmp / f"blocks-{i}")
        for i, ts in enumerate(groups.values())
    ]


def backfill_slice(s: Slice) -> SliceDone:
    assert _FLEET is not None
    started = time.perf_counter()
    span_s = s.last_s - s.first_s
    size = 0
    with s.path.open("w", encoding="utf-8") as out:
        for chunk in _FLEET.openmetrics_history(
            hours=(span_s + 0.5) / 3600,  # half a second more: no instant lost to rounding
            step_s=s.step_s,
            metrics=_HISTORY,
            end=datetime.fromtimestamp(s.last_s, UTC),
            max_series=10_000_000,  # the guard is for tests; this is ~240k series on purpose
        ):
            out.write(chunk)
            size += len(chunk)
    generated = time.perf_counter()
    if _IMPORT_URL:
        samples = import_history(s.path, _IMPORT_URL[0])
        s.path.unlink()
        return SliceDone(samples, size, generated - started, time.perf_counter() - generated)
    s.out.mkdir()
    log = s.path.with_suffix(".log")
    with log.open("wb") as err:
        code = subprocess.call(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(s.path), str(s.out)],
            stdout=err,
            stderr=subprocess.STDOUT,
            timeout=BACKFILL_TIMEOUT_S,
        )
    if code != 0:
        raise RuntimeError(f"promtool failed with {code}\n{tail(log)}")
    s.path.unlink()
    samples = 0
    for block in s.out.iterdir():
        meta = json.loads((block / "meta.json").read_text())
        samples += int(meta.get("stats", {}).get("numSamples", 0))
    return SliceDone(samples, size, generated - started, time.perf_counter() - generated)


def milliseconds(text: bytes) -> tuple[bytes, int]:
    """Whole lines of OpenMetrics history with each sample's timestamp in milliseconds (the
    Prometheus text format's unit; OpenMetrics' is seconds, and the history's are whole
    seconds), and how many samples they hold. Comments (HELP, TYPE, EOF) are left as they are."""
    lines = text.split(b"\n")
    out = b"\n".join(ln + b"000" if ln and ln[0] != 35 else ln for ln in lines)  # 35: "#"
    comments = text.count(b"\n#") + text.startswith(b"#")
    return out, text.count(b"\n") - comments


def import_history(path: Path, url: str, chunk_bytes: int = 1 << 22) -> int:
    """The OpenMetrics file at `path` pushed to VictoriaMetrics' `/api/v1/import/prometheus`
    as one streamed request, its timestamps in milliseconds; the number of samples sent."""
    samples = 0

    def body() -> Iterator[bytes]:
        nonlocal samples
        rest = b""
        with path.open("rb") as f:
            while chunk := f.read(chunk_bytes):
                chunk = rest + chunk
                cut = chunk.rfind(b"\n") + 1
                chunk, rest = chunk[:cut], chunk[cut:]
                out, n = milliseconds(chunk)
                samples += n
                yield out
        if rest:
            out, n = milliseconds(rest + b"\n")
            samples += n
            yield out

    req = urllib.request.Request(f"{url}/api/v1/import/prometheus", data=body(), method="POST")
    with urllib.request.urlopen(req, timeout=BACKFILL_TIMEOUT_S) as resp:
        if resp.status != 204:
            raise RuntimeError(f"/api/v1/import/prometheus answered {resp.status}")
    return samples


def counters() -> list[str]:
    """The metrics read with increase()/changes(): the health checks' and /job-slow's proxies'."""
    checks = enabled_checks(HealthConfig())
    reads = [*requests_for(checks), *proxy_requests(StragglerConfig())]
    return list(dict.fromkeys(r.name for r in reads if r.reading is not Reading.VALUE))


def backfill(
    fleet: SimFleet,
    hours: float,
    step_s: int,
    tmp: Path,
    data: Path,
    metrics: list[str],
    dense_offsets: Sequence[int] = (),
    import_url: str | None = None,
) -> None:
    """The history written as OpenMetrics a slice at a time, in parallel, and loaded: as
    promtool's blocks moved into `data`, or with `import_url`, pushed to that VictoriaMetrics."""
    global _FLEET
    _FLEET = fleet
    _HISTORY[:] = metrics
    _IMPORT_URL[:] = [import_url] if import_url else []
    tmp = tmp / f"pass-{step_s}"
    tmp.mkdir(exist_ok=True)
    parts = slices(fleet.now_s, hours, step_s, tmp)
    # Where the counters' difference terms look (each offset of a 24 h or 1 h window), every
    # few minutes for a while: so they find a sample whenever in the next DENSE_SPAN_S the
    # benchmark reads, not only in the 5 minutes after `now` (Prometheus' lookback).
    patches = [
        Slice(
            fleet.now_s - o,
            fleet.now_s - o + DENSE_SPAN_S,
            DENSE_STEP_S,
            tmp / f"dense-{o}.om",
            tmp / f"dense-{o}",
        )
        for o in dense_offsets
        if o - DENSE_SPAN_S >= 0 and o <= hours * 3600
    ]
    parts += patches
    say(
        f"history: {len(_HISTORY)} metric(s), {hours:g} h every "
        f"{step_s} s, in {len(parts) - len(patches)} slice(s) cut at promtool's 2 h block edges"
        + (
            f", and every {DENSE_STEP_S} s for {DENSE_SPAN_S // 60} min after each of "
            f"{len(patches)} offsets the counters are read at"
            if patches
            else ""
        )
    )
    started = time.perf_counter()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(min(len(parts), os.cpu_count() or 1)) as pool:
        done = pool.map(backfill_slice, parts, chunksize=1)
    _FLEET = None
    loader = "imported" if import_url else "promtool"
    for s, d in zip(parts, done, strict=True):
        say(
            f"  slice {datetime.fromtimestamp(s.first_s, UTC):%H:%M}.."
            f"{datetime.fromtimestamp(s.last_s, UTC):%H:%M}: {d.text_bytes / 1e9:.2f} GB of "
            f"OpenMetrics in {d.gen_s:.1f} s, {loader} {d.load_s:.1f} s, "
            f"{d.samples:,} samples"
        )
        if not import_url:
            for block in s.out.iterdir():
                shutil.move(str(block), data / block.name)
    say(
        f"history and backfill: {time.perf_counter() - started:.1f} s, "
        f"{sum(d.samples for d in done):,} samples"
    )


# --- Prometheus --------------------------------------------------------------------------------
def config(exporter_port: int, interval_s: int, rules: Path | None) -> str:
    return json.dumps(  # JSON is YAML
        {
            "global": {
                "scrape_interval": f"{interval_s}s",
                "scrape_timeout": f"{max(5, interval_s - 5)}s",
                "evaluation_interval": f"{interval_s}s",
            },
            "rule_files": [str(rules)] if rules else [],
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


def instant(url: str, promql: str) -> list[dict[str, object]]:
    data = urllib.parse.urlencode({"query": promql}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=10) as resp:
        body = json.loads(resp.read())
    result = body.get("data", {}).get("result", [])
    return result if isinstance(result, list) else []


def scalar(url: str, promql: str) -> float | None:
    with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError):
        result = instant(url, promql)
        if result:
            return float(result[0]["value"][1])  # type: ignore[index]
    return None


def bench_rule_groups(value_interval_s: int = 30) -> list[RuleGroup]:
    """What `meowbot prometheus-rules` prints without MEOWBOT_CONFIG (the alert sweep reads
    the health window unless configured otherwise: no window of its own)."""
    health = HealthConfig()
    windows = windows_for(health, sweep_window_s=AlertsConfig.model_validate({}).sweep_window_s)
    return rule_groups(
        health, StragglerConfig(), windows=windows, value_interval_s=value_interval_s
    )


def write_rules(tmp: Path) -> tuple[Path, Path, int]:
    """meowbot's recording rules for the default config (what `meowbot prometheus-rules`
    prints), and the pace group alone (backfilled for --job); how many rules in all."""
    groups = bench_rule_groups()
    rules = tmp / "rules.yml"
    rules.write_text(rules_yaml(groups))
    pace = tmp / "pace-rules.yml"
    pace.write_text(rules_yaml([g for g in groups if g.name == PACE_GROUP]))
    return rules, pace, sum(len(g.rules) for g in groups)


def wait_for_rules(
    url: str,
    expected: int,
    since: float,
    procs: Sequence[subprocess.Popen[bytes]],
    timeout_s: float = RULES_TIMEOUT_S,
) -> None:
    """Until every rule has run since `since` (the fleet's first full scrape): the rules load
    with Prometheus, and a first run before the scrape records nothing of the live-only
    metrics (scripts/testsvc/prometheus.py waits the same way)."""
    wait_for_count(
        url,
        f"count({SENTINELS} > {since:.3f})",
        expected,
        timeout_s,
        2.0,
        procs,
        lambda seen: f"the recording rules to run since the full scrape: {seen} of {expected}",
    )


def backfill_pace(url: str, pace: Path, now_s: int, tmp: Path, data: Path) -> None:
    """The pace rules over the 48 h of step times, as an operator backfills a new recording
    rule: `promtool tsdb create-blocks-from rules` evaluates them against this Prometheus
    (range queries, 2 h at a time, a point a minute) and writes blocks, moved into its data
    folder; Prometheus loads them within a minute. Live evaluation carries on from now."""
    started = time.perf_counter()
    out = tmp / "pace-blocks"
    out.mkdir()
    log = tmp / "pace-backfill.log"
    with log.open("wb") as err:
        code = subprocess.call(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "rules",
                f"--start={now_s - 48 * 3600 - 600}",
                f"--end={int(time.time()) + 60}",
                f"--url={url}",
                f"--output-dir={out}",
                "--eval-interval=60s",
                str(pace),
            ],
            stdout=err,
            stderr=subprocess.STDOUT,
            timeout=BACKFILL_TIMEOUT_S,
        )
    if code != 0:
        raise RuntimeError(f"promtool create-blocks-from rules failed with {code}\n{tail(log)}")
    blocks = list(out.iterdir())
    for block in blocks:
        shutil.move(str(block), data / block.name)
    groups = bench_rule_groups()
    name = next(g for g in groups if g.name == PACE_GROUP).rules[0].record
    oldest = now_s - 48 * 3600 + 60
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            data_ = urllib.parse.urlencode({"query": f"count({name})", "time": str(oldest)})
            with urllib.request.urlopen(f"{url}/api/v1/query?{data_}", timeout=10) as resp:
                if json.loads(resp.read())["data"]["result"]:
                    break
        time.sleep(2.0)
    else:
        raise RuntimeError("the backfilled pace blocks did not show up")
    say(
        f"pace rules backfilled over 48 h: {len(blocks)} blocks, loaded, in "
        f"{time.perf_counter() - started:.1f} s"
    )


def rule_costs(url: str) -> None:
    """What the rules cost the engine: each group's last evaluation (Prometheus says it of the
    group; vmalert of each rule, summed here)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=10) as resp:
            groups = json.loads(resp.read())["data"]["groups"]
        print("recording rule groups (interval: last evaluation took):")
        for g in groups:
            took = g.get("evaluationTime")
            if took is None:
                took = sum(float(r["evaluationTime"]) for r in g["rules"])
            print(f"  {g['name']}: every {float(g['interval']):.0f} s: {float(took):.2f} s")


def wait_for_fleet(
    url: str,
    expected: int,
    procs: Sequence[subprocess.Popen[bytes]],
    timeout_s: float = READY_TIMEOUT_S,
    name: str = "prometheus",
) -> None:
    wait_for_count(
        url,
        f"count({READY_METRIC})",
        expected,
        timeout_s,
        1.0,
        procs,
        lambda seen: (
            f"the first full scrape: count({READY_METRIC}) = {seen} of {expected}, "
            f"{name} {'ready' if ready(url) else 'not ready yet'}"
        ),
    )


def wait_for_count(
    url: str,
    promql: str,
    expected: int,
    timeout_s: float,
    pause_s: float,
    procs: Sequence[subprocess.Popen[bytes]],
    progress: Callable[[int], str],
) -> None:
    """Until `promql` (a count) reaches `expected`, saying how far it is now and then, and
    giving up when a child process died or the time is out."""
    deadline = time.monotonic() + timeout_s
    last_note = -PROGRESS_EVERY_S
    seen: float | None = None
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                cmd = proc.args
                name = cmd if isinstance(cmd, str | bytes | os.PathLike) else cmd[0]
                raise RuntimeError(f"{os.fsdecode(name)} exited with {proc.returncode}")
        seen = scalar(url, promql)
        if seen is not None and int(seen) >= expected:
            return
        if time.monotonic() - last_note >= PROGRESS_EVERY_S:
            say(f"  waiting for {progress(int(seen or 0))}")
            last_note = time.monotonic()
        time.sleep(pause_s)
    raise RuntimeError(f"{promql} was {seen} of {expected} after {timeout_s:.0f} s")


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def prometheus_cpu_s(pid: int) -> float:
    """User and system CPU seconds the process has used (ingest, rules, queries)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return float("nan")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory now (``VmHWM``: its peak so far), in MB."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# --- the engines -------------------------------------------------------------------------------
PROMETHEUS, VICTORIA = "prometheus", "victoria"
VICTORIA_FLAGS = (
    # The whole fleet is one target here (a site has one a node): 850k series at 4,096 nodes,
    # 200 MB a scrape, past the 16 MB VictoriaMetrics takes by default. Parsed as it streams
    # in, as VictoriaMetrics advises for targets of millions of series, rather than held whole
    # (twice: the previous scrape is kept to compare) where a site's small targets cost nothing.
    "-promscrape.streamParse",
    "-promscrape.maxScrapeSize=16GiB",
)
IMPORT_STOP_S = 300.0  # the importing VictoriaMetrics writes its in-memory parts on the way out


@dataclass(frozen=True)
class Engine:
    """The server the bot reads: Prometheus, or VictoriaMetrics with vmalert for the rules."""

    name: str
    url: str
    proc: subprocess.Popen[bytes]
    rules_url: str  # what answers /api/v1/rules: Prometheus itself, or vmalert
    vmalert: subprocess.Popen[bytes] | None = None
    latency_offset_s: float = 0.0  # how long the newest samples stay hidden from queries


def launch(
    cmd: list[str], log: Path, port: int, name: str, procs: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    """A server started with its stderr in `log` and kept in `procs`, once it listens."""
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    procs.append(proc)
    wait_port(port, 60, proc, name)
    return proc


def start_engine(
    kind: str,
    tmp: Path,
    data: Path,
    exporter_port: int,
    interval_s: int,
    rules: Path | None,
    flags: Sequence[str],
    procs: list[subprocess.Popen[bytes]],
) -> Engine:
    """Prometheus over `data`, scraping the exporter and evaluating `rules`; or VictoriaMetrics
    over `data` (the history imported), scraping the exporter as Prometheus does, with vmalert
    evaluating `rules` (the very file Prometheus loads) into it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if kind == PROMETHEUS:
        cfg = tmp / "prometheus.yml"
        cfg.write_text(config(exporter_port, interval_s, rules))
        cmd = [*prometheus_command(cfg, data, port), *flags]
        prom = launch(cmd, tmp / "prometheus.log", port, "prometheus", procs)
        return Engine("Prometheus", url, prom, url)
    scrape = tmp / "scrape.json"
    target = f"127.0.0.1:{exporter_port}"
    scrape.write_text(scrape_config(target, interval_s, max(5, interval_s - 5)))
    cmd = victoria_command(data, port, scrape, *VICTORIA_FLAGS, *flags)
    vm = launch(cmd, tmp / "victoria.log", port, "victoria-metrics", procs)
    if rules is None:
        return Engine("VictoriaMetrics", url, vm, url, None, LATENCY_OFFSET_S)
    alert_port = free_port()
    cmd = vmalert_command(rules, url, alert_port)
    vmalert = launch(cmd, tmp / "vmalert.log", alert_port, "vmalert", procs)
    alert_url = f"http://127.0.0.1:{alert_port}"
    return Engine("VictoriaMetrics", url, vm, alert_url, vmalert, LATENCY_OFFSET_S)


def own_metric(url: str, sample: str) -> float:
    """One sample of a server's own /metrics, by its name and labels as written there."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f"{sample} "):
                return float(line.rsplit(" ", 1)[1])
    return float("nan")


def victoria_backfill(
    fleet: SimFleet,
    hours: float,
    step_s: int,
    tmp: Path,
    data: Path,
    offsets: Sequence[int],
    flags: Sequence[str],
) -> None:
    """The history pushed into a VictoriaMetrics over `data` that scrapes nothing, stopped once
    its rows are flushed: the measured one then starts over the same folder, as Prometheus
    starts over promtool's blocks, so neither's CPU and memory count the backfill."""
    port = free_port()
    log = tmp / "victoria-import.log"
    url = f"http://127.0.0.1:{port}"
    importer: list[subprocess.Popen[bytes]] = []
    try:
        vm = launch(
            victoria_command(data, port, None, *flags), log, port, "victoria-metrics", importer
        )
        backfill(fleet, hours, step_s, tmp, data, counters(), offsets, import_url=url)
        started = time.perf_counter()
        flush = urllib.request.Request(f"{url}/internal/force_flush", method="POST")
        urllib.request.urlopen(flush, timeout=60).close()
        rows = own_metric(url, 'vm_rows_inserted_total{type="prometheus"}')
        invalid = own_metric(url, 'vm_rows_invalid_total{type="prometheus"}')
        if invalid:
            raise RuntimeError(f"VictoriaMetrics refused {invalid:.0f} lines of the history")
        say(
            f"victoria-metrics: {rows:,.0f} rows imported, none refused; flushed in "
            f"{time.perf_counter() - started:.1f} s, RSS {rss_mb(vm.pid):.0f} MB (peak "
            f"{rss_mb(vm.pid, 'VmHWM'):.0f} MB), CPU {prometheus_cpu_s(vm.pid):.0f} s"
        )
    except BaseException:
        print(tail(log), file=sys.stderr)
        raise
    finally:
        started = time.perf_counter()
        for proc in importer:
            stop(proc, IMPORT_STOP_S)
    say(f"victoria-metrics: the importing one stopped in {time.perf_counter() - started:.1f} s")


# --- the benchmark -----------------------------------------------------------------------------
def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[18]


def reference(fleet: SimFleet) -> dict[str, int]:
    """The same service over the same fleet in process (SimMetrics): the faults to expect."""
    triage = sim_triage(fleet)
    report = asyncio.run(service.hw_faults(triage, ""))
    assert isinstance(report, FaultsReport)
    return {k.value: c for k, c in report.counts.items()}


async def profile_queries(metrics: PrometheusMetrics) -> None:
    """Each query of a fleet-wide call alone, one after another, raw and as the call sends it
    (recorded where kept up, and a recorded counter's query for the series that moved since
    its rule ran): where the time goes."""
    deadline = Deadline(120)
    kept_up = await metrics.recorded_rules(deadline)
    print("each query alone (ms, rows): raw | as sent | moved since the rule ran")

    async def timed(promql: str) -> tuple[float, int]:
        started = time.perf_counter()
        rows = await metrics.query(promql, at=None, deadline=deadline)
        return (time.perf_counter() - started) * 1000, len(rows)

    for request in requests_for(enabled_checks(HealthConfig()), HealthConfig()):
        raw_ms, raw_rows = await timed(query_for(request, None, 86400.0, metrics.node_label))
        plan = metrics.plan(request, None, 86400.0, kept_up)
        line = f"  {raw_ms:7.0f} ms {raw_rows:7d} rows"
        if plan.recorded is not None:
            sent_ms, sent_rows = await timed(plan.query)
            line += f" | {sent_ms:7.0f} ms {sent_rows:6d} rows"
            if counts_events(request):
                age = math.ceil(kept_up[plan.recorded] + 30)
                moved = moved_query(request.name, None, age, metrics.node_label)
                moved_ms, moved_rows = await timed(moved)
                line += f" | {moved_ms:7.0f} ms {moved_rows:6d} rows"
        print(f"{line}  {request.name} ({request.reading.value})")


async def bench(
    url: str,
    runs: int,
    hostlist: str,
    expected_nodes: int,
    expected: dict[str, int],
    profile: bool = False,
    recorded: bool = True,
    engine: str = "Prometheus",
) -> float:
    metrics = PrometheusMetrics(url, timeout_s=60, recorded=recorded)
    try:
        times: list[float] = []
        per_call: list[int] = []
        recorded_per_call: list[int] = []
        report: FaultsReport | None = None
        for _ in range(runs):
            # A fresh inventory each call: it lists the nodes too (2 queries), the worst case.
            triage = prometheus_triage(metrics)
            before, before_rec = metrics.queries, metrics.recorded_reads
            started = time.perf_counter()
            answer = await service.hw_faults(triage, "")
            times.append(time.perf_counter() - started)
            per_call.append(metrics.queries - before)
            recorded_per_call.append(metrics.recorded_reads - before_rec)
            if not isinstance(answer, FaultsReport):
                raise RuntimeError(f"/hw-faults answered an error: {answer.sentence}")
            report = answer
            if len(triage.inventory.names()) != expected_nodes:
                raise RuntimeError(
                    f"the inventory lists {len(triage.inventory.names())} nodes, "
                    f"not {expected_nodes}"
                )
        assert report is not None

        triage = prometheus_triage(metrics)
        before = metrics.queries
        started = time.perf_counter()
        small = await service.hw_faults(triage, hostlist)
        small_s = time.perf_counter() - started
        small_queries = metrics.queries - before
        if not isinstance(small, FaultsReport):
            raise RuntimeError(f"/hw-faults {hostlist} answered an error: {small.sentence}")
        if profile:
            await profile_queries(metrics)
    finally:
        await metrics.close()

    p50, p95_s = statistics.median(times), p95(times)
    print(f"runs (s): {' '.join(f'{t:.2f}' for t in times)}")
    print(
        f"/hw-faults over {expected_nodes} nodes x 8 GPUs from {engine}, {runs} runs: "
        f"p50 {p50:.2f} s, p95 {p95_s:.2f} s, max {max(times):.2f} s, min {min(times):.2f} s"
    )
    kinds = sorted(set(per_call))
    print(
        f"PromQL queries per call over the fleet: {'/'.join(map(str, kinds))} "
        f"({len(requests_for(enabled_checks(HealthConfig())))} metrics read, each one query; "
        f"the inventory's node listing included), of which recorded series: "
        f"{'/'.join(map(str, sorted(set(recorded_per_call))))}; on {hostlist} ({small.scope}): "
        f"{small_queries} queries in {small_s:.2f} s, {sum(small.counts.values())} faults"
    )
    counts = ", ".join(f"{k.value} {c}" for k, c in report.counts.items())
    print(f"found: {sum(report.counts.values())} faults in {len(report.groups)} groups ({counts})")
    if report.not_run:
        print(f"not run: {report.not_run}")
    found = {k.value: c for k, c in report.counts.items()}
    if found == expected:
        print("the same faults as the in-process SimMetrics over the same fleet")
    else:
        diff = {
            k: (found.get(k, 0), expected.get(k, 0))
            for k in sorted(found.keys() | expected.keys())
            if found.get(k, 0) != expected.get(k, 0)
        }
        print(f"differs from the in-process SimMetrics, as ({engine}, sim): {diff}")
    print(f"ratio of p95 to the {TARGET_S:.0f} s target: {p95_s / TARGET_S:.2f}")
    return p95_s


async def bench_job(url: str, runs: int, job: Job, straggler: str, recorded: bool = True) -> float:
    """/job-slow's service (slow_job: step times, 48 h pace, health and proxies over the job's
    nodes) on the job, ``runs`` times; then on 16 of its nodes, for the query count."""
    cfg = StragglerConfig()
    metrics = PrometheusMetrics(url, timeout_s=60, recorded=recorded)
    times: list[float] = []
    per_call: list[int] = []
    recorded_per_call: list[int] = []
    own_cpu: list[float] = []  # this process's CPU a call: parsing the answers, the diagnosis
    report: SlowJobReport | None = None
    try:
        for _ in range(runs + 1):
            triage = prometheus_triage(metrics)
            before, before_rec = metrics.queries, metrics.recorded_reads
            started, cpu = time.perf_counter(), time.process_time()
            answer = await slow_job(triage, job, cfg)
            times.append(time.perf_counter() - started)
            own_cpu.append(time.process_time() - cpu)
            per_call.append(metrics.queries - before)
            recorded_per_call.append(metrics.recorded_reads - before_rec)
            if not isinstance(answer, SlowJobReport):
                raise RuntimeError(f"/job-slow answered an error: {answer.sentence}")
            report = answer
        small_job = job.model_copy(update={"nodes": job.nodes[:16]})
        before = metrics.queries
        await slow_job(prometheus_triage(metrics), small_job, cfg)
        small_queries = metrics.queries - before
    finally:
        await metrics.close()
    assert report is not None
    first, times = times[0], times[1:]
    d = report.diagnosis
    named = [(s.node, s.cause.kind.value if s.cause else None) for s in d.stragglers]
    p50, p95_s = statistics.median(times), p95(times)
    print(f"runs (s): {' '.join(f'{t:.2f}' for t in times)} (first, not counted: {first:.2f})")
    print(
        f"/job-slow of a job on {len(job.nodes)} nodes x 8 ranks from Prometheus, {runs} runs: "
        f"p50 {p50:.2f} s, p95 {p95_s:.2f} s, max {max(times):.2f} s, min {min(times):.2f} s; "
        f"the bot's own CPU a call p50 {statistics.median(own_cpu[1:]):.2f} s"
    )
    print(
        f"PromQL queries per call: {'/'.join(map(str, sorted(set(per_call))))} (of which "
        f"recorded series: {'/'.join(map(str, sorted(set(recorded_per_call))))}); "
        f"on 16 of its nodes: {small_queries}"
    )
    print(
        f"answer: mode {d.mode}, stragglers {named} (injected: {straggler} {JOB_CAUSE.value} "
        f"+{JOB_SLOWDOWN:.0%}), {len(d.missing)} nodes without data, pace points "
        f"{len(report.pace)}, comparison "
        f"{f'{d.comparison.change:+.1%} against {d.comparison.baseline}' if d.comparison else None}"
    )
    print(f"ratio of p95 to the {TARGET_S:.0f} s target: {p95_s / TARGET_S:.2f}")
    return p95_s


async def bench_sweeps(
    engine: Engine, sweeps: int, nodes: int, recorded: bool, rest_floor_s: float
) -> None:
    """The alert sweep's read of the fleet, ``sweeps`` times back to back: what
    bot/alerts/runtime.py's ``_sweep`` asks of the engine (``fleet_faults`` over the sweep's
    window, through one triage kept across sweeps as the bot keeps its one; the inventory's node
    listing, reloaded once a minute, apart). Its CPU on the engine: the engine's CPU across
    the sweeps less what it uses at rest (ingest, rules) over as long, measured just before."""
    health, alerts = HealthConfig(), AlertsConfig.model_validate({})
    metrics = PrometheusMetrics(
        engine.url, timeout_s=60, node_label=health.node_label, recorded=recorded
    )
    triage = prometheus_triage(metrics, health)
    pid = engine.proc.pid
    try:
        # The bot's first sweep, not counted: it lists the nodes too (then once a minute).
        before = metrics.queries
        await triage.inventory.load()
        listing = metrics.queries - before
        started = time.perf_counter()
        await fleet_faults(triage, alerts.sweep_window_s)
        first_s = time.perf_counter() - started
        # At rest over at least the sweeps' expected span, and over a whole cycle of the
        # periodic work (the scrape, the slowest rule group), so that its rate is an average.
        rest_s = max(sweeps * first_s, rest_floor_s)
        say(f"sweeps: the engine at rest for {rest_s:.0f} s first (its CPU rate without them)")
        cpu0, t0 = prometheus_cpu_s(pid), time.monotonic()
        await asyncio.sleep(rest_s)
        rest_rate = (prometheus_cpu_s(pid) - cpu0) / (time.monotonic() - t0)
        times: list[float] = []
        per_sweep: list[int] = []
        recorded_per_sweep: list[int] = []
        found = 0
        cpu0, t0 = prometheus_cpu_s(pid), time.monotonic()
        for _ in range(sweeps):
            before, before_rec = metrics.queries, metrics.recorded_reads
            started = time.perf_counter()
            found = len((await fleet_faults(triage, alerts.sweep_window_s)).faults)
            times.append(time.perf_counter() - started)
            per_sweep.append(metrics.queries - before)
            recorded_per_sweep.append(metrics.recorded_reads - before_rec)
        span_s = time.monotonic() - t0
        busy_s = prometheus_cpu_s(pid) - cpu0
    finally:
        await metrics.close()
    cpu_per_sweep = (busy_s - rest_rate * span_s) / sweeps
    interval = alerts.sweep_interval_s
    a_minute = 60 / max(interval, statistics.median(times))  # back to back when slower
    queries = statistics.mean(per_sweep)
    queries_min = queries * a_minute + listing * 60 / PrometheusInventory.REFRESH_S
    cpu_min = cpu_per_sweep * a_minute
    per_k = nodes / 1000
    print(f"sweeps (s): {' '.join(f'{t:.2f}' for t in times)} (first, not counted: {first_s:.2f})")
    print(
        f"the alert sweep's fleet read over {nodes} nodes x 8 GPUs from {engine.name}, {sweeps} "
        f"sweeps: p50 {statistics.median(times):.2f} s, max {max(times):.2f} s; "
        f"{'/'.join(map(str, sorted(set(per_sweep))))} PromQL queries a sweep (of which recorded "
        f"series: {'/'.join(map(str, sorted(set(recorded_per_sweep))))}), {found} faults; the "
        f"inventory's node listing {listing} queries once a minute"
    )
    print(
        f"{engine.name} CPU: {busy_s:.1f} s over the {span_s:.1f} s of the sweeps, less "
        f"{rest_rate:.3f} s a second at rest (over {rest_s:.0f} s just before): "
        f"{cpu_per_sweep:.3f} s a sweep"
    )
    if span_s < rest_floor_s:
        print(
            f"  (the sweeps took {span_s:.1f} s, less than a cycle of the periodic work, "
            f"{rest_floor_s:.0f} s: a scrape or a rule's run in them or not moves this figure; "
            f"more --sweeps steady it)"
        )
    slower = a_minute < 60 / interval
    print(
        f"at a sweep every {interval} s (the bot's default"
        + (f"; a sweep takes longer: {a_minute:.1f} a minute, back to back" if slower else "")
        + f"): {queries_min:.0f} queries a minute and {cpu_min:.2f} {engine.name} CPU s a minute"
        f" ({cpu_min / 60:.0%} of a core); per 1,000 nodes: {queries_min / per_k:,.1f} queries "
        f"and {cpu_min / per_k:.3f} CPU s a minute"
    )


def run(args: argparse.Namespace) -> None:
    now_s = int(floor_minute(datetime.now(UTC)).timestamp())
    expected = 0  # GPUs in the live exposition: 8 a node but for the GPU_MISSING faults
    victoria = args.engine == VICTORIA
    with tempfile.TemporaryDirectory(prefix=f"meowbot-bench-{args.engine}-") as tmp_name:
        tmp = Path(tmp_name)
        data = tmp / "data"
        data.mkdir()
        procs: list[subprocess.Popen[bytes]] = []
        exporter_log = tmp / "exporter.log"
        logs = [tmp / f"{name}.log" for name in ("prometheus", "victoria", "vmalert")]
        try:
            started = time.perf_counter()
            fleet = build_fleet(now_s, args.nodes, args.job)
            say(
                f"fleet: {args.nodes} nodes, seed {SEED}, now {fleet.now:%Y-%m-%d %H:%M} UTC, "
                f"{len(fleet.injected)} injected faults, built in "
                f"{time.perf_counter() - started:.2f} s"
            )

            exporter_port = free_port()
            with exporter_log.open("wb") as err:
                exporter = subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--serve",
                        str(exporter_port),
                        "--now",
                        str(now_s),
                        "--nodes",
                        str(args.nodes),
                        *(["--job"] if args.job else []),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            procs.append(exporter)
            say(f"exporter: pid {exporter.pid} rendering the live exposition meanwhile")

            expected = sum(1 for _ in fleet.samples(metrics=[READY_METRIC]))
            say(
                f"fleet: {expected} of {8 * args.nodes} GPUs exported "
                f"({8 * args.nodes - expected} injected missing): the count to wait for"
            )
            offsets = sorted({*_offsets(86400), *_offsets(int(HealthConfig().window_s))})
            if victoria:
                victoria_backfill(
                    fleet, args.hours, args.step, tmp, data, offsets, args.engine_flag
                )
            else:
                backfill(fleet, args.hours, args.step, tmp, data, counters(), offsets)
            job: Job | None = None
            straggler = ""
            if args.job:
                # The pace is read over 48 h every minute: its history at a step inside the
                # 5 min lookback, so that every step of the range finds each rank's sample.
                step_s = min(args.step, 300)
                backfill(fleet, 48.0, step_s, tmp, data, [StragglerConfig().step_metric])
                job = next(j for j in fleet.jobs if j.name == JOB_NAME)
                straggler = next(f.node for f in fleet.injected if f.node) or ""
                expected_faults = {}
            else:
                started = time.perf_counter()
                expected_faults = reference(fleet)
                say(
                    f"reference: in-process SimMetrics finds {sum(expected_faults.values())} "
                    f"faults in {time.perf_counter() - started:.1f} s"
                )
            del fleet

            started = time.perf_counter()
            wait_port(exporter_port, EXPORTER_START_S, exporter, "the fleet's exporter")
            say(
                f"exporter: {exporter_log.read_text().strip()} "
                f"(waited {time.perf_counter() - started:.1f} s more), "
                f"RSS {rss_mb(exporter.pid):.0f} MB"
            )

            started = time.perf_counter()
            rules, pace_rules, n_rules = write_rules(tmp)
            engine = start_engine(
                args.engine,
                tmp,
                data,
                exporter_port,
                args.scrape_interval,
                rules if args.rules else None,
                args.engine_flag,
                procs,
            )
            url = engine.url
            say(
                f"{engine.name}: pid {engine.proc.pid} listening on {url} after "
                f"{time.perf_counter() - started:.1f} s; scrape every {args.scrape_interval} s"
                + (f"; vmalert pid {engine.vmalert.pid}" if engine.vmalert else "")
            )
            if engine.latency_offset_s:
                say(
                    f"{engine.name} hides the newest {engine.latency_offset_s:.0f} s of samples "
                    "from queries (-search.latencyOffset, at its default as sites run it): each "
                    "wait below is that much longer"
                )
            wait_for_fleet(
                url, expected, procs, READY_TIMEOUT_S + engine.latency_offset_s, engine.name
            )
            scraped_at = time.time()
            scrape_s = scalar(url, "scrape_duration_seconds")
            scraped = scalar(url, "scrape_samples_scraped")
            say(
                f"{engine.name}: {expected} GPUs seen {time.perf_counter() - started:.1f} s after "
                f"start; last scrape {scrape_s or 0:.1f} s for {int(scraped or 0):,} samples, "
                f"RSS {rss_mb(engine.proc.pid):.0f} MB"
            )
            if args.rules:
                started = time.perf_counter()
                if job is not None:
                    backfill_pace(url, pace_rules, now_s, tmp, data)
                # vmalert 1.79 asks each rule at its run's time rounded down to the group's
                # interval (-datasource.queryTimeAlignment, on by default): the first run of a
                # 240 s group after the scrape may still record an instant before it.
                aligned_s = max(g.interval_s for g in bench_rule_groups()) if engine.vmalert else 0
                wait_for_rules(
                    url,
                    n_rules,
                    scraped_at,
                    procs,
                    RULES_TIMEOUT_S + engine.latency_offset_s + aligned_s,
                )
                say(
                    f"recording rules: all {n_rules} have run since the full scrape (waited "
                    f"{time.perf_counter() - started:.1f} s)"
                )
            else:
                say("recording rules: none loaded (--no-rules): every read is raw")

            if args.hold:
                say(f"holding: {engine.name} on {url} until interrupted")
                with contextlib.suppress(KeyboardInterrupt):
                    while True:
                        time.sleep(60)
            if args.settle:
                # Every rule group first runs at once; the 24 h windows then take tens of
                # seconds of both cores. Measure after that burst, as a user would meet it.
                say(f"settling {args.settle} s after the rules' first runs")
                time.sleep(args.settle)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            say(f"measuring; load average {load} (this machine has {os.cpu_count()} cores)")
            started = time.perf_counter()
            if job is not None:
                if args.proxies:
                    # The same job under an id no step time carries: its pace from proxies.
                    job = job.model_copy(update={"job_id": NO_STEP_TIMES_ID})
                    say(f"as a job without step times (id {NO_STEP_TIMES_ID}): proxies mode")
                asyncio.run(bench_job(url, args.runs, job, straggler, args.rules))
            else:
                asyncio.run(
                    bench(
                        url,
                        args.runs,
                        args.hostlist,
                        args.nodes,
                        expected_faults,
                        args.profile,
                        args.rules,
                        engine.name,
                    )
                )
                if args.sweeps:
                    periodic = [args.scrape_interval]
                    if args.rules:
                        periodic += [g.interval_s for g in bench_rule_groups()]
                    asyncio.run(
                        bench_sweeps(engine, args.sweeps, args.nodes, args.rules, max(periodic))
                    )
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            say(f"benchmark: {time.perf_counter() - started:.1f} s; load average {load}")
            if args.steady:
                # What the engine costs with nothing asked of it: ingest (and rules).
                cpu0, t0 = prometheus_cpu_s(engine.proc.pid), time.monotonic()
                time.sleep(args.steady)
                cores = (prometheus_cpu_s(engine.proc.pid) - cpu0) / (time.monotonic() - t0)
                say(
                    f"{engine.name} at rest over {args.steady} s: {cores:.2f} of "
                    f"{os.cpu_count()} cores (ingest{' and rules' if args.rules else ''})"
                )
            if args.rules:
                rule_costs(engine.rules_url)
            for name, proc in (
                (engine.name, engine.proc),
                ("vmalert", engine.vmalert),
                ("the exporter", exporter),
            ):
                if proc is not None:
                    say(
                        f"{name}: CPU since start {prometheus_cpu_s(proc.pid):.0f} s, "
                        f"RSS at the end {rss_mb(proc.pid):.0f} MB "
                        f"(peak {rss_mb(proc.pid, 'VmHWM'):.0f} MB)"
                    )
            say(f"this process: peak RSS {rss_mb(os.getpid(), 'VmHWM'):.0f} MB")
        except BaseException:
            for log in (*logs, exporter_log):
                print(tail(log), file=sys.stderr)
            raise
        finally:
            # Newest first: the engine before the target it scrapes; each waited for.
            started = time.perf_counter()
            for proc in reversed(procs):
                stop(proc)
            left = [p.pid for p in procs if p.poll() is None]
            say(
                f"stopped the engine and the exporter in {time.perf_counter() - started:.1f} s"
                + (f"; still running: {left}" if left else "")
            )
    say(f"total wall time {time.perf_counter() - T0:.1f} s")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hours", type=float, default=25.0, help="history to backfill")
    parser.add_argument("--step", type=int, default=1800, help="history step, seconds")
    parser.add_argument("--scrape-interval", type=int, default=30, help="seconds")
    parser.add_argument("--hostlist", default="gpu-[0001-0002]")
    parser.add_argument(
        "--profile", action="store_true", help="time each query alone after the runs"
    )
    parser.add_argument("--hold", action="store_true", help="keep the engine up to query it")
    parser.add_argument(
        "--steady",
        type=int,
        default=0,
        metavar="SECONDS",
        help="after measuring, sample the engine's CPU use at rest over this long",
    )
    parser.add_argument(
        "--settle",
        type=int,
        default=0,
        metavar="SECONDS",
        help="wait this long after the rules' first runs before measuring",
    )
    parser.add_argument(
        "--no-rules",
        dest="rules",
        action="store_false",
        help="load no recording rules: every read raw (the old figure)",
    )
    parser.add_argument("--job", action="store_true", help="/job-slow of one job on every node")
    parser.add_argument(
        "--proxies",
        action="store_true",
        help="with --job: read the job as one without step times (its pace from proxies)",
    )
    parser.add_argument(
        "--engine",
        choices=(PROMETHEUS, VICTORIA),
        default=PROMETHEUS,
        help="what the bot reads: Prometheus, or VictoriaMetrics with vmalert",
    )
    parser.add_argument(
        "--engine-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="one more command-line flag for the engine (repeatable), e.g. "
        "--engine-flag=-search.maxQueryDuration=120s",
    )
    parser.add_argument(
        "--sweeps",
        type=int,
        default=0,
        metavar="N",
        help="after the /hw-faults runs, the alert sweep's fleet read N times",
    )
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--now", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine == VICTORIA and args.job:
        parser.error("--job reads Prometheus only (its pace rules are backfilled with promtool)")
    if args.sweeps and args.job:
        parser.error("--sweeps follows the /hw-faults runs, not --job")
    if args.serve is not None:
        serve(args.now, args.nodes, args.serve, args.job)
    else:
        run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
