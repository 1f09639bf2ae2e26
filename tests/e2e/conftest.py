"""The real bot (aiohttp server + AsyncApp) against the project's Slack emulator and real Redis."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from bot.app import create_bot
from bot.config import load_settings
from bot.server import SLACK_EVENTS_PATH, Bot
from bot.shell.emulator import SlackEmulator

SIGNING_SECRET = "e2e-signing-secret"


@dataclass
class Slack:
    """Sends what Slack sends: signed requests to the bot's /slack/events."""

    emulator: SlackEmulator
    bot: Bot
    url: str
    http: aiohttp.ClientSession

    def headers(
        self, body: str, *, ts: int | None = None, secret: str = SIGNING_SECRET
    ) -> dict[str, str]:
        stamp = str(int(time.time()) if ts is None else ts)
        sig = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
        return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": sig}

    async def post(
        self, body: str, *, content_type: str, headers: dict[str, str] | None = None
    ) -> tuple[int, str, dict[str, str]]:
        signed = self.headers(body) if headers is None else headers
        all_headers = {"Content-Type": content_type, **signed}
        async with self.http.post(self.url, data=body.encode(), headers=all_headers) as resp:
            return resp.status, await resp.text(), dict(resp.headers)

    async def command(
        self, command: str, text: str = "", **kw: Any
    ) -> tuple[int, str, dict[str, str]]:
        payload = self.emulator.slash_command_payload(command, text, **kw)
        return await self.post(
            urllib.parse.urlencode(payload), content_type="application/x-www-form-urlencoded"
        )

    async def interactive(
        self, payload: dict[str, Any], **kw: Any
    ) -> tuple[int, str, dict[str, str]]:
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return await self.post(body, content_type="application/x-www-form-urlencoded", **kw)

    async def event(
        self, payload: dict[str, Any], *, retry: int | None = None
    ) -> tuple[int, str, dict[str, str]]:
        body = json.dumps(payload)
        headers = self.headers(body)
        if retry is not None:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return await self.post(body, content_type="application/json", headers=headers)


@pytest.fixture
async def emulator() -> AsyncIterator[SlackEmulator]:
    emu = SlackEmulator()
    await emu.start()
    yield emu
    await emu.stop()


def bot_settings(emulator: SlackEmulator, redis_url: str, **extra: Any) -> Any:
    """The bot on the simulated fleet unless a test names its backends: the services that
    `make test` exports for the integration tests must not leak in through the environment."""
    backends: dict[str, Any] = {
        "PROMETHEUS_URL": None,
        "SLURM_REST_URL": None,
        "KUBECONFIG": None,
        "MEOWBOT_ADMINS": "",
    }
    return load_settings(
        SLACK_BOT_TOKEN=emulator.bot_token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=emulator.api_url,
        REDIS_URL=redis_url,
        **{**backends, **extra},
    )


@pytest.fixture
async def slack(emulator: SlackEmulator, redis_url: str, redis_client: Any) -> AsyncIterator[Slack]:
    bot = await create_bot(bot_settings(emulator, redis_url))
    port = await bot.start_http("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        yield Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)
    await bot.close()
