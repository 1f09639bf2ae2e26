"""Socket Mode as slack_sdk's SocketModeClient speaks it: apps.connections.open hands out a
WebSocket URL; the emulator says hello, sends envelopes, matches the client's acks to them,
and asks clients to reconnect with a disconnect message."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from bot.shell.emulator.server import Server
from bot.shell.emulator.web_api import MethodTable


@dataclass(frozen=True)
class SocketAck:
    """One Socket Mode envelope sent by the emulator and the client's ack."""

    envelope: dict[str, Any]
    ack: dict[str, Any]
    sent_at: float  # time.monotonic()
    acked_at: float

    @property
    def latency(self) -> float:
        return self.acked_at - self.sent_at


class SocketMode:
    def __init__(self, server: Server, app_id: str) -> None:
        self.server = server
        self.app_id = app_id
        self.envelopes: list[dict[str, Any]] = []
        self.acks: list[SocketAck] = []
        self.unmatched: list[Any] = []
        self.connected = asyncio.Event()
        self.connections = 0  # total WebSocket connections accepted so far
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._pending: dict[str, tuple[web.WebSocketResponse, asyncio.Future[dict[str, Any]]]] = {}

    def table(self) -> MethodTable:
        return {"apps.connections.open": (self.connections_open, "app")}

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/link/", self.handle)]

    def connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        port = self.server.port
        return {"url": f"ws://127.0.0.1:{port}/link/?ticket={ticket}&app_id={self.app_id}"}

    async def close(self) -> None:
        for ws in list(self._sockets):
            await ws.close(code=1001, message=b"emulator stopping")
        for _, fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("emulator stopped"))
        self._pending.clear()

    async def send(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool,
        retry_attempt: int,
        retry_reason: str,
        timeout: float,
    ) -> dict[str, Any]:
        """Send an envelope to the newest connection and return the client's ack."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await asyncio.wait_for(self.connected.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no Socket Mode client connected within {timeout}s") from None
        ws = self._sockets[-1]
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": type,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[envelope_id] = (ws, fut)
        sent_at = time.monotonic()
        try:
            await ws.send_json(envelope)
            self.envelopes.append(envelope)
            ack = await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise TimeoutError(
                f"no ack for {type} envelope {envelope_id} within {timeout}s"
            ) from None
        finally:
            self._pending.pop(envelope_id, None)
        self.acks.append(SocketAck(envelope, ack, sent_at, time.monotonic()))
        return ack

    async def disconnect(self, reason: str) -> None:
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "emulator"}}
        for ws in list(self._sockets):
            await ws.send_json(message)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid_ticket")
        ws = web.WebSocketResponse(autoping=True, timeout=1.0)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.connections += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {
                    "host": "applink-emulator",
                    "build_number": 1,
                    "approximate_connection_time": 3600,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        self.connected.set()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_text(msg.data)
                elif msg.type == WSMsgType.ERROR:
                    break
        finally:
            self._sockets.remove(ws)
            if not self._sockets:
                self.connected.clear()
            for ack_ws, fut in list(self._pending.values()):
                if ack_ws is ws and not fut.done():
                    fut.set_exception(ConnectionError("Socket Mode connection closed before ack"))
        return ws

    def _on_text(self, data: str) -> None:
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            self.unmatched.append(data)
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        pending = self._pending.get(envelope_id) if isinstance(envelope_id, str) else None
        if pending is None or pending[1].done():
            self.unmatched.append(message)
            return
        pending[1].set_result(message)
