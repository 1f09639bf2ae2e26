"""Sending a rendered message: the blocks that did not fit go to the thread, never dropped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.render.blocks import SlackMessage

Private = Callable[[SlackMessage], Awaitable[None]]
"""How a handler answers its caller only (an ephemeral respond, bound to the request)."""


async def respond_message(respond: Any, message: SlackMessage, *, ephemeral: bool = True) -> None:
    """Answers through response_url; overflow follows as further ephemeral answers."""
    kind = "ephemeral" if ephemeral else "in_channel"
    await respond(text=message.text, blocks=message.blocks, response_type=kind)
    for chunk in message.overflow:
        await respond(text=message.text, blocks=chunk, response_type=kind)


async def post_message(
    client: AsyncWebClient, channel: str, message: SlackMessage, *, thread_ts: str | None = None
) -> str:
    """Posts to a channel; overflow goes into the message's thread. Returns the message ts."""
    resp = await client.chat_postMessage(
        channel=channel, text=message.text, blocks=message.blocks, thread_ts=thread_ts
    )
    ts = str(resp["ts"])
    for chunk in message.overflow:
        await client.chat_postMessage(
            channel=channel, text=message.text, blocks=chunk, thread_ts=thread_ts or ts
        )
    return ts
