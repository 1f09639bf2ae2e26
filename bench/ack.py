"""Ack latency while the bot works: not a timed test, run by hand (`make bench`).

Four servers, each in a process of its own, and the Slack emulator that receives the bots'
answers in a fifth (Slack is not in the bot's process, nor in the sender's: answers arriving
during a burst would otherwise hold back the sender reading the acks, and meowbot, the only one
that answers, would be timed slower than it is). This process only sends and times:

- `aiohttp`: a bare aiohttp handler answering 200, the floor;
- `bolt`: a bare Bolt AsyncApp whose command listener only acks, Bolt's own ceiling;
- `meowbot`: the real bot (`create_bot` on the simulated fleet of FLEET nodes) doing the real
  work after each ack: a mix of `/node-health` on single nodes and on 64-node hostlists,
  `/hw-faults` over the fleet and `/job-slow` with its chart;
- `meowbot+sweep`: the same bot on a 50,000-node fleet, a passive alert sweep of the whole
  fleet (`Alerting.sweep_once`, as `meowbot run` starts it) started just before each burst.

Rounds alternate between the servers (ROUNDS each, interleaved, so a slow minute of the shared
machine falls on all of them); each round is N signed slash commands in flight at once. After a
bot's round the next waits until every answer has reached the emulator (response_url posts, and
the chart upload that ends each /job-slow), so that its after-ack work does not slow the next
server's round. Prints p50/p99 of each, the ratios meowbot/Bolt and Bolt/aiohttp, and how many
answers arrived of those due. Needs REDIS_URL (`make bench` starts redis-server).

`MEOWBOT_ACK_PROFILE=DIR` profiles each bot's event loop thread (cProfile) and writes
`DIR/<server>.prof` when the bench ends: where the loop's time goes during the bursts.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import random
import re
import signal
import socket
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.alerts.runtime import SWEEP_LOCK
from bot.app import create_bot
from bot.backends.alert_store import RedisAlertStore
from bot.backends.sim.fleet import SimFleet
from bot.config import load_settings
from bot.offload import keep_the_start, loop_first
from bot.server import LISTEN_BACKLOG, SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator

N = 200
WARMUP = 20
ROUNDS = 5
FLEET = 4096
SWEEP_FLEET = 50_000
SECRET = "bench-secret"
TARGET_RATIO = 1.5  # meowbot's ack p99 against bare Bolt's
ANSWER_TIMEOUT_S = 300.0
SWEEP_PATH = "/bench/sweep"
EMULATOR_PATH = "/bench/commands"
PROFILE_VAR = "MEOWBOT_ACK_PROFILE"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# The servers ------------------------------------------------------------------------------------


async def listen(app: web.Application, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    # The bot's backlog: the default 128 drops SYNs in a burst and each waits a second.
    await web.TCPSite(runner, "127.0.0.1", port, backlog=LISTEN_BACKLOG).start()
    await asyncio.Event().wait()


async def serve_aiohttp(port: int) -> None:
    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post(SLACK_EVENTS_PATH, handler)
    await listen(app, port)


async def serve_bolt(port: int) -> None:
    client = AsyncWebClient(os.environ["SLACK_BOT_TOKEN"], base_url=os.environ["SLACK_API_URL"])
    app = AsyncApp(client=client, signing_secret=SECRET, process_before_response=False)

    async def only_ack(ack: AsyncAck) -> None:
        await ack()

    app.command(re.compile(".*"))(only_ack)
    await listen(app.web_app(path=SLACK_EVENTS_PATH), port)


async def serve_emulator(port: int) -> None:
    """The Slack emulator, with two routes for the sender: the signed bodies of slash commands
    (their response_url on this emulator) and how many answers arrived so far."""
    emu = SlackEmulator()
    await emu.start()

    async def bodies(request: web.Request) -> web.Response:
        commands = await request.json()
        return web.json_response(
            [urllib.parse.urlencode(emu.slash_command_payload(n, t)) for n, t in commands]
        )

    async def delivered(_: web.Request) -> web.Response:
        return web.json_response({"answers": answers(emu), "api_url": emu.api_url})

    app = web.Application()
    app.router.add_post(EMULATOR_PATH, bodies)
    app.router.add_get(EMULATOR_PATH, delivered)
    await listen(app, port)


def profiled(kind: str) -> Callable[[], None]:
    """Profiles the loop's thread if MEOWBOT_ACK_PROFILE names a folder; returns what writes it."""
    folder = os.environ.get(PROFILE_VAR)
    if not folder:
        return lambda: None
    profile = cProfile.Profile()
    profile.enable()

    def write() -> None:
        profile.disable()
        profile.dump_stats(str(Path(folder) / f"{kind}.prof"))

    return write


