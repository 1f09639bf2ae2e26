"""An alert storm through the real Alertmanager: not a timed test, run by hand.

    .venv/bin/python bench/storm.py [--scenario correlated|one-cause] [--replicas 3]
                                    [--alerts 500] [--window 10]

`correlated` (the default): a correlated burst of 500 alerts on 500 nodes of the bot's simulated
fleet: 200 share one cause (`xid="79"`, critical, one rule: a bad driver push) and 300 are
spread over 60 unrelated rules, 5 nodes each. `one-cause`: 500 alerts of one rule on 500 nodes
under 16 leaf switches (each with its `leaf_switch` label), one event. Either way they are
posted to Alertmanager's `POST /api/v2/alerts` in batches spread over 10 s. Alertmanager
(Debian's prometheus-alertmanager, configured as scripts/testsvc/alertmanager.py does:
group_by [alertname], group_wait 1 s, group_interval 1 s, three webhook receivers with a bearer
token) delivers them to `POST /alertmanager` of the real bot (`create_bot`, `start_http`, the
notifier loop; the passive sweep off so that only the storm is posted), which shares a real
redis-server with its other replicas and posts to the project's Slack emulator. A webhook port
no replica takes (one replica of three) gets a receiver that answers 200: Alertmanager waits for
every receiver of a flush, so a dead one would delay the live ones by its retries. The bench
waits until every alert is stored, the notifier's queue is empty (or a storm summary is shown:
events it stands for stay queued) and Slack has been quiet for 3 s, then prints:

- messages posted (top-level) against the events (one per cause);
- Slack calls made (chat.*: posts, updates, thread replies) against one post per alert (500);
- time from the first alert to the last Slack call, against the floor that one call a second
  a channel sets for the calls made;
- alerts lost (target 0): sent alerts that are in no event shown in Slack, i.e. neither in a
  group whose message is in the final Slack state nor counted in a storm summary there;
- groups posted twice (target 0): an event posted as a new top-level message more than once;
- firing nodes named in the channel (target all): nodes the final messages name, top level and
  threads, reading their hostlists;
- the peak Slack call rate per channel (calls in any 1 s window as the emulator received
  them; target <= 1), and any two calls closer than 1 s.

`--storm-groups N` sets `alerts.storm_groups` (default 20: the correlated burst's 61 events are
a storm). Exits 0 after printing (`make bench` chains the benches); `--check` exits 1 when a
target is missed.

Services: with REDIS_URL, ALERTMANAGER_URL, MEOWBOT_TEST_AM_WEBHOOK_PORTS and
MEOWBOT_TEST_AM_TOKEN set (`make bench` runs it under scripts/testenv.py) it uses them;
otherwise it starts its own redis-server and Alertmanager with the same starters. The alert
state of the bot in that Redis (keys `meowbot:_:alerts:*`) is deleted first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import hostlist
import redis.asyncio as aioredis
from aiohttp import web

from bot.alerts.models import AlertGroup
from bot.app import create_bot
from bot.backends.alert_store import RedisAlertStore
from bot.backends.alertmanager import AlertmanagerClient
from bot.backends.state import key
from bot.config import load_settings
from bot.server import Bot
from bot.shell.emulator import Call, SlackEmulator

CHANNEL = "C0STORM"
SECRET = "bench-storm-secret"
QUIET_S = 3.0
TARGET_LOST = 0
TARGET_DUPLICATED = 0
TARGET_PEAK_PER_S = 1


@contextlib.contextmanager
def services() -> Iterator[dict[str, str]]:
    """The environment's Redis and Alertmanager, or our own started the same way."""
    names = (
        "REDIS_URL",
        "ALERTMANAGER_URL",
        "MEOWBOT_TEST_AM_WEBHOOK_PORTS",
        "MEOWBOT_TEST_AM_TOKEN",
    )
    if all(os.environ.get(n) for n in names):
        yield {n: os.environ[n] for n in names}
        return
    from testsvc import alertmanager, redis  # scripts/testsvc: the starters `make test` uses

    with (
        tempfile.TemporaryDirectory(prefix="meowbot-storm-") as tmp_s,
        contextlib.ExitStack() as st,
    ):
        env: dict[str, str] = {}
        for name, module in (("redis", redis), ("alertmanager", alertmanager)):
            (Path(tmp_s) / name).mkdir()
            env.update(st.enter_context(module.start(Path(tmp_s) / name, env)))
        yield env


