"""Ack latency under load (issue #2): not a timed test, run by hand (`make bench`).

200 signed slash commands in flight at once against the real aiohttp server and AsyncApp,
each listener's backend taking 2 s after its ack, beside a bare aiohttp handler that answers
200 on the same machine. Prints p50/p99 of both and their ratio. Needs REDIS_URL
(`make bench` starts redis-server).
"""

from __future__ import annotations

import asyncio
import os
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

from bot.app import SLACK_EVENTS_PATH, create_bot
from bot.config import load_settings
from bot.shell.slack_emulator import SlackEmulator
from handlers.registry import Registry

N = 200
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

        # Warm up connections and Bolt's first auth.test before measuring.
        await asyncio.gather(*(one(b) for b in bodies[:10]))
        return await asyncio.gather(*(one(b) for b in bodies))


async def bare_server() -> tuple[web.AppRunner, str]:
    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/slack/events", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/slack/events"


async def main() -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        sys.exit("bench/ack.py needs REDIS_URL: run it with `make bench`")
    emu = SlackEmulator()
    await emu.start()
    bot = await create_bot(
        load_settings(
            SLACK_BOT_TOKEN=emu.bot_token,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=emu.api_url,
            REDIS_URL=redis_url,
        )
    )

    async def slow_backend(ack: Any, respond: Any) -> None:
        await ack()
        await asyncio.sleep(BACKEND_S)  # the backend call, after the ack
        await respond(text="done")

    # Registered as every listener in handlers/ is, on the same AsyncApp.
    Registry(bot.app, bot.deps.inflight).command("/bench-slow", slow_backend)
    port = await bot.start_http("127.0.0.1", 0)
    bodies = [
        urllib.parse.urlencode(emu.slash_command_payload("/bench-slow", f"n{i}"))
        for i in range(N + 10)
    ]
    bot_lat = await fire(f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", bodies)
    runner, bare_url = await bare_server()
    bare_lat = await fire(bare_url, bodies)
    await bot.deps.inflight.wait_idle(BACKEND_S * 3)
    await runner.cleanup()
    await bot.close()
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
    print(f"answers delivered after the backend: {answered} of {N + 10}")
    ok = p99 < TARGET_P99_MS and p99 / b99 <= TARGET_RATIO
    verdict = "met" if ok else "MISSED"
    print(f"target: p99 < {TARGET_P99_MS:.0f} ms and ratio <= {TARGET_RATIO}: {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
