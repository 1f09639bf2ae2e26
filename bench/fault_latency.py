"""Fault to channel message, measured: not a timed test, run by hand.

    .venv/bin/python bench/fault_latency.py [--nodes 4096] [--faults 3] [--kinds K,...]
        [--alerts 20] [--scrape-interval 15] [--sweep-interval S] [--group-wait 10] [--idle 120]
        [--no-rules]

Two paths a GPU fault takes to the alert channel, measured in one run, side by side:

(a) The sweep. A clean simulated fleet (``SimFleet(fault_rate=0)``, 8 GPUs a node) is served
    as dcgm-exporter and node_exporter text by a child process (this script with ``--serve``),
    one target per 32 nodes as a real Prometheus scrapes many exporters, each re-rendered at
    the wall clock once a minute (its counters move on) and at once when a fault is injected.
    A real Prometheus on loopback scrapes them every ``--scrape-interval`` seconds (15 s:
    dcgm-exporter's common collection interval and a common scrape interval; timeout 10 s;
    ``honor_labels``) and evaluates meowbot's recording rules as ``meowbot prometheus-rules``
    prints them for the default config (``--no-rules``: none, every read raw). The real bot
    (``create_bot`` with PROMETHEUS_URL, REDIS_URL and the project's Slack emulator, as
    tests/e2e/test_alerts_sweep.py builds it) runs its notifier and the real sweep loop
    (``Alerting.sweeper``) at ``--sweep-interval`` (default: the bot's own default). At random
    moments a fault of each kind the sweep alerts on (``--faults`` of each; drift, a fleet's
    state rather than an event, and DCGM's health watches, which this default exporter lacks,
    aside) is set on a random node (an Xid 79 in the last-Xid gauge, a double-bit ECC error, a
    hardware thermal slowdown, a hot GPU, NVLink and PCIe error counts, a port down, a
    reboot...; a kind seen only in counters is set minutes back, at a rate that puts its count
    past the check's threshold from the render that serves it); the time runs from the
    exporter serving it to the first Slack call in the channel whose text names that node (by
    name or in a hostlist). Once named, the fault is mended so the group resolves and the channel
    never reaches storm mode. From Prometheus' own samples the bench also tells where the time
    went: to the scrape, from the scrape to the sweep that found it, from that sweep's start
    to the message. Printed per kind and beside the floor: a uniform moment in the scrape
    interval, then in the sweep's, then one Slack call.
(b) Alertmanager. At random moments one firing alert (``GpuXidError``, ``xid="79"``,
    ``Hostname``, ``gpu``, ``severity="critical"``) is posted to a real Alertmanager
    (prometheus-alertmanager; ``group_by: [alertname, Hostname]`` so each is a new group, sent
    after ``--group-wait``: 10 s as many sites run it, Alertmanager's default is 30 s) whose
    webhook points at the bot's ``POST /alertmanager`` through a pass-through relay that notes
    when each webhook arrived. Times: from the POST to Alertmanager to the channel message, and
    the bot's own part, from the webhook's arrival to the message. Each alert is resolved
    once named. Its ``startsAt`` is the moment of the POST: Alertmanager sends a new group's
    first alert at once, without group_wait, when it started more than group_wait ago (as an
    alerting rule's alert with a longer ``for:`` does), which would hide the wait.

Both run at once against the one bot, as they would in production. Then the sweep loop is
stopped and Prometheus' CPU is sampled at rest for ``--idle`` seconds: its CPU seconds a minute
(from /proc) with the sweep and without it, and the sweep's own duration and queries at this
fleet size. The figures are printed beside NVIDIA NVSentinel's published fault-to-cordon
latency (P50 16.75 s, P90 28 s) and meowbot's target (P50 < 10 s, P90 < 20 s).

Services: REDIS_URL from the environment (`make bench` runs it under scripts/testenv.py) or a
redis-server started here; Prometheus and Alertmanager are always started here, configured as
above. The bot's alert keys in that Redis (``meowbot:_:alerts:*``) are deleted first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import aiohttp
import redis.asyncio as aioredis
from aiohttp import web

from bench.health_prometheus import (
    bench_rule_groups,
    prometheus_cpu_s,
    rss_mb,
    say,
    scalar,
    tail,
    wait_for_count,
    write_rules,
)
from bot.alerts import runtime
from bot.alerts.runtime import Alerting
from bot.app import create_bot
from bot.backends import prometheus_rules
from bot.backends.alertmanager import AlertmanagerClient
from bot.backends.prometheus import PrometheusMetrics
from bot.backends.prometheus_rules import SENTINEL_LABEL, rules_yaml
from bot.backends.promql import selector
from bot.backends.sim.fleet import SimFleet
from bot.backends.state import key
from bot.config import load_settings
from bot.models import FaultKind
from bot.shell.emulator import Call, SlackEmulator
from bot.triage.checks import CHECKS
from bot.triage.table import Reading
from bot.triage.targets import BadInput, expand_nodes
from scripts.testsvc.common import free_port, stop, wait_port
from scripts.testsvc.prometheus import prometheus_command
from tests.integration.sim_exporter import CONTENT_TYPE

ROOT = Path(__file__).resolve().parents[1]
CHANNEL = "C0LATENCY"
SECRET = "bench-latency-secret"
XID = 79  # GPU fallen off the bus: critical, drain
SHARD_NODES = 32  # nodes a target: about 6.6k series, 1.6 MB (a real exporter serves one node)
RERENDER_S = 60.0
SCRAPE_VISIBLE_S = 1.0  # a sample is stamped at its scrape's start, stored at its end
READY_METRIC = "DCGM_FI_DEV_GPU_TEMP"
NVSENTINEL = (16.75, 28.0)  # NVIDIA NVSentinel's published fault-to-cordon P50 and P90, s
TARGET = (10.0, 20.0)
DAY_GROUP_S = 240
HOSTLIST_RE = re.compile(r"[A-Za-z][\w.-]*-(?:\[[0-9,\-]+\]|\d+)")


# --- the fault kinds ---------------------------------------------------------------------------
NOT_MEASURED = {
    # A fleet's state, judged against the majority and read through the rules: not an event.
    FaultKind.DRIVER_DRIFT,
    FaultKind.KERNEL_DRIFT,
    FaultKind.FIRMWARE_DRIFT,
    # DCGM's health watches: the simulated dcgm-exporter here is the default one, without them.
    FaultKind.DCGM_HEALTH,
}
KINDS = tuple(check.kind for check in CHECKS if check.kind not in NOT_MEASURED)
"""The kinds the sweep alerts on that a fault can start."""
PER_MIN = {
    FaultKind.NVLINK_CRC,
    FaultKind.NVLINK_REPLAY,
    FaultKind.PCIE_REPLAY,
    FaultKind.IB_SYMBOL_ERRORS,
    FaultKind.NIC_ERRORS,
}
"""Counted past a threshold a window (100 NVLink errors an hour...): injected ten minutes back
at 20 a minute, so the count is past it from the render that serves it."""
COUNTED = frozenset(c.kind for c in CHECKS if all(r.reading is not Reading.VALUE for r in c.needs))
"""Kinds seen in counters only: injected a minute back, so the counter has moved when served."""


def kind_metrics(kind: FaultKind) -> tuple[str, ...]:
    return tuple(dict.fromkeys(r.name for c in CHECKS if c.kind is kind for r in c.needs))


def inject(fleet: SimFleet, kind: FaultKind, node: str, gpu: int) -> None:
    now = datetime.now(UTC)
    head_s = {FaultKind.IB_FLAPPING: 3000.0}.get(kind, 600.0 if kind in PER_MIN else 120.0)
    since = now - timedelta(seconds=head_s) if kind in COUNTED else now
    detail: dict[str, Any] = {"xid": XID} if kind is FaultKind.XID else {}
    if kind in PER_MIN:
        detail["per_min"] = 20.0
    try:
        fleet.inject(kind, node, gpu=gpu, since=since, **detail)
    except ValueError:  # a node's fault (a port, a reboot): no GPU
        fleet.inject(kind, node, since=since, **detail)


# --- the exporter (child process) --------------------------------------------------------------
def serve(n_nodes: int, ports: list[int], control: int) -> None:
    """The clean fleet's exposition, one target a shard of nodes, re-rendered at the wall clock
    once a minute (a shard at a time) and at once for the shard whose node gets or loses a
    fault (``POST /inject?node=&gpu=`` / ``POST /heal?node=`` on the control port, answered
    with ``time.monotonic()`` right after the new bytes are served)."""
    started = time.perf_counter()
    fleet = SimFleet(n_nodes, seed=1, fault_rate=0.0, now=datetime.now(UTC))
    names = fleet.topology.names
    shards = [names[i : i + SHARD_NODES] for i in range(0, len(names), SHARD_NODES)]
    assert len(shards) == len(ports)
    shard_of = {n: k for k, shard in enumerate(shards) for n in shard}
    lock = threading.Lock()  # the fleet is one object: one render at a time

    def render(k: int) -> bytes:
        with lock:
            return fleet.exposition(at=datetime.now(UTC), nodes=shards[k]).encode()

    bodies = [render(k) for k in range(len(shards))]
    size = sum(len(b) for b in bodies)
    series = sum(b.count(b"\n") - b.count(b"\n#") - b.startswith(b"#") for b in bodies)
    print(
        f"exposition: {series} series, {size / 1e6:.0f} MB in {len(shards)} targets, "
        f"rendered in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )

    def rerender() -> None:
        while True:
            for k in range(len(shards)):
                time.sleep(RERENDER_S / len(shards))
                bodies[k] = render(k)

    threading.Thread(target=rerender, name="render", daemon=True).start()

    def handler(k: int | None) -> type[BaseHTTPRequestHandler]:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if k is None or self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                data = bodies[k]
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                node = q.get("node", "")
                if k is not None or node not in shard_of:
                    self.send_error(404)
                    return
                kind = FaultKind(q.get("kind", FaultKind.XID))
                with lock:
                    if url.path == "/inject":
                        inject(fleet, kind, node, int(q.get("gpu", "0")))
                    else:
                        fleet.heal(node, kind)
                shard = shard_of[node]
                bodies[shard] = render(shard)
                answer = json.dumps({"at": time.monotonic()}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    servers = [ThreadingHTTPServer(("127.0.0.1", p), handler(k)) for k, p in enumerate(ports)]
    servers.append(ThreadingHTTPServer(("127.0.0.1", control), handler(None)))
    for s in servers[1:]:
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
    servers[0].daemon_threads = True
    servers[0].serve_forever()


# --- services ----------------------------------------------------------------------------------
def prometheus_config(
    ports: list[int], interval_s: int, rules: Path | None, query_log: Path
) -> str:
    return json.dumps(  # JSON is YAML
        {
            "global": {
                "scrape_interval": f"{interval_s}s",
                "scrape_timeout": f"{max(5, interval_s - 5)}s",
                "evaluation_interval": f"{interval_s}s",
                "query_log_file": str(query_log),
            },
            "rule_files": [str(rules)] if rules else [],
            "scrape_configs": [
                {
                    "job_name": "meowbot-sim",
                    "honor_labels": True,
                    "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}],
                }
            ],
        },
        indent=2,
    )


def alertmanager_config(hook_port: int, token: str, group_wait_s: int) -> str:
    return f"""route:
  receiver: meowbot
  group_by: [alertname, Hostname]
  group_wait: {group_wait_s}s
  group_interval: 1m
  repeat_interval: 4h