async def sink(port: int) -> web.AppRunner:
    """A receiver that answers 200 and drops the post, on a webhook port no replica takes.

    Alertmanager waits for every receiver of a flush, retrying a refused connection until the
    flush times out, so a dead receiver would delay the next delivery to the live ones too.
    """

    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({})

    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/alertmanager", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def start_replicas(
    env: dict[str, str], emu: SlackEmulator, count: int, config: Path | None
) -> tuple[list[Bot], list[web.AppRunner]]:
    ports = [int(p) for p in env["MEOWBOT_TEST_AM_WEBHOOK_PORTS"].split(",")]
    if count > len(ports):
        sys.exit(f"Alertmanager is configured for {len(ports)} receivers, not {count}")
    sinks = [await sink(port) for port in ports[count:]]
    bots = []
    for port in ports[:count]:
        settings = load_settings(
            SLACK_BOT_TOKEN=emu.bot_token,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=emu.api_url,
            REDIS_URL=env["REDIS_URL"],
            ALERTMANAGER_URL=env["ALERTMANAGER_URL"],
            ALERTMANAGER_WEBHOOK_TOKEN=env["MEOWBOT_TEST_AM_TOKEN"],
            MEOWBOT_ALERT_CHANNEL=CHANNEL,
            MEOWBOT_FLEET="sim:512",
            MEOWBOT_ADMINS="",
            MEOWBOT_CONFIG=config,
            PROMETHEUS_URL=None,
            SLURM_REST_URL=None,
        )
        bot = await create_bot(settings)
        await bot.start_http("127.0.0.1", port)
        bot.start_background(sweep=False)
        bots.append(bot)
    return bots, sinks


def storm(bot: Bot, count: int, name: str, seed: int) -> tuple[list[dict[str, Any]], set[str]]:
    """One alert per node on the first `count` nodes (16 leaf switches for 500), shuffled: one
    rule's alerts, so one cause; and the causes they make."""
    inv = bot.deps.triage.inventory
    nodes = list(inv.names())[:count]
    starts = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    alerts = [
        {
            "labels": {
                "alertname": name,
                "Hostname": n,
                "leaf_switch": inv.leaf_switch(n) or "",
                "severity": "warning",
            },
            "annotations": {"summary": f"InfiniBand port down on {n}"},
            "startsAt": starts,
        }
        for n in nodes
    ]
    random.Random(seed).shuffle(alerts)
    return alerts, {name}


def correlated(bot: Bot, count: int, name: str, seed: int) -> tuple[list[dict[str, Any]], set[str]]:
    """A correlated burst: 2/5 of `count` alerts (200 of 500) share one cause, an Xid 79 on as
    many nodes (a bad driver push), and the other 3/5 (300) are spread over `count // 8.33`
    unrelated rules (60), 5 nodes each; shuffled. Every alert is on a node of its own."""
    inv = bot.deps.triage.inventory
    nodes = list(inv.names())[:count]
    big = count * 2 // 5
    rules = max(1, round((count - big) / 5))
    starts = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    alerts = [
        {
            "labels": {
                "alertname": f"{name}FellOffBus",
                "Hostname": n,
                "xid": "79",
                "gpu": str(i % 8),
                "severity": "critical",
            },
            "annotations": {"summary": f"GPU has fallen off the bus on {n}"},
            "startsAt": starts,
        }
        for i, n in enumerate(nodes[:big])
    ]
    causes = {"xid_79"}
    for i, n in enumerate(nodes[big:]):
        rule = f"{name}Rule{i % rules:02d}"
        causes.add(rule)
        alerts.append(
            {
                "labels": {"alertname": rule, "Hostname": n, "severity": "warning"},
                "annotations": {"summary": f"{rule} on {n}"},
                "startsAt": starts,
            }
        )
    random.Random(seed).shuffle(alerts)
    return alerts, causes


SCENARIOS = {"one-cause": storm, "correlated": correlated}


def named_nodes(messages: list[dict[str, Any]]) -> set[str]:
    """Every node the channel's messages name in code spans, hostlists expanded."""
    out: set[str] = set()
    for span in re.findall(r"`([^`]+)`", json.dumps([m.get("blocks", []) for m in messages])):
        with contextlib.suppress(hostlist.BadHostlist):
            out.update(n for n in hostlist.expand_hostlist(span) if n.startswith("gpu-"))
    return out


def peak_per_window(times: list[float], window_s: float = 1.0) -> int:
    """The most calls inside any half-open window of `window_s`."""
    ordered = sorted(times)
    best = start = 0
    for end, t in enumerate(ordered):
        while t - ordered[start] >= window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


def top_level(emu: SlackEmulator) -> list[dict[str, Any]]:
    return [m for m in emu.messages(CHANNEL) if m.get("thread_ts", m["ts"]) == m["ts"]]


async def stored_groups(store: RedisAlertStore) -> dict[str, AlertGroup]:
    """Every group in the store, open or shown resolved."""
    prefix = key("", "alerts", "group", "")
    ids = {str(k)[len(prefix) :] async for k in store.redis.scan_iter(prefix + "*")}
    return await store.groups(sorted(ids))


