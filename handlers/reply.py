"""Answering: who asked and how to reach them, and the one way out to Slack.

Every handler sends a SlackMessage through these helpers, so the blocks that did not fit one
message (its overflow) always follow, in the thread or as further answers, never dropped. The
rest of what a handler says to Slack is here too: a line of plain text, an ephemeral line, a
file, a chart (drawn on the worker pool; when Slack will not take it, the thread says why), a
modal and its updates, the App Home tab. No other module of handlers/ calls the Web API
(tests/unit/test_one_way_out.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientSession
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.context.respond.internals import _build_message
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.models.attachments import Attachment
from slack_sdk.models.blocks import Block
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from slack_sdk.webhook.webhook_response import WebhookResponse

from bot import ticks
from bot.offload import Offload
from bot.render.blocks import error as error_message
from bot.slack_message import SlackMessage
from handlers.registry import Middleware, Next

log = logging.getLogger(__name__)

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
    # The thread a public answer goes into (a mention's or a DM's); None: the channel itself.
    thread_ts: str | None = None
    # Whether answers spell out Confirmed / Suspected / Checked and fine (a question in plain
    # words, whose asker has not learnt how each command's answer reads).
    headings: bool = False


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


async def post_progress(
    client: AsyncWebClient,
    channel: str,
    message: SlackMessage,
    private: Private,
    *,
    thread_ts: str | None = None,
) -> Posted | None:
    """The "looking at…" message that is edited into the answer; None where the bot may not
    post there, the asker told that the answer follows privately, without a chart."""
    try:
        return await post_message(client, channel, message, thread_ts=thread_ts)
    except SlackApiError as exc:
        code = exc.response.get("error", "unknown")
        await private(
            error_message(
                f"I cannot post in this channel ({code}): invite me for the chart and the "
                "thread. The answer follows here."
            )
        )
        return None


async def update_message(
    client: AsyncWebClient, channel: str, ts: str, message: SlackMessage
) -> None:
    """Edits a posted message into `message`; overflow goes into the message's thread."""
    await client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
    for chunk in message.overflow:
        await client.chat_postMessage(
            channel=channel, text=message.text, blocks=chunk, thread_ts=ts
        )


async def redraw_message(
    client: AsyncWebClient, channel: str, ts: str, message: SlackMessage
) -> None:
    """Edits a posted message into `message`'s own blocks, its overflow left out: for a
    message edited again and again as it streams, each edit carrying everything so far."""
    await client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)


async def post_line(
    client: AsyncWebClient, channel: str, text: str, *, thread_ts: str | None = None
) -> None:
    """Posts `text` as it is, no blocks: an audit line, an answer in full, why a chart is
    missing."""
    await client.chat_postMessage(channel=channel, text=text, thread_ts=thread_ts)


async def post_ephemeral_line(client: AsyncWebClient, channel: str, user: str, text: str) -> None:
    """Shows `text` to `user` only, in `channel`, no blocks."""
    await client.chat_postEphemeral(channel=channel, user=user, text=text)


async def upload_file(
    client: AsyncWebClient,
    channel: str,
    thread_ts: str,
    content: str | bytes,
    *,
    filename: str,
    title: str,
) -> None:
    """Uploads `content` as a file into a thread (files.upload v2)."""
    await client.files_upload_v2(
        channel=channel, thread_ts=thread_ts, content=content, filename=filename, title=title
    )


@dataclass(frozen=True)
class Chart:
    """A PNG to draw and how its file is named; `upload_chart` draws it on the worker pool."""

    draw: Callable[[], bytes]
    filename: str
    title: str


async def upload_chart(
    client: AsyncWebClient,
    cpu: Offload,
    channel: str,
    thread_ts: str,
    chart: Chart,
    *,
    quiet: bool = False,
) -> None:
    """Draws `chart` off the event loop and uploads it into the thread; when Slack will not
    take it, the thread says why (`quiet`: only the log does, where the answer stands without
    its chart)."""
    png = await cpu.run(chart.draw)
    try:
        await upload_file(
            client, channel, thread_ts, png, filename=chart.filename, title=chart.title
        )
    except SlackApiError as exc:
        log.warning("chart upload failed", extra={"error": exc.response.get("error")})
        if not quiet:
            code = exc.response.get("error", "unknown")
            await post_line(
                client, channel, f"The chart could not be uploaded ({code}).", thread_ts=thread_ts
            )


async def show_modal(
    client: AsyncWebClient, trigger_id: str, view: dict[str, Any]
) -> dict[str, Any]:
    """Opens a modal (views.open, within the trigger's 3 s); returns the view as Slack keeps it."""
    opened = await client.views_open(trigger_id=trigger_id, view=view)
    return dict(opened["view"])


async def update_modal(
    client: AsyncWebClient, view_id: str | None, view: dict[str, Any], *, view_hash: str | None
) -> None:
    """Replaces an open modal's content (views.update); `view_hash` guards against a newer one."""
    await client.views_update(view_id=view_id, hash=view_hash, view=view)


async def publish_home(client: AsyncWebClient, user: str, view: dict[str, Any]) -> None:
    """Shows `view` as `user`'s App Home tab (views.publish)."""
    await client.views_publish(user_id=user, view=view)


EDIT_EVERY_S = 1.5
"""How often a slow answer's progress message is edited at most: Slack allows about one
chat.update a second a channel."""


