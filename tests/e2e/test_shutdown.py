"""SIGTERM under load: a real `meowbot run` process (tests/e2e/slow_bot.py) with 200 commands
in flight after their ack. Each one finishes within the grace, or is handed over: stopped, and
its asker told to run it again; none is left without an answer, none gets two."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
import urllib.parse
from typing import Any

import aiohttp
from slack_sdk.signature import SignatureVerifier

from bot.server import SHUTDOWN_GRACE_S, SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from handlers.registry import RESTARTED
from scripts.testsvc.common import free_port
from tests.e2e.conftest import Slack
from tests.e2e.slow_bot import is_slow
from tests.e2e.test_process import clean_env

SECRET = "shutdown-signing-secret"
N = 200
NODES = 16


async def wait_healthy(http: aiohttp.ClientSession, base: str, deadline: float) -> None:
    while True:
        try:
            async with http.get(f"{base}/healthz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        assert time.monotonic() < deadline, "the bot did not start"
        await asyncio.sleep(0.1)


async def test_sigterm_with_200_commands_in_flight_finishes_or_hands_over_each(
    emulator: SlackEmulator, redis_url: str
) -> None:
    port = free_port()
    env = {
        **clean_env(),
        "SLACK_BOT_TOKEN": emulator.bot_token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
        "PORT": str(port),
        "MEOWBOT_FLEET": f"sim:{NODES}",
        "MEOWBOT_SWEEP_INTERVAL": "86400",
    }
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.e2e.slow_bot", env=env, stdout=pipe, stderr=pipe
    )
    verifier = SignatureVerifier(SECRET)
    base = f"http://127.0.0.1:{port}"
    asked: dict[str, str] = {}  # response_url -> node
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            await wait_healthy(http, base, time.monotonic() + 30)

            async def command(i: int) -> int:
                node = f"gpu-{i % NODES + 1:04d}"
                payload = emulator.slash_command_payload("/node-health", node)
                asked[payload["response_url"]] = node
                body = urllib.parse.urlencode(payload)
                stamp = str(int(time.time()))
                headers = {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Slack-Request-Timestamp": stamp,
                    "X-Slack-Signature": str(
                        verifier.generate_signature(timestamp=stamp, body=body)
                    ),
                }
                async with http.post(base + SLACK_EVENTS_PATH, data=body, headers=headers) as resp:
                    return resp.status

            statuses = await asyncio.gather(*(command(i) for i in range(N)))
        assert statuses == [200] * N
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), SHUTDOWN_GRACE_S + 15)
        took = time.monotonic() - signalled
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    logs = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    assert proc.returncode == 0, err.decode()[-2000:]
    assert not [e for e in logs if e.get("level") in ("error", "critical")], logs
    assert "Traceback" not in err.decode()

    answers: dict[str, list[dict[str, Any]]] = {}
    for url, answer in emulator.responses:
        answers.setdefault(url, []).append(answer)
    assert set(answers) == set(asked), "an asker was left without an answer"
    handed_over = 0
    for url, node in asked.items():
        (answer,) = answers[url]  # exactly one: no late answer after the notice
        assert answer["response_type"] == "ephemeral"
        if answer["text"] == RESTARTED:
            handed_over += 1
        else:
            assert node in json.dumps(answer["blocks"]), answer["text"]
        # A slow node's work cannot finish within the grace; a fast one's must.
        assert (answer["text"] == RESTARTED) == is_slow(node), (node, answer["text"])
    assert handed_over == N // 2
    stopped = next(e for e in logs if e["message"] == "shutdown stopped unfinished work")
    assert stopped["count"] == N // 2 and stopped["told"] == N // 2
    # The grace, then the handover: not the 300 s the slow work would have taken.
    assert SHUTDOWN_GRACE_S <= took < SHUTDOWN_GRACE_S + 10


async def test_every_listener_is_tracked_while_it_runs(slack: Slack) -> None:
    """Commands, buttons, alert buttons, forms and events all go through `Registry`, whose
    wrapper (one argument, `args`) tracks each run and knows how to hand it over: a listener
    registered on the AsyncApp directly would be missed by SIGTERM's wait and hand-over."""
    listeners = slack.bot.app._async_listeners
    registered = slack.bot.registered
    kinds = (registered.commands, registered.actions, registered.events, registered.views)
    assert all(kinds) and len(listeners) >= len(registered.actions) + len(registered.events)
    assert [listener.arg_names for listener in listeners] == [["args"]] * len(listeners)