@dataclass
class Outcome:
    scenario: str
    causes: set[str]
    sent: set[str]  # nodes alerted, one alert each
    sent_s: float
    t0: float
    calls: list[Call]  # chat.* calls to Slack
    top_level: list[dict[str, Any]]  # the channel's final top-level messages
    groups: dict[str, AlertGroup]
    storm_ts: str | None
    all_stored_s: float | None
    webhooks: list[int]  # webhook posts stored, per replica
    named: set[str]  # nodes the channel's final messages name (top level and threads)

    def posts(self) -> list[Call]:
        posted = (c for c in self.calls if c.method == "chat.postMessage" and c.ok)
        return [c for c in posted if "thread_ts" not in c.args]

    def lost(self) -> int:
        """Sent alerts in no group shown in Slack (its own message, or a storm summary)."""
        shown = {m["ts"] for m in self.top_level}
        in_storm = self.storm_ts is not None and self.storm_ts in shown
        accounted = {
            a.node
            for g in self.groups.values()
            if (g.ts is not None and g.ts in shown) or (in_storm and not g.resolved)
            for a in g.alerts
        }
        return len(self.sent - accounted)

    def duplicated(self) -> int:
        """Groups posted as a new top-level message more than once: a header names its cause
        (and its scope) before " on "."""
        per_group: Counter[str] = Counter()
        for c in self.posts():
            blocks = c.args.get("blocks") or []
            if isinstance(blocks, str):
                blocks = json.loads(blocks)
            head = blocks[0].get("text", {}).get("text", "") if blocks else ""
            if " on " in head and "Alert storm" not in head:
                per_group[head.split(" on ")[0]] += 1
        return sum(n - 1 for n in per_group.values())

    def peak(self) -> int:
        by_channel: dict[str, list[float]] = {}
        for c in self.calls:
            by_channel.setdefault(str(c.args.get("channel", "")), []).append(c.at)
        return max((peak_per_window(t) for t in by_channel.values()), default=0)


