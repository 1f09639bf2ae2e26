"""Ack latency under load: not a timed test, run by hand (`make bench`).

200 signed `/node-health` commands in flight at once against the real aiohttp server and
AsyncApp, the metrics backend taking 2 s after each ack, beside a bare aiohttp handler that answers
200 on the same machine. Each server runs in a process of its own, as it would with Slack on
the other side of the network; this process only sends. Prints p50/p99 of both and their
ratio. Needs REDIS_URL (`make bench` starts redis-server).
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import create_bot
from bot.config import load_settings
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator

N = 200
WARMUP = 20
BACKEND_S = 2.0
SECRET = "bench-secret"
TARGET_P99_MS = 100.0
TARGET_RATIO = 3.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def fire(url: str, bodies: list[str]) -> list[float]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        verifier = SignatureVerifier(SECRET)

        async def one(body: str) -> float:
            ts = str(int(time.time()))
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": verifier.generate_signature(timestamp=ts, body=body),
            }
            started = time.perf_counter()
            async with http.post(url, data=body, headers=headers) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
            return time.perf_counter() - started

        # Warm up (Bolt's first auth.test, imports, the connection pool) before measuring.
        await asyncio.gather(*(one(b) for b in bodies[:WARMUP]))
        return await asyncio.gather(*(one(b) for b in bodies[WARMUP:]))


async def serve_bare(port: int) -> None:
    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/slack/events", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()  # the bot's backlog
    await asyncio.Event().wait()


class SlowMetrics:
    """The metrics backend of the real /node-health path, taking BACKEND_S to answer."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(BACKEND_S)
        return await self.inner.read(*args, **kwargs)


async def serve_bot(port: int) -> None:
    bot = await create_bot(load_settings())  # tokens and URLs from the environment
    # The real listener, service and renderer of /node-health; only the backend is slow.
    bot.deps.triage.metrics = SlowMetrics(bot.deps.triage.metrics)
    await bot.start_http("127.0.0.1", port)
    await asyncio.Event().wait()


async def measure(kind: str, env: dict[str, str], bodies: list[str]) -> list[float]:
    """Starts the server in its own process (Slack is not in the bot's process either)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", kind, str(port), env={**os.environ, **env}
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit(f"the {kind} server did not start")
                await asyncio.sleep(0.1)
        latencies = await fire(f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", bodies)
        await asyncio.sleep(BACKEND_S + 1)  # let the answers after the backend arrive
        return latencies
    finally:
        proc.terminate()
        await proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        sys.exit("bench/ack.py needs REDIS_URL: run it with `make bench`")
    emu = SlackEmulator()
    await emu.start()
    env = {
        "SLACK_BOT_TOKEN": emu.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emu.api_url,
        "REDIS_URL": redis_url,
        "MEOWBOT_FLEET": "sim:16",
        "MEOWBOT_LOG_LEVEL": "warning",
    }
    for var in ("PROMETHEUS_URL", "SLURM_REST_URL"):
        env[var] = ""
    bodies = [
        urllib.parse.urlencode(emu.slash_command_payload("/node-health", f"gpu-{i % 16 + 1:04d}"))
        for i in range(N + WARMUP)
    ]
    bot_lat = await measure("bot", env, bodies)
    bare_lat = await measure("bare", env, bodies)
    answered = len(emu.responses)
    await emu.stop()

    ms = [x * 1000 for x in bot_lat]
    bare_ms = [x * 1000 for x in bare_lat]
    p50, p99 = pct(ms, 0.5), pct(ms, 0.99)
    b50, b99 = pct(bare_ms, 0.5), pct(bare_ms, 0.99)
    print(f"cores: {os.cpu_count()}, {N} commands in flight, backend {BACKEND_S:.0f} s each")
    print(f"meowbot ack   p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  mean {statistics.mean(ms):.1f} ms")
    print(f"bare aiohttp  p50 {b50:7.1f} ms  p99 {b99:7.1f} ms")
    print(f"ratio (meowbot / bare)  p50 {p50 / b50:.2f}  p99 {p99 / b99:.2f}")
    print(f"answers delivered after the backend: {answered} of {N + WARMUP}")
    ok = p99 < TARGET_P99_MS and p99 / b99 <= TARGET_RATIO
    verdict = "met" if ok else "MISSED"
    print(f"target: p99 < {TARGET_P99_MS:.0f} ms and ratio <= {TARGET_RATIO}: {verdict}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        server = serve_bot if sys.argv[2] == "bot" else serve_bare
        asyncio.run(server(int(sys.argv[3])))
    else:
        asyncio.run(main())