async def serve_bot(port: int, *, sweep: bool) -> None:
    bot = await create_bot(load_settings())  # tokens, URLs and the fleet from the environment
    keep_the_start()  # as `meowbot run` does (bot/app.py: serve)
    # The bench ends the server with SIGTERM: the profile is written then.
    write_profile = profiled("meowbot+sweep" if sweep else "meowbot")
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, _exit_after, write_profile)
    alerting = bot.deps.alerting
    assert alerting is not None, "the sweep needs REDIS_URL"
    sweeps: list[float] = []  # seconds each sweep took
    running: set[asyncio.Task[None]] = set()

    async def one_sweep() -> None:
        started = time.perf_counter()
        if await alerting.sweep_once() is not None:
            sweeps.append(time.perf_counter() - started)

    async def start_sweep(_: web.Request) -> web.Response:
        # The real sweep of `meowbot run` (bot/alerts/runtime.py), begun at the bench's word
        # so that it is under way during the burst rather than by chance. The last one has
        # ended (the bench waits for it): its lock, held for the interval, is lifted.
        store = alerting.store
        assert isinstance(store, RedisAlertStore)
        await store.redis.delete(store.locks.lock_key(SWEEP_LOCK))
        task = asyncio.create_task(one_sweep())
        running.add(task)
        task.add_done_callback(running.discard)
        return web.json_response({"sweeps": len(sweeps)})

    async def sweep_times(_: web.Request) -> web.Response:
        return web.json_response({"sweeps": sweeps, "running": len(running)})

    if sweep:
        bot.web.router.add_post(SWEEP_PATH, start_sweep)
        bot.web.router.add_get(SWEEP_PATH, sweep_times)
    await bot.start_http("127.0.0.1", port)
    await asyncio.Event().wait()


# The load -------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    kind: str  # aiohttp | bolt | bot | sweep
    env: dict[str, str]
    commands: list[tuple[str, str]] = field(default_factory=list)  # (command, text), N of them
    port: int = 0
    proc: asyncio.subprocess.Process | None = None
    latencies: list[float] = field(default_factory=list)
    round_p99: list[float] = field(default_factory=list)  # ms, each round's own
    due: int = 0
    delivered: int = 0
    sweeps: list[float] = field(default_factory=list)
    overlapped: int = 0  # rounds whose burst began while a sweep ran

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def mix(fleet: SimFleet, *, hw_faults: int, job_slow: int, hostlists: int) -> list[tuple[str, str]]:
    """N commands: `/hw-faults` over the fleet, `/job-slow` of small running jobs (8 to 32 nodes:
    the chart and the statistics, not a 2,048-node read), 64-node hostlists, single nodes."""
    nodes = fleet.nodes
    jobs = [j.job_id for j in fleet.jobs if 8 <= len(j.nodes) <= 32 and j.state.value == "running"]
    out: list[tuple[str, str]] = []
    out += [("/hw-faults", "")] * hw_faults
    out += [("/job-slow", jobs[i % len(jobs)]) for i in range(job_slow)]
    for i in range(hostlists):
        first = (i * 64) % (len(nodes) - 64) + 1
        out.append(("/node-health", f"gpu-[{first:04d}-{first + 63:04d}]"))
    singles = N - len(out)
    out += [("/node-health", nodes[(i * 37) % len(nodes)]) for i in range(singles)]
    random.Random(0).shuffle(out)  # the heavy ones spread through the burst
    return out


async def start(server: Server) -> None:
    server.port = free_port()
    server.proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        server.kind,
        str(server.port),
        env={**os.environ, **server.env},
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline or server.proc.returncode is not None:
                sys.exit(f"the {server.name} server did not start")
            await asyncio.sleep(0.2)


