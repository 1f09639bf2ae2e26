"""response_url webhooks: each bound optionally to a channel and a message, so that
``replace_original`` and ``delete_original`` act on it; a post without either is an ephemeral
reply, or a channel message with ``response_type: in_channel``. Like Slack's, a URL takes at
most five posts."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.shell.emulator.blockkit import check_message
from bot.shell.emulator.errors import SlackError
from bot.shell.emulator.params import truthy
from bot.shell.emulator.server import Server
from bot.shell.emulator.workspace import Workspace, set_or_drop, with_block_ids


@dataclass
class ResponseUrl:
    url: str
    channel: str | None
    message_ts: str | None
    uses: int = 0
    # Bound to a message only its one person sees: replace_original replaces it there.
    ephemeral: bool = False


class ResponseUrls:
    MAX_USES = 5

    def __init__(self, ws: Workspace, server: Server) -> None:
        self.ws = ws
        self.server = server
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self.responses_at: list[float] = []  # time.monotonic() of each, to order with calls
        # Where each accepted post went: {"channel", "ts"} of the message it made or replaced
        # ("ephemeral": True when only its user sees it); {} when it went nowhere.
        self.responses_to: list[dict[str, Any]] = []
        self.rejected: list[tuple[str, Any, str]] = []
        self._by_key: dict[str, ResponseUrl] = {}

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/commands/{team}/{n}/{key}", self.handle)]

    def new(
        self, *, channel: str | None = None, message_ts: str | None = None, ephemeral: bool = False
    ) -> str:
        n = self.ws.next_seq()
        key = secrets.token_hex(12)
        url = f"{self.server.base_url}/commands/{self.ws.team_id}/{n}/{key}"
        self._by_key[key] = ResponseUrl(
            url=url, channel=channel, message_ts=message_ts, ephemeral=ephemeral
        )
        return url

    def find(self, url: str) -> ResponseUrl | None:
        return next((e for e in self._by_key.values() if e.url == url), None)

    async def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.responses) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"saw {len(self.responses)} response_url post(s), wanted {count}; "
                    f"rejected: {self.rejected}"
                )
            await asyncio.sleep(0.01)

    async def handle(self, request: web.Request) -> web.Response:
        entry = self._by_key.get(request.match_info["key"])
        if entry is None:
            return web.Response(status=404, text="no_service", content_type="text/plain")
        raw = await request.text()

        def reject(status: int, error: str, body: Any) -> web.Response:
            self.rejected.append((entry.url, body, error))
            return web.Response(status=status, text=error, content_type="text/plain")

        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return reject(400, "invalid_payload", raw)
        if not isinstance(body, dict):
            return reject(400, "invalid_payload", body)
        entry.uses += 1
        if entry.uses > self.MAX_USES:
            return reject(404, "used_url", body)
        try:
            went = self.apply(entry, body)
        except SlackError as exc:
            return reject(400 if exc.error != "channel_not_found" else 404, exc.error, body)
        self.responses.append((entry.url, body))
        self.responses_at.append(time.monotonic())
        self.responses_to.append(went)
        return web.Response(text="ok", content_type="text/plain")

    def apply(self, entry: ResponseUrl, body: dict[str, Any]) -> dict[str, Any]:
        """Do what a post to `entry` asks; return where it went (see `responses_to`)."""
        ws = self.ws
        if truthy(body.get("delete_original")):
            if entry.channel and entry.message_ts:
                ws.delete(entry.channel, entry.message_ts, bot_only=False)
                return {"channel": entry.channel, "ts": entry.message_ts}
            return {}
        text, blocks, attachments = check_message(body, require=True)
        if entry.channel is None:
            return {}
        replace = truthy(body.get("replace_original"))
        if replace and entry.ephemeral and entry.message_ts:
            # Slack redraws the person's ephemeral message in place; it is never stored.
            ws.ephemerals.append(
                {
                    "channel": entry.channel,
                    "user": None,
                    "ts": entry.message_ts,
                    "text": text or "",
                    "blocks": blocks,
                    "attachments": attachments,
                    "via": "response_url",
                    "replaces": entry.message_ts,
                }
            )
            return {"channel": entry.channel, "ts": entry.message_ts, "ephemeral": True}
        if replace and entry.message_ts:
            msg = ws.find_message(entry.channel, entry.message_ts)
            msg["text"] = text or ""
            set_or_drop(msg, "blocks", with_block_ids(blocks) if blocks else None)
            set_or_drop(msg, "attachments", attachments)
            return {"channel": entry.channel, "ts": entry.message_ts}
        if body.get("response_type") == "in_channel":
            thread_ts = body.get("thread_ts")
            msg = ws.new_bot_message(text, blocks, attachments)
            if thread_ts:
                msg["thread_ts"] = ws.thread_parent(entry.channel, str(thread_ts))
            ws.store_message(entry.channel, msg)
            return {"channel": entry.channel, "ts": msg["ts"]}
        ts = ws.next_ts()
        ws.ephemerals.append(
            {
                "channel": entry.channel,
                "user": None,
                "ts": ts,
                "text": text or "",
                "blocks": blocks,
                "attachments": attachments,
                "via": "response_url",
            }
        )
        return {"channel": entry.channel, "ts": ts, "ephemeral": True}
