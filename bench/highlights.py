"""Highlights: reaction events a second through the real HTTP path, and the digest
and stats over a year of highlights. Not a timed test; run by hand (`make bench`).

1. Reaction events (added and removed, with a share of Slack's retries) signed and sent, 64 in
   flight, into the real aiohttp server and Bolt AsyncApp running in a process of its own:
   signature check, Bolt's dispatch and middleware, the listener middleware that records the
   reaction in real Redis (one Lua script: claim, reactor, count, index) before the 200, and
   after the ack the one read of each new message (reactions.get, chat.getPermalink) from the
   Slack emulator. Beside it, in alternating rounds (a load spike of this shared machine then
   hits both), the ceiling: a bare aiohttp handler in a process of its own that parses the
   same JSON and makes the same Redis write, without Bolt (and without checking signatures).
   Prints the median rates and their ratio, and checks after every round that Redis holds
   exactly the reactors the events say.
2. A year of 10,000 highlights in Redis: the digest of one week and the stats of all of it,
   each read from Redis, filtered for privacy, built and rendered; the stats chart apart.

Targets: >= 1,000 events/s on 2 cores (Slack sends at most 30,000 events an hour to a
workspace's app, about 8 a second), >= 0.5 of the bare ceiling, digest + stats < 1 s.
Needs REDIS_URL (`make bench` starts redis-server).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app import create_bot, highlights_parts
from bot.backends.highlight_store import RedisHighlightStore
from bot.config import load_settings
from bot.connect import make_web_client
from bot.highlights.config import HighlightsConfig
from bot.highlights.models import Reaction
from bot.highlights.rules import base_emoji
from bot.render.charts import highlights_chart
from bot.render.highlights import render_digest, render_stats
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from scripts.testsvc.common import free_port

EVENTS = 10_000  # a round; ROUNDS of each, alternating, so a load spike hits both
ROUNDS = 3
WARMUP = 500
IN_FLIGHT = 64
MESSAGES = 200
PEOPLE = 60
RETRY_SHARE = 0.05
YEAR_HIGHLIGHTS = 10_000
SECRET = "bench-secret"
TEAM = "T0TEST"
TARGET_RATE = 1000.0
TARGET_RATIO = 0.5
TARGET_BUILD_S = 1.0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min), {five:.2f} (5 min)"


# the servers ----------------------------------------------------------------------------------


async def serve_bare(port: int) -> None:
    """The ceiling: parse the event, make the same Redis write, answer 200. No Bolt."""
    redis = aioredis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True)
    store = RedisHighlightStore(redis)

    async def handler(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        event = body["event"]
        item = event["item"]
        r = Reaction(
            team=body["team_id"],
            channel=item["channel"],
            ts=item["ts"],
            user=event["user"],
            author=event.get("item_user"),
            emoji=base_emoji(event["reaction"]),
            event_ts=event["event_ts"],
            added=event["type"] == "reaction_added",
            event_id=body["event_id"],
        )
        await store.react(r, threshold=1, now=datetime.now(UTC))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post(SLACK_EVENTS_PATH, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
    await asyncio.Event().wait()


async def serve_bot(port: int) -> None:
    bot = await create_bot(load_settings())  # tokens and URLs from the environment
    await bot.start_http("127.0.0.1", port)
    await asyncio.Event().wait()


# the load -------------------------------------------------------------------------------------


def make_events(emu: SlackEmulator) -> tuple[list[str], dict[tuple[str, str], bool]]:
    """Bodies in sending order (retries included) and the last word of each (message, person)."""
    rng = random.Random(7)
    for u in range(PEOPLE):
        emu.add_user(f"U{u:05d}", f"person{u}")
    messages = [f"{1_764_000_000 + m}.000100" for m in range(MESSAGES)]
    for m, ts in enumerate(messages):
        emu.add_message("C0GENERAL", ts=ts, text=f"message {m} <@U00001>", user="U0ADMIN")
    bodies: list[str] = []
    last: dict[tuple[str, str], bool] = {}
    state: dict[tuple[str, str], bool] = {}
    for _ in range(EVENTS + WARMUP):
        if bodies and rng.random() < RETRY_SHARE:
            bodies.append(bodies[rng.randrange(len(bodies))])  # Slack delivering again
            continue
        ts, user = rng.choice(messages), f"U{rng.randrange(PEOPLE):05d}"
        on = state.get((ts, user), False)
        remove = on and rng.random() < 0.5
        emoji = "meow_party::skin-tone-2" if rng.random() < 0.1 else "meow_party"
        payload = emu.react(
            "C0GENERAL", ts, user, emoji if not remove else "meow_party", remove=remove
        )
        state[(ts, user)] = not remove
        last[(ts, user)] = not remove
        bodies.append(json.dumps(payload))
    return bodies, last


async def fire(url: str, bodies: list[str]) -> float:
    """Sends every body, IN_FLIGHT at a time; returns the events a second after the warm-up."""
    verifier = SignatureVerifier(SECRET)
    stamp = str(int(time.time()))
    signed = [(b, verifier.generate_signature(timestamp=stamp, body=b)) for b in bodies]
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def run(items: list[tuple[str, str]]) -> None:
            queue = iter(items)

            async def worker() -> None:
                for body, sig in queue:
                    headers = {
                        "Content-Type": "application/json",
                        "X-Slack-Request-Timestamp": stamp,
                        "X-Slack-Signature": sig,
                    }
                    async with http.post(url, data=body, headers=headers) as resp:
                        await resp.read()
                        assert resp.status == 200, (resp.status, await resp.text())

            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))

        await run(signed[:WARMUP])
        started = time.perf_counter()
        await run(signed[WARMUP:])
        return (len(signed) - WARMUP) / (time.perf_counter() - started)


async def measure(kind: str, env: dict[str, str], bodies: list[str]) -> float:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", kind, str(port), env={**os.environ, **env}
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit(f"the {kind} server did not start")
                await asyncio.sleep(0.1)
        return await fire(f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", bodies)
    finally:
        await asyncio.sleep(0.5)  # the reads after the ack finish
        proc.terminate()
        await proc.wait()


async def clear(redis: Any) -> None:
    keys = [k async for k in redis.scan_iter(f"meowbot:{TEAM}:*", count=1000)]
    for i in range(0, len(keys), 1000):
        await redis.delete(*keys[i : i + 1000])


async def check(store: RedisHighlightStore, last: dict[tuple[str, str], bool]) -> str:
    want: dict[str, set[str]] = {}
    for (ts, user), on in last.items():
        if on:
            want.setdefault(ts, set()).add(user)
    for ts, users in want.items():
        h = await store.get(TEAM, "C0GENERAL", ts)
        got = set(h.reactors) if h else set()
        if got != users:
            return f"WRONG: {ts} holds {sorted(got)}, the events say {sorted(users)}"
    return f"reactors in Redis match the events exactly ({len(want)} messages)"


# a year of highlights --------------------------------------------------------------------------


async def year(redis: Any, emu: SlackEmulator) -> tuple[list[float], float, int, int]:
    store = RedisHighlightStore(redis)
    rng = random.Random(11)
    channels = [f"C0Y{c:04d}" for c in range(40)]
    for c in channels:
        emu.add_channel(c, f"team-{c[-4:].lower()}")
    now = datetime(2026, 12, 4, 17, tzinfo=UTC)
    start = now - timedelta(days=365)
    for i in range(YEAR_HIGHLIGHTS):
        at = start + timedelta(seconds=rng.uniform(0, 365 * 86400))
        ts, channel = f"{int(at.timestamp())}.{i:06d}", rng.choice(channels)
        for u in rng.sample(range(PEOPLE), rng.randint(1, 6)):
            r = Reaction(
                team=TEAM,
                channel=channel,
                ts=ts,
                user=f"U{u:05d}",
                author=f"U{rng.randrange(PEOPLE):05d}",
                emoji="meow_party",
                event_ts="1",
                added=True,
            )
            await store.react(r, threshold=1, now=at, first_tagged_at=at)
        await store.enrich(
            TEAM,
            channel,
            ts,
            thread_ts=None,
            author=None,
            excerpt=f"highlight {i}: " + "words " * 20,
            permalink=f"https://x.slack.com/archives/{channel}/p{i}",
        )
    session = aiohttp.ClientSession()
    settings = load_settings(SLACK_BOT_TOKEN=emu.bot_token, SLACK_API_URL=emu.api_url)
    cfg = HighlightsConfig(channel_cache_s=3600)
    client = make_web_client(settings, session)
    hl = highlights_parts(store, client, cfg, clock=lambda: now).hl
    week = cfg.schedule.last_week(now)
    zone = cfg.schedule.zone

    async def once() -> int:
        digest, names = await hl.digest(TEAM, week, "C0DIGEST")
        render_digest(digest, names, emoji="meow_party", zone=zone)
        stats, snames = await hl.stats(TEAM, "C0DIGEST")
        render_stats(stats, snames, emoji="meow_party", zone=zone)
        return digest.total + stats.total * 0

    in_week = await once()  # warm: channel and people caches, as a running bot has them
    times = []
    for _ in range(5):
        started = time.perf_counter()
        await once()
        times.append(time.perf_counter() - started)
    stats, _ = await hl.stats(TEAM, "C0DIGEST")
    started = time.perf_counter()
    png = highlights_chart(stats.weeks, title="Highlights per week")
    chart_s = time.perf_counter() - started
    await session.close()
    return times, chart_s, in_week, len(png)


async def main() -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        sys.exit("bench/highlights.py needs REDIS_URL: run it with `make bench`")
    redis = aioredis.Redis.from_url(redis_url, decode_responses=True)
    emu = SlackEmulator()
    await emu.start()
    env = {
        "SLACK_BOT_TOKEN": emu.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emu.api_url,
        "REDIS_URL": redis_url,
        "MEOWBOT_FLEET": "sim:16",
        "MEOWBOT_LOG_LEVEL": "warning",
        "PROMETHEUS_URL": "",
        "SLURM_REST_URL": "",
        "MEOWBOT_DIGEST_CHANNEL": "",
    }
    bodies, last = make_events(emu)
    print(f"cores: {os.cpu_count()}; {load()}")
    print(
        f"{EVENTS:,} reaction events (+{WARMUP} warm-up), {IN_FLIGHT} in flight, {MESSAGES} "
        f"messages, {PEOPLE} people, {RETRY_SHARE:.0%} of them Slack's retries"
    )
    bot_rates: list[float] = []
    bare_rates: list[float] = []
    verdicts: set[str] = set()
    for _ in range(ROUNDS):
        for kind, rates in (("bot", bot_rates), ("bare", bare_rates)):
            await clear(redis)
            rates.append(await measure(kind, env, bodies))
            verdicts.add(f"{kind}: {await check(RedisHighlightStore(redis), last)}")
    await clear(redis)
    reads = len(emu.calls_to("reactions.get"))
    bot_rate, bare_rate = statistics.median(bot_rates), statistics.median(bare_rates)
    rounds = ", ".join(f"{b:.0f}/{c:.0f}" for b, c in zip(bot_rates, bare_rates, strict=True))
    print(f"meowbot (signed HTTP, Bolt, Redis)  median {bot_rate:6.0f} events/s")
    print(f"bare aiohttp + same Redis writes    median {bare_rate:6.0f} events/s")
    print(f"  rounds (meowbot/bare): {rounds}")
    for v in sorted(verdicts):
        print(f"  {v}")
    print(
        f"  messages read after the ack: {reads} (each of the {MESSAGES} once a round, and again "
        f"when all its reactions went and came back)"
    )
    ratio = bot_rate / bare_rate
    ok = bot_rate >= TARGET_RATE and ratio >= TARGET_RATIO
    print(
        f"ratio of the medians (meowbot / bare) {ratio:.2f}; target >= {TARGET_RATE:.0f} "
        f"events/s and >= {TARGET_RATIO}: {'met' if ok else 'MISSED'}"
    )
    print(f"after the events: {load()}")

    times, chart_s, in_week, png = await year(redis, emu)
    await clear(redis)
    med, best = statistics.median(times), min(times)
    verdict_build = "met" if med < TARGET_BUILD_S else "MISSED"
    print(
        f"a year of {YEAR_HIGHLIGHTS:,} highlights: digest of one week ({in_week} highlights) "
        f"+ stats of all, read from Redis, filtered, built, rendered: median {med * 1000:.0f} "
        f"ms, best {best * 1000:.0f} ms (target < {TARGET_BUILD_S:.0f} s: {verdict_build}, "
        f"ratio {med / TARGET_BUILD_S:.2f})"
    )
    print(f"stats chart (matplotlib PNG, {png / 1000:.0f} kB): {chart_s * 1000:.0f} ms")
    await emu.stop()
    await redis.aclose()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        server = serve_bot if sys.argv[2] == "bot" else serve_bare
        asyncio.run(server(int(sys.argv[3])))
    else:
        asyncio.run(main())