class ProgressEdits:
    """Edits a posted message with each step a slow answer reports, at most every
    EDIT_EVERY_S; a failed edit is logged and the answer still comes."""

    def __init__(
        self, client: AsyncWebClient, channel: str, ts: str, render: Callable[[str], SlackMessage]
    ) -> None:
        self.client, self.channel, self.ts, self.render = client, channel, ts, render
        self.last: float | None = None  # no edit yet

    async def __call__(self, step: str) -> None:
        if ticks.since(self.last) < EDIT_EVERY_S:
            return
        self.last = ticks.now()
        try:
            await update_message(self.client, self.channel, self.ts, self.render(step))
        except SlackApiError as exc:
            log.warning("progress edit failed", extra={"error": exc.response.get("error")})


async def post_ephemeral(
    client: AsyncWebClient, channel: str, user: str, message: SlackMessage
) -> None:
    """Shows `message` to `user` only, in `channel` (where no response_url is at hand)."""
    for blocks in (message.blocks, *message.overflow):
        await client.chat_postEphemeral(
            channel=channel, user=user, text=message.text, blocks=blocks
        )


class RespondElsewhere(AsyncRespond):
    """`respond` for a press or a form that came without a response_url (a button in App Home
    or in a modal): Bolt's own raises there, and a refusal or an outcome said through it was
    lost behind a traceback. The answer goes to the channel the payload names, for the person
    only (chat.postEphemeral), else to their DM; there is no message to redraw or delete, so
    `replace_original` posts anew and `delete_original` has nothing to do."""

    def __init__(self, client: AsyncWebClient, user: str, channel: str | None) -> None:
        super().__init__(response_url=None)
        self.client = client
        self.user = user
        self.channel = channel

    async def __call__(
        self,
        text: str | dict[str, Any] = "",
        blocks: Sequence[dict[str, Any] | Block] | None = None,
        attachments: Sequence[dict[str, Any] | Attachment] | None = None,
        response_type: str | None = None,
        replace_original: bool | None = None,
        delete_original: bool | None = None,
        unfurl_links: bool | None = None,
        unfurl_media: bool | None = None,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> WebhookResponse:
        if isinstance(text, dict):  # the whole message as one dict, as Bolt's respond takes it
            blocks, text = text.get("blocks", blocks), str(text.get("text", ""))
        if delete_original:
            return self._answered("nothing to delete")
        if self.channel and response_type == "in_channel":
            await self.client.chat_postMessage(channel=self.channel, text=text, blocks=blocks)
            return self._answered("posted")
        if self.channel:
            try:
                await self.client.chat_postEphemeral(
                    channel=self.channel, user=self.user, text=text, blocks=blocks
                )
                return self._answered("ephemeral")
            except SlackApiError as exc:  # not in that channel (any more): the DM still reaches
                log.info("ephemeral answer went to DM", extra={"error": exc.response.get("error")})
        await self.client.chat_postMessage(channel=self.user, text=text, blocks=blocks)
        return self._answered("direct message")

    @staticmethod
    def _answered(how: str) -> WebhookResponse:
        return WebhookResponse(url="", status_code=200, body=json.dumps({"ok": how}), headers={})


def _channel_of(body: dict[str, Any]) -> str | None:
    channel = body.get("channel") or {}
    container = body.get("container") or {}
    found = (channel.get("id") if isinstance(channel, dict) else None) or (
        container.get("channel_id") if isinstance(container, dict) else None
    )
    return str(found) if found else None


class PooledRespond(AsyncRespond):
    """Bolt's `respond` over the bot's own HTTP session. Bolt's opens a session, and so a
    connection, for every answer: time on the event loop that the acks behind it wait for
    (docs/benchmarks.md)."""

    def __init__(self, response_url: str, session: ClientSession) -> None:
        super().__init__(response_url=response_url)
        self.session = session

    async def __call__(
        self,
        text: str | dict[str, Any] = "",
        blocks: Sequence[dict[str, Any] | Block] | None = None,
        attachments: Sequence[dict[str, Any] | Attachment] | None = None,
        response_type: str | None = None,
        replace_original: bool | None = None,
        delete_original: bool | None = None,
        unfurl_links: bool | None = None,
        unfurl_media: bool | None = None,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> WebhookResponse:
        message = (
            _build_message(**text)
            if isinstance(text, dict)
            else _build_message(
                text=text,
                blocks=blocks,
                attachments=attachments,
                response_type=response_type,
                replace_original=replace_original,
                delete_original=delete_original,
                unfurl_links=unfurl_links,
                unfurl_media=unfurl_media,
                thread_ts=thread_ts,
                metadata=metadata,
            )
        )
        webhook = AsyncWebhookClient(url=str(self.response_url), session=self.session)
        return await webhook.send_dict(message)


def respond_elsewhere() -> Middleware:
    """Gives every listener of a press or a form without a response_url a `respond` that works
    (`RespondElsewhere`), so no listener needs to know which surface it was pressed on; with a
    response_url, one over the bot's HTTP session (`PooledRespond`)."""

    async def elsewhere(req: AsyncBoltRequest, next: Next) -> BoltResponse | None:
        ctx = req.context
        if (
            ctx.response_url is None
            and ctx.user_id
            and req.body.get("type") in ("block_actions", "view_submission")
        ):
            ctx["respond"] = RespondElsewhere(ctx.client, ctx.user_id, _channel_of(req.body))
        elif ctx.response_url is not None and ctx.client.session is not None:
            ctx["respond"] = PooledRespond(ctx.response_url, ctx.client.session)
        await next()
        return None

    return Middleware(elsewhere, "meowbot.respond_elsewhere")