async def fire(http: aiohttp.ClientSession, url: str, bodies: list[str]) -> list[float]:
    verifier = SignatureVerifier(SECRET)

    async def one(body: str) -> float:
        ts = str(int(time.time()))
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": str(verifier.generate_signature(timestamp=ts, body=body)),
        }
        started = time.perf_counter()
        async with http.post(url, data=body, headers=headers) as resp:
            await resp.read()
            assert resp.status == 200, resp.status
        return time.perf_counter() - started

    return list(await asyncio.gather(*(one(b) for b in bodies)))


def answers(emu: SlackEmulator) -> int:
    """What the bot delivered: each private answer (a response_url post) and each /job-slow's
    chart, the last thing its answer posts."""
    return len(emu.responses) + len(emu.calls_to("files.completeUploadExternal"))


def due(commands: list[tuple[str, str]]) -> int:
    return len(commands)  # one response_url post, or one chart for /job-slow


async def delivered(http: aiohttp.ClientSession, emu: Server) -> int:
    async with http.get(emu.url + EMULATOR_PATH) as resp:
        return int((await resp.json())["answers"])


async def round_of(
    http: aiohttp.ClientSession, emu: Server, server: Server, commands: list[tuple[str, str]]
) -> list[float]:
    async with http.post(emu.url + EMULATOR_PATH, json=commands) as resp:
        bodies = list(await resp.json())
    before = await delivered(http, emu)
    if server.kind == "sweep":
        async with http.post(server.url + SWEEP_PATH) as resp:
            await resp.read()
        await asyncio.sleep(0.3)  # the sweep is reading and evaluating the fleet
        async with http.get(server.url + SWEEP_PATH) as resp:
            server.overlapped += int((await resp.json())["running"] > 0)
    latencies = await fire(http, server.url + SLACK_EVENTS_PATH, bodies)
    if server.kind in ("bot", "sweep"):
        expected = before + due(commands)
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while (got := await delivered(http, emu)) < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        server.due += due(commands)
        server.delivered += min(got, expected) - before
    if server.kind == "sweep":
        while True:  # the sweep ends before the next server's round
            async with http.get(server.url + SWEEP_PATH) as resp:
                state = await resp.json()
            if not state["running"]:
                server.sweeps = state["sweeps"]
                break
            await asyncio.sleep(0.2)
    return latencies


