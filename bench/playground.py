"""/playground under load: run by hand, never a timed test.

    .venv/bin/python bench/playground.py [--requests 20] [--checkpoints 4] [--max-tokens 64]

20 playground requests at once, each over 4 checkpoints of the tiny run, streamed from a real
`transformers serve` into the real bot (signed view submissions into its aiohttp server, real
Redis, the Slack emulator). Then the very same 80 streams (same prompts, temperature 0, same
seeds) are read directly with a bare SSE reader at the same concurrency, as the ceiling.

Printed: time to first token and to the last (per stream, from the bot's own figures shown in
each section, and from the submission to the first and last edit Slack saw), the peak
`chat.update` rate per message (target: never more than 1 a second), and the bot's overhead
per streamed token: (the bot's mean stream time - the direct mean) / mean tokens (target
< 5 ms a token). Services come from the environment (`scripts/testenv.py -- ...`) or are
started here with the test environment's own starters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from bot.app import create_bot
from bot.backends.openai_compat import request_body
from bot.config import load_settings
from bot.playground.config import Endpoint
from bot.playground.models import Mode, Prompt
from bot.playground.sse import SseDecoder, parse_chunk
from bot.render.playground import MODAL_CALLBACK, RERUN_ACTION, RUN_PICK_ACTION
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from tests.e2e.conftest import SIGNING_SECRET, Slack

CHANNEL = "C0GENERAL"
TARGET_OVERHEAD_MS = 5.0
TARGET_PEAK = 1
STATS = re.compile(r"(\d+) tokens · ([\d.]+) s · first token (\d+) ms")
PROMPTS = [
    "Beautiful is better than",
    "Explicit is better than",
    "Simple is better than",
    "Complex is better than",
    "Flat is better than",
    "Sparse is better than",
    "Readability counts",
    "Special cases aren't special enough",
    "Errors should never",
    "In the face of ambiguity",
]


@contextlib.contextmanager
def services() -> Iterator[dict[str, str]]:
    names = ("REDIS_URL", "PLAYGROUND_TEST_URL", "PLAYGROUND_TEST_DIR", "PLAYGROUND_TEST_RUN")
    if all(os.environ.get(n) for n in names):
        yield {n: os.environ[n] for n in names}
        return
    from testsvc import checkpoints, redis  # the starters `make test` uses

    with tempfile.TemporaryDirectory(prefix="meowbot-pg-") as tmp_s, contextlib.ExitStack() as st:
        env: dict[str, str] = {}
        for name, module in (("redis", redis), ("checkpoints", checkpoints)):
            (Path(tmp_s) / name).mkdir()
            env.update(st.enter_context(module.start(Path(tmp_s) / name, env)))
        yield env


def peak_per_second(times: list[float]) -> int:
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def direct(url: str, prompts: list[tuple[str, Prompt]]) -> list[tuple[float, float, int]]:
    """(first token s, total s, tokens) for each stream read straight from the server."""
    endpoint = Endpoint(url=url)

    async def one(http: aiohttp.ClientSession, model: str, p: Prompt) -> tuple[float, float, int]:
        path, body = request_body(p, model)
        start = time.monotonic()
        first = None
        tokens = 0
        async with http.post(f"{endpoint.url}{path}", json=body) as resp:
            decoder = SseDecoder()
            async for chunk in resp.content.iter_any():
                for data in decoder.feed(chunk):
                    d = parse_chunk(data)
                    if d is not None and d.text:
                        first = first if first is not None else time.monotonic() - start
                        tokens += 1
        return first or 0.0, time.monotonic() - start, tokens

    async with aiohttp.ClientSession() as http:
        return await asyncio.gather(*(one(http, m, p) for m, p in prompts))


async def bench(env: dict[str, str], n: int, k: int, max_tokens: int) -> None:
    run, root = env["PLAYGROUND_TEST_RUN"], Path(env["PLAYGROUND_TEST_DIR"])
    steps = sorted(int(p.name.split("-")[1]) for p in (root / run).glob("step-*"))[-k:]
    emulator = SlackEmulator()
    await emulator.start()
    users = [f"UBENCH{i:03d}" for i in range(n)]
    for u in users:
        emulator.add_user(u, u.lower())
    cfg = Path(tempfile.mkdtemp()) / "meowbot.yaml"
    cfg.write_text(
        json.dumps(
            {
                "playground": {
                    "global_concurrency": n,
                    "per_user_concurrency": 2,
                    "max_checkpoints": 4,
                }
            }
        )
    )
    settings = load_settings(
        SLACK_BOT_TOKEN=emulator.bot_token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=emulator.api_url,
        REDIS_URL=env["REDIS_URL"],
        PLAYGROUND_ENDPOINTS=env["PLAYGROUND_TEST_URL"],
        PLAYGROUND_CHECKPOINT_DIRS=str(root),
        MEOWBOT_CONFIG=str(cfg),
        PROMETHEUS_URL=None,
        SLURM_REST_URL=None,
    )
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(n)]
    same = [
        (
            str(root / run / f"step-{s}"),
            Prompt(
                run=run,
                prompt=t,
                mode=Mode.COMPLETION,
                max_tokens=max_tokens,
                temperature=0,
                seed=1,
            ),
        )
        for t in prompts
        for s in steps
    ]
    # Every checkpoint loaded first: a cold load (seconds) must not land on one side only.
    await direct(env["PLAYGROUND_TEST_URL"], [same[i] for i in range(len(steps))])
    cpu0 = time.process_time()
    ceiling = await direct(env["PLAYGROUND_TEST_URL"], same)
    direct_cpu = time.process_time() - cpu0
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    cpu0 = time.process_time()
    async with aiohttp.ClientSession() as http:
        slack = Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)

        def submission(user: str, text: str) -> dict[str, Any]:
            values = {
                "run": {RUN_PICK_ACTION: {"selected_option": {"value": run}}},
                f"steps:{run}": {"steps": {"selected_options": [{"value": str(s)} for s in steps]}},
                "prompt": {"prompt": {"value": text}},
                "mode": {"mode": {"selected_option": {"value": "completion"}}},
                "max_tokens": {"max_tokens": {"value": str(max_tokens)}},
                "temperature": {"temperature": {"value": "0"}},
                "seed": {"seed": {"value": "1"}},
            }
            return {
                "type": "view_submission",
                "user": {"id": user, "username": user},
                "team": {"id": emulator.team_id},
                "api_app_id": "A0TEST",
                "view": {
                    "type": "modal",
                    "callback_id": MODAL_CALLBACK,
                    "id": "V0",
                    "private_metadata": json.dumps({"channel": CHANNEL}),
                    "state": {"values": values},
                },
            }

        sent = time.monotonic()
        await asyncio.gather(
            *(slack.interactive(submission(u, t)) for u, t in zip(users, prompts, strict=True))
        )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            tops = [m for m in emulator.messages(CHANNEL) if "thread_ts" not in m]
            if len(tops) == n and all(RERUN_ACTION in json.dumps(m["blocks"]) for m in tops):
                break
            await asyncio.sleep(0.2)
        else:
            raise SystemExit("the playground requests did not all finish")
        done = time.monotonic()
    bot_cpu = time.process_time() - cpu0
    await bot.close()
    ceiling += await direct(env["PLAYGROUND_TEST_URL"], same)  # and once after, for drift
    updates: dict[str, list[float]] = defaultdict(list)
    for c in emulator.calls_to("chat.update"):
        updates[str(c.args["ts"])].append(c.at)
    posts = [c.at for c in emulator.calls_to("chat.postMessage")]
    stats = [
        tuple(map(float, m))
        for msg in tops
        for m in STATS.findall(json.dumps(msg["blocks"], ensure_ascii=False))
    ]
    await emulator.stop()

    print(
        f"/playground: {n} requests at once x {len(steps)} checkpoints (steps {steps}), "
        f"{max_tokens} tokens max, temperature 0; transformers serve on loopback"
    )
    print(f"  cores {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bot_tokens = [s[0] for s in stats]
    bot_total = [s[1] for s in stats]
    bot_first = [s[2] / 1000 for s in stats]
    print(f"  streams finished       {len(stats)} of {n * len(steps)}")
    print(
        f"  first token (bot)      p50 {statistics.median(bot_first) * 1000:.0f} ms, "
        f"p95 {pct(bot_first, 0.95) * 1000:.0f} ms"
    )
    print(
        f"  last token (bot)       p50 {statistics.median(bot_total):.2f} s, "
        f"p95 {pct(bot_total, 0.95):.2f} s"
    )
    first_edit = [min(ts) - sent for ts in updates.values()]
    print(
        f"  Slack: submissions to first message {min(posts) - sent:.2f} s, to first edit "
        f"p50 {statistics.median(first_edit):.2f} s, to the last edit {done - sent:.2f} s"
    )
    peak = max(peak_per_second(ts) for ts in updates.values())
    per_msg = [len(ts) for ts in updates.values()]
    verdict = "met" if peak <= TARGET_PEAK else "MISSED"
    print(
        f"  chat.update per message: {min(per_msg)}-{max(per_msg)} edits; peak in any 1 s "
        f"{peak} (target <= {TARGET_PEAK}, ratio {peak / TARGET_PEAK:.2f}: {verdict})"
    )

    # The ceiling: the same streams, at the same concurrency, read directly (before and after).
    d_first = [c[0] for c in ceiling]
    d_total = [c[1] for c in ceiling]
    d_tokens = [c[2] for c in ceiling]
    print(
        f"  direct: first token p50 {statistics.median(d_first) * 1000:.0f} ms, last token "
        f"p50 {statistics.median(d_total):.2f} s, {statistics.mean(d_tokens):.1f} chunks a stream"
    )
    overhead_ms = (
        (statistics.mean(bot_total) - statistics.mean(d_total))
        / max(1.0, statistics.mean(bot_tokens))
        * 1000
    )
    verdict = "met" if overhead_ms < TARGET_OVERHEAD_MS else "MISSED"
    print(
        f"  bot overhead per streamed token, wall: {overhead_ms:.2f} ms (target < "
        f"{TARGET_OVERHEAD_MS:g} ms, ratio {overhead_ms / TARGET_OVERHEAD_MS:.2f}: {verdict})"
    )
    # The same in this process's CPU time (bot, emulator and reader share it): what the bot
    # spends per token, whatever the server's queueing does to the wall clock.
    chunks = max(1, int(sum(bot_tokens)))
    cpu_ms = (bot_cpu - direct_cpu) / chunks * 1000
    print(
        f"  bot overhead per streamed token, CPU: {cpu_ms:.2f} ms ({bot_cpu:.2f} s through "
        f"the bot, emulator included, against {direct_cpu:.2f} s read directly, "
        f"{chunks} tokens; ratio {cpu_ms / TARGET_OVERHEAD_MS:.2f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    with services() as env:
        asyncio.run(bench(env, args.requests, args.checkpoints, args.max_tokens))


if __name__ == "__main__":
    main()
