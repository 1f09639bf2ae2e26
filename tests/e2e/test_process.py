"""`meowbot` as a process: HTTP mode with JSON logs and graceful SIGTERM; the shell's --json."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from asyncio.subprocess import Process

import aiohttp
import pytest

from bot.shell.emulator import SlackEmulator, validate_blocks
from scripts.testsvc.common import free_port

SECRET_TOKEN = "xoxb-e2e-process-secret"


def clean_env() -> dict[str, str]:
    """The environment without Slack tokens or the test services' backends."""
    drop = ("SLACK_", "PROMETHEUS_", "SLURM_", "ALERTMANAGER_", "MEOWBOT_", "REDIS_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


async def meowbot(*args: str, env: dict[str, str], stdin: bool = False) -> Process:
    """`python -m bot ARGS` with its output piped (and its input, if asked)."""
    pipe = asyncio.subprocess.PIPE
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        env=env,
        stdin=pipe if stdin else None,
        stdout=pipe,
        stderr=pipe,
    )


async def test_http_mode_logs_json_and_stops_on_sigterm(
    emulator: SlackEmulator, redis_url: str
) -> None:
    port = free_port()
    env = {
        **clean_env(),
        "SLACK_BOT_TOKEN": SECRET_TOKEN,
        "SLACK_SIGNING_SECRET": "process-signing-secret",
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
        "PORT": str(port),
    }
    proc = await meowbot("run", env=env)
    try:
        deadline = time.monotonic() + 20
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        assert resp.status == 200
                        break
                except aiohttp.ClientConnectionError:
                    assert time.monotonic() < deadline, "the bot did not start"
                    await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 12)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    messages = [entry["message"] for entry in lines]
    assert "meowbot is up" in messages and "shutting down" in messages
    up = next(e for e in lines if e["message"] == "meowbot is up")
    assert up["mode"] == "http" and up["port"] == port
    assert SECRET_TOKEN not in err.decode()


@pytest.mark.usefixtures("private_tmp")  # the shell's private Redis goes there
async def test_shell_json_prints_valid_block_kit() -> None:
    env = clean_env()
    proc = await meowbot("shell", "-c", "/node-health help", "--json", env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    records = [json.loads(line) for line in out.decode().splitlines()]
    answers = [r for r in records if r["method"] == "response_url"]
    assert len(answers) == 1
    assert answers[0]["args"]["response_type"] == "ephemeral"
    assert validate_blocks(answers[0]["args"]["blocks"]) == []
    assert all(set(r) == {"method", "args"} for r in records)


@pytest.mark.usefixtures("private_tmp")
async def test_run_without_tokens_opens_the_shell_and_says_so() -> None:
    env = clean_env()
    env["MEOWBOT_HISTORY"] = os.devnull
    proc = await meowbot("run", env=env, stdin=True)
    out, err = await asyncio.wait_for(proc.communicate(b"/hw-faults help\nquit\n"), 30)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    first = text.splitlines()[0]
    assert first.startswith("No Slack tokens set") and "simulated fleet (512 nodes)" in first
    assert "/hw-faults" in text and "\x1b[" not in text  # no colour off a TTY


async def test_a_wrong_setting_stops_start_up_with_one_sentence() -> None:
    env = {**clean_env(), "PORT": "eighty"}
    proc = await meowbot("run", env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    assert err.decode().strip() == (
        "meowbot: PORT must be an integer between 1 and 65535 (got 'eighty')."
    )
