"""`meowbot doctor` against the real services: a healthy install, then each part
misconfigured once (a token without chat:write, a channel meowbot is not in, Redis down),
and the command itself as an operator runs it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bot.config import load_settings
from bot.doctor.report import Line, Status, exit_code
from bot.doctor.run import doctor
from bot.shell.emulator import SlackEmulator
from scripts.testsvc.common import free_port
from tests.conftest import need_service
from tests.e2e.conftest import SIGNING_SECRET, bot_settings

ROOT = Path(__file__).resolve().parents[2]
ALERTS = "C0DOCALERT"


def by_what(lines: list[Line]) -> dict[tuple[str, str], Line]:
    return {(line.part, line.what): line for line in lines}


async def metric_names(prom: str) -> set[str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{prom}/api/v1/label/__name__/values") as resp,
    ):
        return set((await resp.json())["data"])


async def test_a_healthy_install_says_what_works_as_the_services_hold_it(
    emulator: SlackEmulator, redis_url: str, redis_client: aioredis.Redis
) -> None:
    prom = need_service("PROMETHEUS_URL")
    emulator.add_channel(ALERTS, "gpu-alerts")
    settings = bot_settings(emulator, redis_url, PROMETHEUS_URL=prom, MEOWBOT_ALERT_CHANNEL=ALERTS)
    lines = await doctor(settings)
    got = by_what(lines)
    token = got[("Slack", "bot token")]
    assert token.status is Status.PASS and emulator.bot_user_id in token.said
    assert got[("Slack", "scopes")].status is Status.PASS
    assert got[("Slack", "alert channel")].said == "#gpu-alerts, meowbot is a member"
    assert got[("Slack", "how Slack reaches meowbot")].status is Status.PASS
    assert got[("Redis", "server")].status is Status.PASS
    # Persistence as the test server has it, read here the other way round.
    info = await redis_client.info("persistence")
    save = (await redis_client.config_get("save")).get("save", "")
    persists = str(info.get("aof_enabled")) == "1" or bool(save)
    assert (got[("Redis", "persistence")].status is Status.PASS) == persists
    assert got[("Prometheus", "server")].status is Status.PASS
    # A check said to be unable to run names metrics the real Prometheus does not have.
    present = await metric_names(prom)
    unable = [line for line in lines if line.what.startswith("check ")]
    for line in unable:
        named = line.said.removeprefix("cannot run: no ").removesuffix(" in Prometheus")
        assert not set(named.split(", ")) & present, line
    checks = got[("Prometheus", "health checks")]
    assert (checks.status is Status.PASS) == (not unable)
    assert got[("Prometheus", "host label")].said.endswith("by Hostname")
    assert "queries" in got[("Prometheus", "sweep cost")].said
    assert got[("Slurm", "configured")].status is Status.OFF
    assert exit_code(lines) == (1 if any(line.status is Status.FAIL for line in lines) else 0)


async def test_a_token_without_chat_write_and_a_channel_without_meowbot_fail(
    emulator: SlackEmulator, redis_url: str
) -> None:
    emulator.revoke_scope("chat:write")
    emulator.add_channel(ALERTS, "gpu-alerts", is_member=False)
    lines = await doctor(bot_settings(emulator, redis_url, MEOWBOT_ALERT_CHANNEL=ALERTS))
    got = by_what(lines)
    scopes = got[("Slack", "scopes")]
    assert scopes.status is Status.FAIL and scopes.said.startswith("missing chat:write")
    channel = got[("Slack", "alert channel")]
    assert channel.status is Status.FAIL and channel.fix == "/invite @meowbot in #gpu-alerts"
    assert exit_code(lines) == 1


async def test_redis_down_fails_with_the_fix_and_the_rest_is_still_checked(
    emulator: SlackEmulator, redis_url: str
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    lines = await doctor(bot_settings(emulator, dead))
    got = by_what(lines)
    server = got[("Redis", "server")]
    assert server.status is Status.FAIL and server.said.startswith("unreachable")
    assert got[("Slack", "bot token")].status is Status.PASS  # the other parts still answer
    assert exit_code(lines) == 1


def run_doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    keep = {k: v for k, v in os.environ.items() if not k.endswith("_URL") and k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "bot", "doctor", *args],
        cwd=ROOT / "tests",  # no .env of the checkout's
        env={**keep, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_the_command_prints_the_report_and_exits_by_it(
    emulator: SlackEmulator, redis_url: str
) -> None:
    env: dict[str, Any] = {
        "SLACK_BOT_TOKEN": emulator.bot_token,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
    }
    # The emulator answers from this loop: the command runs in a thread meanwhile.
    done = await asyncio.to_thread(run_doctor, env, "--json")
    body = json.loads(done.stdout)
    assert done.returncode == (0 if body["ok"] else 1), done.stderr
    assert {c["part"] for c in body["checks"]} >= {"Slack", "Redis", "Prometheus", "Slurm"}
    env["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    text = await asyncio.to_thread(run_doctor, env)
    assert text.returncode == 1, text.stdout + text.stderr
    assert "FAIL  server: unreachable" in text.stdout and "fix: start Redis" in text.stdout


async def test_alertmanager_the_checkpoint_servers_and_the_schedules(
    emulator: SlackEmulator, redis_url: str
) -> None:
    am = need_service("ALERTMANAGER_URL")
    served = need_service("PLAYGROUND_TEST_URL")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    settings = bot_settings(
        emulator,
        redis_url,
        ALERTMANAGER_URL=am,
        ALERTMANAGER_WEBHOOK_TOKEN=None,
        PLAYGROUND_ENDPOINTS=f"{served};{dead}",
        MEOWBOT_DIGEST_CHANNEL="C0DIGEST",
        MEOWBOT_DIGEST_SCHEDULE="fri 16:00 UTC",
    )
    emulator.add_channel("C0DIGEST", "highlights")
    got = by_what(await doctor(settings))
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{am}/api/v2/status") as resp,
    ):
        version = (await resp.json())["versionInfo"]["version"]
    assert got[("Alertmanager", "server")].said.startswith(f"{version}, cluster ")
    assert got[("Alertmanager", "silences")].status is Status.PASS
    assert got[("Alertmanager", "webhook")].status is Status.WARN
    host = served.split("//", 1)[1].removesuffix("/v1")
    live = got[("Playground", host)]
    assert live.status is Status.PASS and live.said.endswith("checkpoint(s) served")
    down = got[("Playground", dead.split("//", 1)[1].removesuffix("/v1"))]
    assert down.status is Status.FAIL and "/v1" in down.fix
    digest = got[("Schedules", "highlights digest")]
    assert digest.status is Status.PASS and digest.said.startswith("next Fri ")
    assert digest.said.endswith("(fri 16:00 UTC), to C0DIGEST")
    assert got[("Schedules", "regressions post")].status is Status.OFF


async def test_slack_unreachable_is_a_fail_not_a_crash(redis_url: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}/api/"
    settings = load_settings(
        SLACK_BOT_TOKEN="xoxb-1-unreachable",
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=dead,
        REDIS_URL=redis_url,
        PROMETHEUS_URL=None,
        SLURM_REST_URL=None,
        KUBECONFIG=None,
    )
    got = by_what(await doctor(settings))
    token = got[("Slack", "bot token")]
    assert token.status is Status.FAIL and token.said.startswith("Slack unreachable")
    assert got[("Redis", "server")].status is Status.PASS