def _exit_after(write: Callable[[], None]) -> None:
    try:
        write()
    finally:
        os._exit(0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        sys.exit("bench/ack.py needs REDIS_URL: run it with `make bench`")
    emu = Server("slack", "emulator", {})
    await start(emu)
    async with aiohttp.ClientSession() as http, http.get(emu.url + EMULATOR_PATH) as resp:
        api_url = str((await resp.json())["api_url"])
    base = {
        "SLACK_BOT_TOKEN": SlackEmulator().bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": api_url,
        "REDIS_URL": redis_url,
        "MEOWBOT_LOG_LEVEL": "warning",
        "PROMETHEUS_URL": "",
        "SLURM_REST_URL": "",
    }
    small, big = SimFleet(FLEET, seed=0), SimFleet(SWEEP_FLEET, seed=0)
    servers = [
        Server("aiohttp", "aiohttp", base),
        Server("bolt", "bolt", base),
        Server("meowbot", "bot", {**base, "MEOWBOT_FLEET": f"sim:{FLEET}"}),
        Server(
            "meowbot+sweep",
            "sweep",
            {**base, "MEOWBOT_FLEET": f"sim:{SWEEP_FLEET}", "MEOWBOT_SWEEP_INTERVAL": "600"},
        ),
    ]
    work = mix(small, hw_faults=40, job_slow=10, hostlists=40)
    # /hw-faults over 50,000 nodes costs a second or more of CPU each: a few, as in a morning.
    sweep_work = mix(big, hw_faults=4, job_slow=10, hostlists=40)
    for server in servers:
        server.commands = sweep_work if server.kind == "sweep" else work
    try:
        await asyncio.gather(*(start(s) for s in servers))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            # Warm up (Bolt's first auth.test, imports such as matplotlib's for the first
            # chart, the fleet's first read, the pool): one of each command, then the rest.
            for server in servers:
                firsts = list({name: (name, text) for name, text in server.commands}.values())
                await round_of(http, emu, server, firsts + server.commands[: WARMUP - len(firsts)])
                server.due = server.delivered = server.overlapped = 0
            for _ in range(ROUNDS):
                for server in servers:
                    got = await round_of(http, emu, server, server.commands)
                    server.latencies += got
                    server.round_p99.append(pct(got, 0.99) * 1000)
    finally:
        for server in [*servers, emu]:
            if server.proc is not None and server.proc.returncode is None:
                server.proc.terminate()
                await server.proc.wait()
    report(servers, work, sweep_work)


def report(
    servers: list[Server], work: list[tuple[str, str]], sweep_work: list[tuple[str, str]]
) -> None:
    def kinds(commands: list[tuple[str, str]]) -> str:
        hostlists = sum(1 for c, t in commands if c == "/node-health" and "[" in t)
        singles = sum(1 for c, t in commands if c == "/node-health" and "[" not in t)
        hw = sum(1 for c, _ in commands if c == "/hw-faults")
        slow = sum(1 for c, _ in commands if c == "/job-slow")
        return (
            f"{singles} /node-health NODE, {hostlists} /node-health HOSTLIST(64), "
            f"{hw} /hw-faults, {slow} /job-slow"
        )

    by = {s.name: s for s in servers}
    print(f"cores: {os.cpu_count()}, {N} signed commands in flight, {ROUNDS} rounds each")
    print(f"meowbot: sim:{FLEET}, {kinds(work)}")
    print(f"meowbot+sweep: sim:{SWEEP_FLEET}, {kinds(sweep_work)}, a fleet sweep each round")
    stats: dict[str, tuple[float, float]] = {}
    for s in servers:
        ms = [x * 1000 for x in s.latencies]
        stats[s.name] = (pct(ms, 0.5), pct(ms, 0.99))
        line = f"{s.name:14} ack p50 {stats[s.name][0]:7.1f} ms  p99 {stats[s.name][1]:7.1f} ms"
        if s.kind in ("bot", "sweep"):
            line += f"  answers delivered {s.delivered} of {s.due}"
        print(line)
        print(f"{'':14} p99 of each round: {', '.join(f'{x:.0f}' for x in s.round_p99)} ms")
    sweep = by["meowbot+sweep"]
    if sweep.sweeps:
        took = sorted(sweep.sweeps)
        print(
            f"sweeps of {SWEEP_FLEET:,} nodes: {len(took)}, {took[len(took) // 2]:.1f} s median; "
            f"under way at the burst's start in {sweep.overlapped} of {ROUNDS} rounds"
        )
    bolt99, bare99 = stats["bolt"][1], stats["aiohttp"][1]
    b50 = stats["bolt"][0] / stats["aiohttp"][0]
    print(f"ratio bolt/aiohttp      p50 {b50:.2f}  p99 {bolt99 / bare99:.2f}")
    ok = True
    for name in ("meowbot", "meowbot+sweep"):
        r50, r99 = stats[name][0] / stats["bolt"][0], stats[name][1] / bolt99
        ok = ok and r99 <= TARGET_RATIO and by[name].delivered == by[name].due
        print(f"ratio {name}/bolt {'':{13 - len(name)}} p50 {r50:.2f}  p99 {r99:.2f}")
    verdict = "met" if ok else "MISSED"
    print(f"target: ack p99 <= {TARGET_RATIO}x bare Bolt's, every answer delivered: {verdict}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        kind, port = sys.argv[2], int(sys.argv[3])
        if kind == "aiohttp":
            asyncio.run(serve_aiohttp(port))
        elif kind == "bolt":
            asyncio.run(serve_bolt(port))
        elif kind == "emulator":
            asyncio.run(serve_emulator(port))
        else:
            with asyncio.Runner(loop_factory=loop_first) as runner:  # as `meowbot run` serves
                runner.run(serve_bot(port, sweep=kind == "sweep"))
    else:
        asyncio.run(main())
