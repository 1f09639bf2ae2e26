"""Answering: who asked and how to reach them, and the one way a rendered message is sent.

Every handler sends a SlackMessage through these helpers, so the blocks that did not fit one
message (its overflow) always follow, in the thread or as further answers, never dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.render.blocks import SlackMessage

Private = Callable[[SlackMessage], Awaitable[None]]
"""How a handler answers its caller only (an ephemeral respond, bound to the request)."""

OpenView = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Shows a modal to the person who asked; returns the view as Slack keeps it (its `id`, and
its `hash` when it has one) for the updates that follow."""


@dataclass(frozen=True)
class Asker:
    """Who asked a command, and how to answer them where they asked."""

    user_id: str
    channel: str  # where a public answer goes: the channel, or the person's DM
    team: str
    private: Private  # an answer for the asker only
    open_view: OpenView  # shows a form (a modal) to the asker


class Misread(Exception):
    """Raised by a command that cannot read its text: the asker gets `sentence` and the
    command's usage (handlers/commands.py), so each command need not know its own usage."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


async def respond_message(
    respond: AsyncRespond,
    message: SlackMessage,
    *,
    ephemeral: bool = True,
    replace_original: bool | None = None,
) -> None:
    """Answers through response_url; overflow follows as further answers of the same kind.
    `replace_original` (a button's answer): True redraws the message the button sat on, False
    keeps it and answers below."""
    kind = "ephemeral" if ephemeral else "in_channel"
    await respond(
        text=message.text,
        blocks=message.blocks,
        response_type=kind,
        replace_original=replace_original,
    )
    for chunk in message.overflow:
        await respond(
            text=message.text,
            blocks=chunk,
            response_type=kind,
            replace_original=False if replace_original is not None else None,
        )


@dataclass(frozen=True)
class Posted:
    channel: str  # as Slack names it: a DM asked by user id comes back as its D… channel
    ts: str


async def post_message(
    client: AsyncWebClient, channel: str, message: SlackMessage, *, thread_ts: str | None = None
) -> Posted:
    """Posts to a channel; overflow goes into the message's thread."""
    resp = await client.chat_postMessage(
        channel=channel, text=message.text, blocks=message.blocks, thread_ts=thread_ts
    )
    posted = Posted(str(resp.get("channel") or channel), str(resp["ts"]))
    for chunk in message.overflow:
        await client.chat_postMessage(
            channel=posted.channel,
            text=message.text,
            blocks=chunk,
            thread_ts=thread_ts or posted.ts,
        )
    return posted


async def update_message(
    client: AsyncWebClient, channel: str, ts: str, message: SlackMessage
) -> None:
    """Edits a posted message into `message`; overflow goes into the message's thread."""
    await client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
    for chunk in message.overflow:
        await client.chat_postMessage(
            channel=channel, text=message.text, blocks=chunk, thread_ts=ts
        )


async def post_ephemeral(
    client: AsyncWebClient, channel: str, user: str, message: SlackMessage
) -> None:
    """Shows `message` to `user` only, in `channel` (where no response_url is at hand)."""
    for blocks in (message.blocks, *message.overflow):
        await client.chat_postEphemeral(
            channel=channel, user=user, text=message.text, blocks=blocks
        )