async def run(
    scenario: str,
    replicas: int,
    count: int,
    window_s: float,
    timeout_s: float,
    seed: int,
    storm_groups: int,
) -> Outcome:
    with services() as env, tempfile.TemporaryDirectory(prefix="meowbot-storm-cfg-") as cfg_dir:
        config = None
        if storm_groups:
            config = Path(cfg_dir) / "meowbot.yaml"
            config.write_text(f"alerts:\n  storm_groups: {storm_groups}\n")
        client = aioredis.Redis.from_url(env["REDIS_URL"], decode_responses=True)
        stale = [k async for k in client.scan_iter(key("", "alerts", "*"))]
        if stale:
            await client.delete(*stale)
        await client.aclose()
        emu = SlackEmulator()
        await emu.start()
        emu.add_channel(CHANNEL, "gpu-alerts")
        bots, sinks = await start_replicas(env, emu, replicas, config)
        am = AlertmanagerClient(env["ALERTMANAGER_URL"])
        name = f"Storm{int(time.time())}"  # apart from earlier runs' alerts
        alerts, causes = SCENARIOS[scenario](bots[0], count, name, seed)
        sent = {a["labels"]["Hostname"] for a in alerts}
        store = bots[0].deps.alerting.store if bots[0].deps.alerting else None
        assert isinstance(store, RedisAlertStore)
        try:
            batches = 50
            size = -(-len(alerts) // batches)
            t0 = time.monotonic()
            for i in range(batches):
                chunk = alerts[i * size : (i + 1) * size]
                if chunk:
                    await am.post_alerts(chunk)
                await asyncio.sleep(max(0.0, t0 + (i + 1) * window_s / batches - time.monotonic()))
            sent_s = time.monotonic() - t0
            all_stored_s: float | None = None
            while True:
                groups = await stored_groups(store)
                have = {a.node for g in groups.values() if g.key.cause in causes for a in g.firing}
                if all_stored_s is None and have >= sent:
                    all_stored_s = time.monotonic() - t0
                quiet = time.monotonic() - max((c.at for c in emu.calls), default=t0) > QUIET_S
                # In a storm, groups not posted on their own stay queued until it passes.
                settled = not await store.dirty() or await store.storm_ts(CHANNEL) is not None
                if all_stored_s is not None and quiet and settled:
                    break
                if time.monotonic() > t0 + timeout_s:
                    print(f"timed out after {timeout_s:.0f} s: {len(have)} of {len(sent)} stored")
                    break
                await asyncio.sleep(0.2)
            groups = {
                g: v for g, v in (await stored_groups(store)).items() if v.key.cause in causes
            }
            storm_ts = await store.storm_ts(CHANNEL)
            webhooks = [
                int(
                    b.deps.telemetry.registry.get_sample_value(
                        "meowbot_alertmanager_webhooks_total", {"outcome": "stored"}
                    )
                    or 0
                )
                for b in bots
            ]
        finally:
            await am.close()
            for bot in bots:
                await bot.close()
            for runner in sinks:
                await runner.cleanup()
            named = named_nodes(emu.messages(CHANNEL))
            await emu.stop()
    calls = [c for c in emu.calls if c.method.startswith("chat.")]
    return Outcome(
        scenario,
        causes,
        sent,
        sent_s,
        t0,
        calls,
        top_level(emu),
        groups,
        storm_ts,
        all_stored_s,
        webhooks,
        named,
    )


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(o: Outcome, replicas: int, window_s: float) -> bool:
    posts = o.posts()
    updates = [c for c in o.calls if c.method == "chat.update"]
    replies = [c for c in o.calls if c.method == "chat.postMessage" and "thread_ts" in c.args]
    refused = [c for c in o.calls if not c.ok]
    took = max((c.at for c in o.calls), default=o.t0) - o.t0
    floor = max(window_s, len(o.calls) - 1.0)
    count = len(o.sent)
    lost, dup, peak = o.lost(), o.duplicated(), o.peak()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    leaves = len(o.groups)  # the storm's events: one a cause
    print(
        f"alert storm ({o.scenario}): {count} alerts on {count} nodes, {len(o.causes)} "
        f"cause(s), posted to Alertmanager over {o.sent_s:.1f} s; {replicas} replica(s), "
        f"one Redis, one channel"
    )
    print(f"  cores {os.cpu_count()}, load average after the run {load}")
    print(f"  groups stored {len(o.groups)}; webhook posts stored per replica {o.webhooks}")
    if o.all_stored_s is not None:
        print(f"  every alert stored {o.all_stored_s:.1f} s after the first was sent")
    summary = " (the storm summary among them)" if o.storm_ts else ""
    print(
        f"  messages posted      {len(posts):4d}  one per event: {leaves}, "
        f"ratio {len(posts) / max(1, leaves):.2f}{summary}"
    )
    print(
        f"  Slack calls made     {len(o.calls):4d}  ({len(posts)} posts, {len(updates)} updates, "
        f"{len(replies)} thread replies, {len(refused)} refused); one post an alert: {count}, "
        f"ratio {len(o.calls) / count:.3f}"
    )
    print(
        f"  first alert to last Slack update  {took:.1f} s  floor at one call a second for "
        f"{len(o.calls)} calls: {floor:.0f} s, ratio {took / floor:.2f}"
    )
    print(f"  alerts lost          {lost:4d}  target {TARGET_LOST}: {verdict(lost == 0)}")
    print(f"  groups posted twice  {dup:4d}  target {TARGET_DUPLICATED}: {verdict(dup == 0)}")
    unnamed = len(o.sent - o.named)
    print(
        f"  firing nodes named in the channel  {len(o.sent & o.named)} of {count}: "
        f"{verdict(unnamed == 0)}"
    )
    ok_peak = peak <= TARGET_PEAK_PER_S
    print(
        f"  peak Slack calls in 1 s per channel  {peak}  target <= {TARGET_PEAK_PER_S}, "
        f"ratio {peak / TARGET_PEAK_PER_S:.2f}: {verdict(ok_peak)}"
    )
    gaps = sorted(b.at - a.at for a, b in itertools.pairwise(o.calls))
    if gaps:
        print(
            f"  gap between Slack calls: min {gaps[0]:.3f} s, median {gaps[len(gaps) // 2]:.3f} s"
        )
    for a, b in itertools.pairwise(o.calls):
        if b.at - a.at < 1.0 and a.args.get("channel") == b.args.get("channel"):
            print(
                f"  calls {b.at - a.at:.3f} s apart: {a.method} at {a.at - o.t0:.3f} s, "
                f"{b.method} at {b.at - o.t0:.3f} s"
            )
    return lost == TARGET_LOST and dup == TARGET_DUPLICATED and ok_peak and unnamed == 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="correlated")
    parser.add_argument("--replicas", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument("--alerts", type=int, default=500)
    parser.add_argument("--window", type=float, default=10.0, help="seconds the alerts arrive in")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--storm-groups",
        type=int,
        default=0,
        help="alerts.storm_groups (default: the bot's, 20)",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    outcome = asyncio.run(
        run(
            args.scenario,
            args.replicas,
            args.alerts,
            args.window,
            args.timeout,
            args.seed,
            args.storm_groups,
        )
    )
    met = report(outcome, args.replicas, args.window)
    sys.exit(1 if args.check and not met else 0)