receivers:
  - name: meowbot
    webhook_configs:
      - url: http://127.0.0.1:{hook_port}/alertmanager
        send_resolved: true
        max_alerts: 0
        http_config:
          authorization:
            type: Bearer
            credentials: {token}
"""


@contextlib.contextmanager
def redis_service(tmp: Path) -> Iterator[str]:
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    from testsvc import redis  # scripts/testsvc: the starter `make test` uses

    (tmp / "redis").mkdir()
    with redis.start(tmp / "redis", {}) as env:
        yield env["REDIS_URL"]


class Procs:
    """Child processes, stopped newest first."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as err:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop(proc)


# --- the bot's side ------------------------------------------------------------------------------
@dataclass
class Sweeps:
    """Each sweep of the real loop: when it started and ended (monotonic), its PromQL queries."""

    runs: list[tuple[float, float, int]] = field(default_factory=list)
    reads: list[tuple[float, float, frozenset[str]]] = field(default_factory=list)
    """Each sweep's read of the fleet: when it began and ended, the nodes it found faulty."""
    sent: list[float] = field(default_factory=list)
    """When each PromQL query was sent."""
    passes: list[tuple[float, float, int]] = field(default_factory=list)
    """Each notifier pass that called Slack: when it began and ended, its calls."""

    def wrap(self, alerting: Alerting, metrics: PrometheusMetrics) -> None:
        inner = alerting.sweep_once
        read = getattr(runtime, "fleet_faults")  # noqa: B009  (not re-exported)
        query = metrics.query
        notify_once = alerting.notify_once

        async def found(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            faults = await read(*args, **kwargs)
            nodes = frozenset(f.node for f in faults.faults)
            self.reads.append((start, time.monotonic(), nodes))
            return faults

        async def sent(*args: Any, **kwargs: Any) -> Any:
            self.sent.append(time.monotonic())
            return await query(*args, **kwargs)

        async def notified() -> int:
            start = time.monotonic()
            calls = await notify_once()
            if calls:
                self.passes.append((start, time.monotonic(), calls))
            return calls

        setattr(runtime, "fleet_faults", found)  # noqa: B010
        metrics.query = sent  # type: ignore[method-assign]
        alerting.notify_once = notified  # type: ignore[method-assign]

        async def timed() -> Any:
            start, queries = time.monotonic(), metrics.queries
            try:
                return await inner()
            finally:
                self.runs.append((start, time.monotonic(), metrics.queries - queries))

        alerting.sweep_once = timed  # type: ignore[method-assign]

    def read_lag(self, which: int) -> list[float]:
        """From each read's start to its `which`-th query sent (1: the first after the check
        of the rules; -1: the last, a moved counter's re-read included)."""
        out = []
        for start, end, _ in self.reads:
            mine = sorted(t for t in self.sent if start <= t <= end)
            if len(mine) > max(which, 0):
                out.append(mine[which] - start)
        return out


@dataclass
class Relay:
    """Alertmanager's webhook, passed on to the bot as it came; notes when each node arrived."""

    target: str
    arrived: dict[str, float] = field(default_factory=dict)

    async def start(self, port: int) -> web.AppRunner:
        http = aiohttp.ClientSession()

        async def relay(request: web.Request) -> web.Response:
            at = time.monotonic()
            body = await request.read()
            for alert in json.loads(body).get("alerts", []):
                node = alert.get("labels", {}).get("Hostname", "")
                if alert.get("status") == "firing":
                    self.arrived.setdefault(node, at)
            headers = {
                k: v for k, v in request.headers.items() if k in ("Authorization", "Content-Type")
            }
            async with http.post(self.target, data=body, headers=headers) as resp:
                return web.Response(
                    status=resp.status, body=await resp.read(), content_type="application/json"
                )

        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/alertmanager", relay)
        app.on_cleanup.append(lambda _: http.close())
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return runner


def named_nodes(call: Call) -> set[str]:
    """The nodes a Slack call's text names, by name or in a hostlist."""
    out: set[str] = set()
    for token in HOSTLIST_RE.findall(json.dumps(call.args)):
        with contextlib.suppress(BadInput):
            out.update(expand_nodes(token))
    return out


async def first_named(emu: SlackEmulator, node: str, after: float, timeout_s: float) -> float:
    """When a channel call (post or update) first named `node` after `after`; NaN on timeout."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < deadline:
        calls = emu.calls
        for call in calls[seen:]:
            if (
                call.at >= after
                and call.ok
                and call.method in ("chat.postMessage", "chat.update")
                and call.args.get("channel") == CHANNEL
                and node in named_nodes(call)
            ):
                return call.at
        seen = len(calls)
        await asyncio.sleep(0.05)
    return float("nan")


def post_control(url: str) -> float:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30) as resp:
        return float(json.loads(resp.read())["at"])


def first_scrape(prom: str, node: str, kind: FaultKind, after_wall: float) -> float | None:
    """The wall time of the first sample after `after_wall` in which one of the node's series
    of the kind's metrics changed or appeared: when Prometheus first held the fault."""
    first: float | None = None
    for metric in kind_metrics(kind):
        for part in selector(metric, [node], "node").split(" or "):
            data = urllib.parse.urlencode({"query": f"{part}[10m]"}).encode()
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
                with urllib.request.urlopen(f"{prom}/api/v1/query", data=data, timeout=10) as r:
                    result = json.loads(r.read())["data"]["result"]
                for series in result:
                    before: str | None = None
                    for ts, value in series["values"]:
                        t = float(ts)
                        if t >= after_wall - 1 and value != before:
                            first = t if first is None else min(first, t)
                            break
                        before = value
    return first


@dataclass
class Fault:
    node: str
    at: float  # monotonic: served by the exporter, or posted to Alertmanager
    named: float = float("nan")
    scraped: float | None = None  # monotonic: Prometheus' first sample of it
    sweep_start: float | None = None  # monotonic: the sweep whose read first found it
    read_end: float | None = None  # monotonic: that read's end
    sweep_end: float | None = None  # monotonic: that sweep's end (its alerts stored)
    pass_start: float | None = None  # monotonic: the notifier's pass that posted it
    missed: int = 0  # reads begun after the scrape was stored that did not find it
    missed_soon: list[float] = field(default_factory=list)  # begun within that second: when
    arrived: float | None = None  # monotonic: the webhook reached the bot
    kind: FaultKind = FaultKind.XID

    @property
    def latency(self) -> float:
        return self.named - self.at


def pick_nodes(names: list[str], count: int, rng: random.Random) -> list[str]:
    """`count` nodes spread over the fleet (every leaf switch before any twice)."""
    step = max(1, len(names) // count)
    return [names[k * step + rng.randrange(step)] for k in range(count)]


async def sweep_fault(
    emu: SlackEmulator,
    node: str,
    kind: FaultKind,
    start_in: float,
    env: dict[str, str],
    sweeps: Sweeps,
    timeout_s: float,
    rng: random.Random,
    wall_offset: float,
) -> Fault:
    """One fault: set at a random moment, timed to the message naming its node, then mended."""
    loop = asyncio.get_running_loop()
    control, prom = env["CONTROL_URL"], env["PROMETHEUS_URL"]
    await asyncio.sleep(start_in)
    gpu = rng.randrange(8)
    at = await loop.run_in_executor(
        None, post_control, f"{control}/inject?node={node}&gpu={gpu}&kind={kind.value}"
    )
    fault = Fault(node, at, kind=kind)
    fault.named = await first_named(emu, node, at, timeout_s)
    scraped = await loop.run_in_executor(None, first_scrape, prom, node, kind, at + wall_offset)
    if scraped is not None:
        fault.scraped = scraped - wall_offset
    # The sweep whose read first found the node faulty, and the reads that began after the
    # scrape (and its ingestion, `SCRAPE_VISIBLE_S`) yet missed it.
    hit = [(s, e) for s, e, nodes in sweeps.reads if e >= at and s <= fault.named and node in nodes]
    if hit:
        fault.sweep_start, fault.read_end = min(hit)
        ends = [e for s, e, _ in sweeps.runs if s <= fault.sweep_start <= e]
        fault.sweep_end = ends[0] if ends else None
        if fault.sweep_end is not None:
            made = [s for s, e, _ in sweeps.passes if s <= fault.named <= e]
            fault.pass_start = made[0] if made else None
        if fault.scraped is not None:
            fault.missed = sum(
                1
                for s, _, nodes in sweeps.reads
                if fault.scraped + SCRAPE_VISIBLE_S <= s < fault.sweep_start and node not in nodes
            )
            fault.missed_soon = [
                round(s - fault.scraped, 2)
                for s, _, nodes in sweeps.reads
                if fault.scraped <= s < min(fault.sweep_start, fault.scraped + SCRAPE_VISIBLE_S)
            ]
    say(
        f"  sweep: {kind.value} on {node}: named after {fault.latency:.1f} s"
        + (f" (scraped after {fault.scraped - at:.1f} s)" if fault.scraped else "")
    )
    await loop.run_in_executor(None, post_control, f"{control}/heal?node={node}&kind={kind.value}")
    return fault


def am_alert(node: str, gpu: int, resolved: bool = False) -> dict[str, Any]:
    now = datetime.now(UTC)
    alert: dict[str, Any] = {
        "labels": {
            "alertname": "GpuXidError",
            "Hostname": node,
            "gpu": str(gpu),
            "xid": str(XID),
            "severity": "critical",
        },
        "annotations": {"summary": f"Xid {XID} on {node} GPU {gpu}"},
        # Now: Alertmanager sends a new group at once, without group_wait, when its first
        # alert started more than group_wait ago (as a rule's alert with a longer `for:` does).
        "startsAt": now.isoformat(),
    }
    if resolved:
        alert["endsAt"] = now.isoformat()
    return alert


async def am_fault(
    emu: SlackEmulator,
    node: str,
    start_in: float,
    am: AlertmanagerClient,
    relay: Relay,
    timeout_s: float,
    rng: random.Random,
) -> Fault:
    """One alert posted to Alertmanager at a random moment, timed to the message, resolved."""
    await asyncio.sleep(start_in)
    gpu = rng.randrange(8)
    at = time.monotonic()
    await am.post_alerts([am_alert(node, gpu)])
    fault = Fault(node, at)
    fault.named = await first_named(emu, node, at, timeout_s)
    fault.arrived = relay.arrived.get(node)
    own = f", the bot's part {fault.named - fault.arrived:.2f} s" if fault.arrived else ""
    say(f"  alertmanager: {node}: named after {fault.latency:.1f} s{own}")
    await am.post_alerts([am_alert(node, gpu, resolved=True)])
    return fault


# --- the run -----------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def line(what: str, values: list[float]) -> str:
    p50, p90 = pct(values, 0.5), pct(values, 0.9)
    return (
        f"{what}: P50 {p50:.1f} s, P90 {p90:.1f} s, max {max(values, default=float('nan')):.1f} s "
        f"({len(values)})"
    )


def verdict(values: list[float]) -> str:
    p50, p90 = pct(values, 0.5), pct(values, 0.9)
    ok = p50 < TARGET[0] and p90 < TARGET[1]
    return "met" if ok else "MISSED"


def floor_draws(scrape_s: float, sweep_s: float, slack_s: float = 0.1) -> list[float]:
    """The floor's distribution: a fault served at a uniform moment of the scrape interval,
    found by the first sweep after its scrape (a uniform moment of the sweep interval), one
    Slack call; the sweep's own time, the scrape's ingestion and the rules count as zero."""
    rng = random.Random(0)
    return [rng.uniform(0, scrape_s) + rng.uniform(0, sweep_s) + slack_s for _ in range(20_000)]


async def measure(args: argparse.Namespace, env: dict[str, str], prom_pid: int) -> None:
    rng = random.Random(args.seed)
    client = aioredis.Redis.from_url(env["REDIS_URL"], decode_responses=True)
    stale = [k async for k in client.scan_iter(key("", "alerts", "*"))]
    if stale:
        await client.delete(*stale)
    await client.aclose()
    emu = SlackEmulator()
    await emu.start()
    emu.add_channel(CHANNEL, "gpu-alerts")
    extra = {"MEOWBOT_SWEEP_INTERVAL": str(args.sweep_interval)} if args.sweep_interval else {}
    settings = load_settings(
        SLACK_BOT_TOKEN=emu.bot_token,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=emu.api_url,
        REDIS_URL=env["REDIS_URL"],
        PROMETHEUS_URL=env["PROMETHEUS_URL"],
        ALERTMANAGER_URL=env["ALERTMANAGER_URL"],
        ALERTMANAGER_WEBHOOK_TOKEN=env["TOKEN"],
        MEOWBOT_ALERT_CHANNEL=CHANNEL,
        MEOWBOT_ADMINS="",
        MEOWBOT_CONFIG=None,
        SLURM_REST_URL=None,
        **extra,
    )
    bot = await create_bot(settings)
    alerting = bot.deps.alerting
    metrics = bot.deps.triage.metrics
    assert alerting is not None and isinstance(metrics, PrometheusMetrics)
    interval = alerting.cfg.sweep_interval_s
    bot_port = await bot.start_http("127.0.0.1", 0)
    relay = Relay(f"http://127.0.0.1:{bot_port}/alertmanager")
    relay_runner = await relay.start(int(env["HOOK_PORT"]))
    bot.start_background(sweep=False)  # the notifier; the sweep loop is ours to stop
    sweeps = Sweeps()
    sweeps.wrap(alerting, metrics)
    stop_sweep = asyncio.Event()
    sweeper = asyncio.create_task(alerting.sweeper(stop_sweep))
    am = AlertmanagerClient(env["ALERTMANAGER_URL"])
    try:
        await bot.deps.triage.inventory.load()
        names = list(bot.deps.triage.inventory.names())
        say(
            f"bot: sweep every {interval} s (MEOWBOT_SWEEP_INTERVAL"
            f"{'' if args.sweep_interval else ', its default'}), {len(names)} nodes listed"
        )
        while not sweeps.runs:
            await asyncio.sleep(0.2)
        await asyncio.sleep(3.0)
        first = sweeps.runs[0]
        say(
            f"first sweep: {first[1] - first[0]:.1f} s, {first[2]} queries; "
            f"{len(emu.calls_to('chat.postMessage'))} messages posted about the clean fleet"
        )
        kinds = [FaultKind(k) for k in args.kinds.split(",")] if args.kinds else list(KINDS)
        sweep_kinds = [k for _ in range(args.faults) for k in kinds]
        rng.shuffle(sweep_kinds)
        picked = pick_nodes(names, len(sweep_kinds) + args.alerts, rng)
        rng.shuffle(picked)
        sweep_nodes, am_nodes = picked[: len(sweep_kinds)], picked[len(sweep_kinds) :]
        timeout_s = 3 * interval + 4 * args.scrape_interval + 60
        cpu0, t0 = prometheus_cpu_s(prom_pid), time.monotonic()
        sweeps_before = len(sweeps.runs)
        wall_offset = time.time() - time.monotonic()
        # Arrivals at random moments over the span, each timed on its own, so that a fault
        # lands at any phase of the scrape, the rules and the sweep; faults may overlap.
        span = args.gap * max(len(sweep_kinds), args.alerts)
        sweep_tasks = [
            sweep_fault(
                emu,
                node,
                kind,
                rng.uniform(0, span),
                env,
                sweeps,
                timeout_s,
                random.Random(rng.random()),
                wall_offset,
            )
            for node, kind in zip(sweep_nodes, sweep_kinds, strict=True)
        ]
        am_tasks = [
            am_fault(
                emu,
                node,
                rng.uniform(0, span),
                am,
                relay,
                timeout_s + args.group_wait,
                random.Random(rng.random()),
            )
            for node in am_nodes
        ]
        done = await asyncio.gather(*sweep_tasks, *am_tasks)
        sweep_faults, am_faults = done[: len(sweep_tasks)], done[len(sweep_tasks) :]
        with_sweep = (prometheus_cpu_s(prom_pid) - cpu0) / (time.monotonic() - t0) * 60
        phase_s = time.monotonic() - t0
        swept = sweeps.runs[sweeps_before:]
        stop_sweep.set()
        await sweeper
        say(f"sweep loop stopped; Prometheus at rest for {args.idle} s")
        cpu1, t1 = prometheus_cpu_s(prom_pid), time.monotonic()
        await asyncio.sleep(args.idle)
        without = (prometheus_cpu_s(prom_pid) - cpu1) / (time.monotonic() - t1) * 60
    finally:
        stop_sweep.set()
        with contextlib.suppress(Exception):
            await sweeper
        await am.close()
        await relay_runner.cleanup()
        await bot.close()
        await emu.stop()
    report(args, interval, sweep_faults, am_faults, sweeps, swept, with_sweep, without, phase_s)


def report(
    args: argparse.Namespace,
    interval: int,
    sweep_faults: list[Fault],
    am_faults: list[Fault],
    sweeps: Sweeps,
    swept: list[tuple[float, float, int]],
    with_sweep: float,
    without: float,
    phase_s: float,
) -> None:
    print()
    print(
        f"fault to channel message, {args.nodes} nodes x 8 GPUs, scrape every "
        f"{args.scrape_interval} s, recording rules {'loaded' if args.rules else 'not loaded'}, "
        f"sweep every {interval} s, Alertmanager group_wait {args.group_wait} s"
    )
    print(
        f"  NVIDIA NVSentinel (published, fault to cordon): P50 {NVSENTINEL[0]} s, "
        f"P90 {NVSENTINEL[1]:.0f} s; target: P50 < {TARGET[0]:.0f} s, P90 < {TARGET[1]:.0f} s"
    )
    if sweep_faults:
        done = [f for f in sweep_faults if f.latency == f.latency]
        lat = [f.latency for f in done]
        floor = floor_draws(args.scrape_interval, interval)
        print(
            f"  the floor (a uniform moment in the scrape and in the sweep's interval, one Slack "
            f"call): P50 {pct(floor, 0.5):.1f} s, P90 {pct(floor, 0.9):.1f} s"
        )
        print(
            f"  (a) {line('sweep, fault in the exposition to the message', lat)}; "
            f"{len(sweep_faults) - len(done)} not named in time; target {verdict(lat)}"
        )
        for kind in sorted({f.kind for f in sweep_faults}, key=str):
            mine = [f for f in sweep_faults if f.kind is kind]
            named = [f.latency for f in mine if f.latency == f.latency]
            missed = len(mine) - len(named)
            # The bot's part, from the scrape: the scrape's phase, the same draw for every
            # kind, is most of a kind's spread over a few faults.
            own = [
                f.named - f.scraped for f in mine if f.scraped is not None and f.named == f.named
            ]
            print(
                f"      {line(kind.value, named)}"
                + (f", {missed} not named" if missed else "")
                + (
                    f"; from the scrape P50 {pct(own, 0.5):.1f} s, max {max(own):.1f} s"
                    if own
                    else ""
                )
            )
        parts = [f for f in done if f.scraped is not None and f.sweep_start is not None]
        if parts:

            def p50(values: list[float]) -> str:
                return f"{pct(values, 0.5):.1f} s"

            print(
                "      where it went, P50: to the scrape "
                + p50([f.scraped - f.at for f in parts])  # type: ignore[operator]
                + ", from the scrape to the start of the sweep whose read found it "
                + p50([f.sweep_start - f.scraped for f in parts])  # type: ignore[operator]
                + ", that read "
                + p50([f.read_end - f.sweep_start for f in parts])  # type: ignore[operator]
                + ", the rest of that sweep "
                + p50([f.sweep_end - f.read_end for f in parts if f.sweep_end])  # type: ignore[operator]
                + ", from the sweep's end to the message "
                + p50([f.named - f.sweep_end for f in parts if f.sweep_end])
                + f" ({len(parts)} of {len(done)})"
            )
            passed = [f for f in parts if f.sweep_end and f.pass_start]
            print(
                "      from the sweep's end to the notifier's pass that called Slack "
                + p50([f.pass_start - f.sweep_end for f in passed])  # type: ignore[operator]
                + ", that pass to the call "
                + p50([f.named - f.pass_start for f in passed])  # type: ignore[operator]
                + f"; a read's data queries are sent {p50(sweeps.read_lag(1))} after it began, "
                + f"its last {p50(sweeps.read_lag(-1))}"
            )
            soon = sorted(t for f in parts for t in f.missed_soon)
            print(
                f"      reads begun within {SCRAPE_VISIBLE_S:.0f} s of the scrape not finding it: "
                f"{len(soon)}, at {soon}"
            )
            late = sorted((f for f in parts if f.missed), key=lambda f: str(f.kind))
            print(
                f"      read after the scrape was stored ({SCRAPE_VISIBLE_S:.0f} s) yet not found: "
                f"{len(late)} of {len(parts)}"
                + "".join(f"; {f.kind.value} on {f.node} by {f.missed}" for f in late)
            )
    if am_faults:
        done = [f for f in am_faults if f.latency == f.latency]
        lat = [f.latency for f in done]
        own = [f.named - f.arrived for f in done if f.arrived is not None]
        print(
            f"  (b) {line('Alertmanager, POST to the message', lat)}; "
            f"{len(am_faults) - len(done)} not named in time; target {verdict(lat)}"
        )
        print(f"      {line('the bot: webhook received to the message', own)}")
    durations = [e - s for s, e, _ in swept]
    queries = sorted({q for *_, q in swept})
    if durations:
        print(
            f"  the sweep at {args.nodes} nodes: {len(swept)} sweeps in {phase_s:.0f} s, "
            f"duration P50 {pct(durations, 0.5):.2f} s, max {max(durations):.2f} s, "
            f"{'/'.join(map(str, queries))} PromQL queries each"
        )
    print(
        f"  Prometheus CPU: {with_sweep:.1f} s a minute with the sweep every {interval} s "
        f"(and the {len(am_faults)} alerts), {without:.1f} s a minute without it "
        f"(ingest{' and rules' if args.rules else ''}): the sweep costs "
        f"{with_sweep - without:.1f} CPU s a minute ({(with_sweep - without) / 60:.0%} of a core)"
    )


def query_costs(log: Path, top: int = 8) -> None:
    """The API queries Prometheus spent most time on (its query log: the sweeps', the bench's
    own and the rules' evaluations apart), each with its count and median times."""
    by_query: dict[str, list[tuple[float, float]]] = {}
    for row in log.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            entry = json.loads(row)
            if "httpRequest" not in entry:
                continue  # a rule's evaluation
            timings = entry["stats"]["timings"]
            text = re.sub(r"\s+", " ", entry["params"]["query"])
            text = re.sub(r'"[^"]{40,}"', '"…"', text)
            by_query.setdefault(text[:110], []).append(
                (float(timings["execTotalTime"]), float(timings["execQueueTime"]))
            )
    if not by_query:
        return
    total = sum(t for runs in by_query.values() for t, _ in runs)
    print(f"  Prometheus' query log: {total:.0f} s of query time over the run; the most costly:")
    ranked = sorted(by_query.items(), key=lambda kv: -sum(t for t, _ in kv[1]))
    for text, runs in ranked[:top]:
        spent = sum(t for t, _ in runs)
        took = statistics.median(t for t, _ in runs)
        queued = statistics.median(q for _, q in runs)
        print(
            f"    {spent / total:4.0%}  x{len(runs):<4} median {took:.3f} s (queued {queued:.3f} s)"
            f"  {text}"
        )


class SaidWhy(logging.Handler):
    """The bot's warnings on stderr with the reason its log record carries (`error`)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            why = getattr(record, "error", "")
            say(f"  bot: {record.getMessage()}" + (f": {why}" if why else ""))


def run(args: argparse.Namespace) -> None:
    logging.getLogger().handlers[:] = [SaidWhy()]
    n_shards = -(-args.nodes // SHARD_NODES)
    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="meowbot-bench-latency-") as tmp_name:
        tmp = Path(tmp_name)
        logs = [tmp / "exporter.log", tmp / "prometheus.log", tmp / "alertmanager.log"]
        try:
            with redis_service(tmp) as redis_url:
                ports = [free_port() for _ in range(n_shards)]
                control = free_port()
                exporter = procs.start(
                    [
                        sys.executable,
                        __file__,
                        "--serve",
                        ",".join(map(str, ports)),
                        "--control",
                        str(control),
                        "--nodes",
                        str(args.nodes),
                    ],
                    logs[0],
                )
                started = time.perf_counter()
                wait_port(control, 300, exporter, "the fleet's exporter")
                say(
                    f"exporter: {logs[0].read_text().strip()} (up after "
                    f"{time.perf_counter() - started:.1f} s)"
                )
                rules, _, n_rules = write_rules(tmp)
                groups = bench_rule_groups()
                if args.record_gauges:
                    # The other way to have the checks' gauges fresh: recorded at the scrape's
                    # pace and read through their rules (this process's adapter reads them).
                    prometheus_rules.READ_AT_THE_SCRAPE = frozenset()
                    groups = bench_rule_groups(value_interval_s=args.scrape_interval)
                    rules.write_text(rules_yaml(groups))
                    n_rules = sum(len(g.rules) for g in groups)
                cfg = tmp / "prometheus.yml"
                cfg.write_text(
                    prometheus_config(
                        ports,
                        args.scrape_interval,
                        rules if args.rules else None,
                        tmp / "queries.log",
                    )
                )
                (tmp / "data").mkdir()
                port = free_port()
                prom = procs.start(prometheus_command(cfg, tmp / "data", port), logs[1])
                prom_url = f"http://127.0.0.1:{port}"
                wait_port(port, 60, prom, "prometheus")
                expected = 8 * args.nodes
                wait_for_count(
                    prom_url,
                    f"count({READY_METRIC})",
                    expected,
                    300,
                    1.0,
                    procs.procs,
                    lambda seen: f"the first full scrape: {seen} of {expected} GPUs",
                )
                scraped_at = time.time()
                say(
                    f"prometheus: {expected} GPUs scraped after {time.perf_counter() - started:.1f}"
                    f" s, a target's scrape {scalar(prom_url, 'avg(scrape_duration_seconds)'):.2f}"
                    f" s, every {args.scrape_interval} s"
                )
                if args.rules:
                    # The groups of a day's window (every 240 s) feed /hw-faults, not the sweep.
                    read = [g for g in groups if g.interval_s < DAY_GROUP_S]
                    n_read = sum(len(g.rules) for g in read)
                    ran = "|".join(sorted({str(g.interval_s) for g in read}))
                    wait_for_count(
                        prom_url,
                        f'count({{{SENTINEL_LABEL}=~"{ran}"}} > {scraped_at:.3f})',
                        n_read,
                        300,
                        2.0,
                        procs.procs,
                        lambda seen: f"the rules the sweep reads to run: {seen} of {n_read}",
                    )
                    say(
                        f"recording rules: {n_rules} loaded; the {n_read} the sweep reads "
                        f"(every {ran.replace('|', '/')} s) have run since the full scrape"
                    )
                hook_port = free_port()
                am_port = free_port()
                token = secrets.token_hex(16)
                am_cfg = tmp / "alertmanager.yml"
                am_cfg.write_text(alertmanager_config(hook_port, token, args.group_wait))
                am = procs.start(
                    [
                        "prometheus-alertmanager",
                        f"--config.file={am_cfg}",
                        f"--storage.path={tmp / 'am-data'}",
                        f"--web.listen-address=127.0.0.1:{am_port}",
                        "--cluster.listen-address=",
                    ],
                    logs[2],
                )
                wait_port(am_port, 30, am, "alertmanager")
                env = {
                    "REDIS_URL": redis_url,
                    "PROMETHEUS_URL": prom_url,
                    "ALERTMANAGER_URL": f"http://127.0.0.1:{am_port}",
                    "TOKEN": token,
                    "HOOK_PORT": str(hook_port),
                    "CONTROL_URL": f"http://127.0.0.1:{control}",
                }
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                say(f"measuring; load average {load} ({os.cpu_count()} cores)")
                asyncio.run(measure(args, env, prom.pid))
                query_costs(tmp / "queries.log")
                say(f"prometheus RSS {rss_mb(prom.pid):.0f} MB")
        except BaseException:
            for log in logs:
                print(tail(log), file=sys.stderr)
            raise
        finally:
            procs.stop()
    say(f"total wall time {time.perf_counter() - started:.1f} s")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--faults", type=int, default=3, help="faults a kind, through the sweep")
    parser.add_argument(
        "--kinds", default="", help="comma-separated fault kinds (default: every kind but drift)"
    )
    parser.add_argument("--alerts", type=int, default=20, help="alerts through Alertmanager")
    parser.add_argument("--scrape-interval", type=int, default=15, help="seconds")
    parser.add_argument(
        "--sweep-interval", type=int, default=0, help="seconds (default: the bot's default)"
    )
    parser.add_argument("--group-wait", type=int, default=10, help="Alertmanager's, seconds")
    parser.add_argument(
        "--gap", type=float, default=8.0, help="mean seconds between faults of one path"
    )
    parser.add_argument("--idle", type=int, default=120, help="seconds at rest, for the CPU")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-rules", dest="rules", action="store_false")
    parser.add_argument(
        "--record-gauges",
        action="store_true",
        help="record the checks' gauges at the scrape's pace instead of reading them raw",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--control", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.nodes, [int(p) for p in args.serve.split(",")], args.control)
    else:
        run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
