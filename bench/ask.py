"""Questions in plain words, timed: run by hand, never a timed test.

    .venv/bin/python bench/ask.py [--fleet 512] [--rounds 1] [--redis URL]

Every question of the corpus (tests/data/ask_corpus.yaml) is sent as a signed app_mention
event into the real bot (its aiohttp server, the simulated fleet of --fleet nodes, the Slack
emulator; Redis when --redis or REDIS_URL names one, else the in-memory store), one at a time;
a follow-up is sent after its first question, in the same thread, and only it is timed.
Printed: the time from the mention to the first answer in its thread, p50 and p95 and the
slowest, overall and per kind of answer (target: p95 < 3 s without the model, which is not
configured here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slack_sdk.signature import SignatureVerifier

from bot.app import create_bot
from bot.config import load_settings
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "ask_corpus.yaml"
CHANNEL = "C0GENERAL"
SECRET = "bench-ask-secret"
ANSWER_TIMEOUT_S = 60.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Asking:
    def __init__(self, emu: SlackEmulator, url: str, http: aiohttp.ClientSession) -> None:
        self.emu, self.url, self.http = emu, url, http

    async def mention(self, text: str, thread: str | None = None) -> tuple[str, float]:
        """Sends the mention; returns its thread and the seconds to the first answer in it."""
        payload = self.emu.mention(CHANNEL, "U0USER", text, thread=thread)
        ts = payload["event"]["ts"]
        body = json.dumps(payload)
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
                timestamp=stamp, body=body
            ),
        }
        root = thread or ts
        seen = len(self.emu.calls)
        started = time.monotonic()
        async with self.http.post(self.url, data=body.encode(), headers=headers) as resp:
            assert resp.status == 200, await resp.text()
        while time.monotonic() - started < ANSWER_TIMEOUT_S:
            for call in self.emu.calls[seen:]:
                if call.method == "chat.postMessage" and call.args.get("thread_ts") == root:
                    return root, call.at - started
            await asyncio.sleep(0.002)
        raise TimeoutError(f"no answer to {text!r} within {ANSWER_TIMEOUT_S:g} s")

    async def settle(self) -> None:
        """Waits for the answer's other posts (overflow, detail, charts) before the next."""
        last = -1
        while len(self.emu.calls) != last:
            last = len(self.emu.calls)
            await asyncio.sleep(0.2)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL"))
    args = parser.parse_args()
    corpus: list[dict[str, Any]] = yaml.safe_load(CORPUS.read_text())
    emu = SlackEmulator()
    await emu.start()
    settings = load_settings(
        SLACK_BOT_TOKEN=emu.bot_token,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=emu.api_url,
        REDIS_URL=args.redis,
        MEOWBOT_FLEET=f"sim:{args.fleet}",
        PROMETHEUS_URL=None,
        SLURM_REST_URL=None,
        MEOWBOT_ASK_MODEL_URL=None,
    )
    bot = await create_bot(settings)
    port = await bot.start_http("127.0.0.1", 0)
    times: list[float] = []
    by_kind: dict[str, list[float]] = defaultdict(list)
    slowest: list[tuple[float, str]] = []
    try:
        async with aiohttp.ClientSession() as http:
            asking = Asking(emu, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
            await asking.mention("hello")  # the first request warms the inventory and caches
            await asking.settle()
            for _ in range(args.rounds):
                for entry in corpus:
                    thread = None
                    if "after" in entry:
                        thread, _ = await asking.mention(entry["after"])
                        await asking.settle()
                    _, took = await asking.mention(entry["q"], thread)
                    times.append(took)
                    kind = entry["route"].split()[0]
                    by_kind[kind].append(took)
                    slowest.append((took, entry["q"]))
                    await asking.settle()
    finally:
        await bot.close()
        await emu.stop()
    print(f"{len(times)} questions on a simulated fleet of {args.fleet} nodes, without a model")
    print(
        f"mention -> first answer in the thread: p50 {statistics.median(times) * 1000:.0f} ms, "
        f"p95 {pct(times, 0.95) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )
    for kind, values in sorted(by_kind.items()):
        print(
            f"  {kind:14} n={len(values):3}  p50 {statistics.median(values) * 1000:6.0f} ms  "
            f"p95 {pct(values, 0.95) * 1000:6.0f} ms"
        )
    print("slowest:")
    for took, q in sorted(slowest, reverse=True)[:5]:
        print(f"  {took * 1000:6.0f} ms  {q}")


if __name__ == "__main__":
    asyncio.run(main())
