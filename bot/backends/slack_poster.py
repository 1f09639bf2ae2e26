"""The alert notifier's Slack: chat.postMessage and chat.update through the bot's web client.

Rate limits (429 with Retry-After) are waited out by slack_sdk's retry handler that bot/app.py
installs on the client; what still fails comes back as a PostError, and the notifier keeps the
change queued, so nothing is lost.
"""

from __future__ import annotations

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import PostError
from bot.render import SlackMessage


class SlackPoster:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.calls = 0  # Slack calls made, for the storm benchmark and /metrics

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
