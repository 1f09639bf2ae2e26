"""The alert notifier's Slack: chat.postMessage and chat.update through the bot's web client.

Rate limits (429 with Retry-After) are waited out by slack_sdk's retry handler that bot/app.py
installs on the client; what still fails comes back as a PostError, and the notifier keeps the
change queued, so nothing is lost.
"""

from __future__ import annotations

import re

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import PostError
from bot.slack_message import SlackMessage

_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")


class SlackPoster:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.calls = 0  # Slack calls made, for the storm benchmark and /metrics
        self._workspace_url: str | None = None

    async def link(self, channel: str, ts: str) -> str | None:
        """The message's permalink, `https://<workspace>.slack.com/archives/<channel>/p<ts
        without its dot>` (what chat.getPermalink returns for a top-level message), built from
        the workspace URL that auth.test gives once: a storm summary links its events without
        a call each. None while auth.test fails (the summary then says "posted on its own")."""
        if not _CHANNEL_ID.fullmatch(channel):
            return None  # a channel given by name: its link would need its id
        if self._workspace_url is None:
            try:
                url = str((await self.client.auth_test()).get("url") or "")
            except (SlackApiError, aiohttp.ClientError, TimeoutError):
                return None
            if not url.startswith("https://"):
                return None
            self._workspace_url = url.rstrip("/") + "/"
        return f"{self._workspace_url}archives/{channel}/p{ts.replace('.', '')}"

    async def post(
        self, channel: str, message: SlackMessage, *, thread_ts: str | None = None
    ) -> str:
        self.calls += 1
        try:
            resp = await self.client.chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.blocks,
                thread_ts=thread_ts,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            raise PostError(str(exc.response.get("error", "unknown_error"))) from exc
        return str(resp["ts"])

    async def update(self, channel: str, ts: str, message: SlackMessage) -> None:
        self.calls += 1
        try:
            await self.client.chat_update(
                channel=channel, ts=ts, text=message.text, blocks=message.blocks
            )
        except SlackApiError as exc:
            raise PostError(str(exc.response.get("error", "unknown_error"))) from exc
