"""Time the bot can trust: a machine booted seconds ago, and a wall clock set back.

`meowbot run` in a Linux time namespace (`unshare --time`, as root) has the clocks of a fresh
boot without a reboot: its monotonic clock reads a few seconds, so everything that keeps time
(the Slack user index, caches, rate windows, the loops) starts near zero, as on a machine just
booted; a drain there still tells the owners of the node's jobs by DM. A wall clock set back an
hour (NTP stepping a clock that ran fast) holds no alert: the notifier's one call a second a
channel is counted on the monotonic clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.workload import USERS
from bot.render.triage import DRAIN_ACTION
from bot.shell.emulator import SlackEmulator
from scripts.testsvc.common import free_port
from tests.conftest import IN_CI
from tests.e2e.test_alerts import StartReplica, am_alert, settle, start_replica, team, webhook
from tests.e2e.test_process import clean_env
from tests.e2e.test_triage_commands import press

AGE_S = 5  # how long ago the bot's machine seems to have booted
NODES = 64
SECRET = "fresh-boot-signing-secret"


def fresh_boot_prefix() -> list[str]:
    """`unshare` arguments that run a command with its clocks `AGE_S` seconds after boot;
    skipped (failed under CI) where time namespaces cannot be made."""
    shift = int(time.clock_gettime(time.CLOCK_MONOTONIC)) - AGE_S
    boot_shift = int(time.clock_gettime(time.CLOCK_BOOTTIME)) - AGE_S
    cmd = [
        "unshare",
        "--time",
        f"--monotonic=-{max(shift, 0)}",
        f"--boottime=-{max(boot_shift, 0)}",
        "--fork",
    ]
    try:
        probe = subprocess.run([*cmd, "true"], capture_output=True, timeout=10, check=False)
        why = probe.stderr.decode().strip()
        ok = probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as exc:
        why, ok = str(exc), False
    if not ok:
        msg = f"no time namespace here (root and Linux 5.6 or newer are needed): {why}"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return cmd


def monotonic_of(pid: int) -> float:
    """What time.monotonic() reads in process `pid`'s time namespace, now."""
    offsets = Path(f"/proc/{pid}/timens_offsets").read_text().split("\n")
    monotonic = next(line.split() for line in offsets if line.startswith("monotonic"))
    return time.monotonic() + int(monotonic[1]) + int(monotonic[2]) / 1e9


def child_of(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert children, "unshare started no child"
    return int(children[0])


def node_with_a_job_either_hour() -> str:
    """A node running a job in the simulated fleet the bot builds, whichever hour it starts
    in (its jobs are laid out from the hour)."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    fleets = [SimFleet(NODES, seed=0, now=hour + timedelta(hours=h)) for h in (0, 1)]
    names = fleets[0].topology.names
    return next(n for n in names if all(f.running_job(n) is not None for f in fleets))


@pytest.fixture
async def fresh_bot(emulator: SlackEmulator, redis_url: str, tmp_path: Path) -> AsyncIterator[str]:
    """`meowbot run` (HTTP) on the simulated fleet, its clocks `AGE_S` s after boot; yields
    its Slack events URL."""
    prefix = fresh_boot_prefix()
    port = free_port()
    env = {
        **clean_env(),
        "SLACK_BOT_TOKEN": emulator.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
        "PORT": str(port),
        "MEOWBOT_FLEET": f"sim:{NODES}",
        "MEOWBOT_ADMINS": "U0ADMIN",
    }
    log = (tmp_path / "meowbot.log").open("wb")  # a file: a pipe nobody reads would fill
    proc = await asyncio.create_subprocess_exec(
        *prefix,
        sys.executable,
        "-m",
        "bot",
        "run",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,  # unshare holds SIGTERM back: the group gets it
    )
    try:
        deadline = time.monotonic() + 60  # a bound for a loaded machine
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                assert proc.returncode is None, (tmp_path / "meowbot.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "the bot did not start"
                await asyncio.sleep(0.1)
        assert monotonic_of(child_of(proc.pid)) < AGE_S + 60, "the bot's clock is not fresh"
        yield f"http://127.0.0.1:{port}/slack/events"
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        log.close()


async def send(url: str, payload: dict[str, Any]) -> int:
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
            timestamp=stamp, body=body
        ),
    }
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
        return r.status


async def test_a_drain_seconds_after_boot_tells_the_jobs_owner(
    emulator: SlackEmulator, redis_client: Any, fresh_bot: str
) -> None:
    # Every cluster user of the simulated fleet is on Slack, found by their email.
    for i, user in enumerate(u for u in USERS if u != "bob"):
        emulator.add_user(f"U0FRESH{i}", user, email=f"{user}@example.org")
    node = node_with_a_job_either_hour()
    assert (
        await send(fresh_bot, press(emulator, DRAIN_ACTION, f"{node}|meowbot: xid79", "U0ADMIN"))
        == 200
    )
    await emulator.wait_for_responses(1, timeout=20)
    answer = emulator.responses[0][1]["text"]
    told = re.search(r"(\d+) job owners? (?:was|were) told by DM", answer)
    assert told and int(told.group(1)) >= 1 and "not found on Slack" not in answer, answer
    dms = [c for c in emulator.calls_to("chat.postMessage") if str(c.args["channel"])[:1] == "D"]
    assert dms and all(c.ok for c in dms)
    assert any(node in json.dumps(c.args.get("blocks")) for c in dms)


__all__ = ["start_replica", "team"]  # the alert tests' fixtures, used here too


async def test_a_wall_clock_set_back_an_hour_holds_no_alert(
    start_replica: StartReplica, emulator: SlackEmulator
) -> None:
    r = await start_replica()
    alerting = r.bot.deps.alerting
    assert alerting is not None
    await r.send(webhook([am_alert("gpu-0003")]))
    await emulator.wait_for_call("chat.postMessage", timeout=10)
    await settle(r)
    alerting.clock = lambda: datetime.now(UTC) - timedelta(hours=1)
    await r.send(webhook([am_alert("gpu-0040", "GpuXid79", severity="critical")]))
    # Posted within seconds, not once the wall clock has caught up with the last call.
    deadline = time.monotonic() + 10
    while not any("gpu-0040" in json.dumps(c.args) for c in emulator.calls_to("chat.postMessage")):
        assert time.monotonic() < deadline, "the second alert was held"
        await asyncio.sleep(0.05)
