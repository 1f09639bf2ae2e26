"""`SlackEmulator`: the workspace, the Web API methods, response URLs, Socket Mode and the
payload builders behind one object, served by one aiohttp server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bot.shell.emulator.conversations import ConversationMethods
from bot.shell.emulator.directory import DirectoryMethods
from bot.shell.emulator.events import Events
from bot.shell.emulator.files import FileMethods
from bot.shell.emulator.messages import MessageMethods
from bot.shell.emulator.payloads import Payloads
from bot.shell.emulator.response_urls import ResponseUrls
from bot.shell.emulator.server import Server
from bot.shell.emulator.socket_mode import SocketAck, SocketMode
from bot.shell.emulator.views import Triggers, ViewMethods
from bot.shell.emulator.web_api import Call, WebApi
from bot.shell.emulator.workspace import APP_ID, Workspace

WAIT_S = 30.0
"""How long the waits below wait by default: they return as soon as what they wait for is
seen, so the bound is for a loaded machine, where seconds of delay are no failure."""


class SlackEmulator:
    """See the package docstring. Use ``await emu.start()`` / ``await emu.stop()``."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-test-token",
        app_token: str = "xapp-test-token",
        team_id: str = "T0TEST",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        app_id: str = APP_ID,
        ts_start: float | None = None,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id

        self.workspace = ws = Workspace(
            team_id=team_id,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            app_id=app_id,
            ts_start=ts_start,
        )
        self._server = Server()
        self._triggers = Triggers(ws)
        self._response_urls = ResponseUrls(ws, self._server)
        self._socket = SocketMode(self._server, app_id)
        self._files = FileMethods(ws, self._server)
        self._payloads = Payloads(ws, self._response_urls, self._triggers)
        self._events = Events(ws)
        self._api = WebApi(
            {
                **DirectoryMethods(ws).table(),
                **MessageMethods(ws).table(),
                **ConversationMethods(ws).table(),
                **ViewMethods(ws, self._triggers).table(),
                **self._files.table(),
                **self._socket.table(),
            },
            bot_token=bot_token,
            app_token=app_token,
        )

        # What tests read: the same objects the parts fill in.
        self.calls: list[Call] = self._api.calls
        self.responses = self._response_urls.responses
        self.responses_at = self._response_urls.responses_at
        self.responses_to = self._response_urls.responses_to
        self.rejected_responses = self._response_urls.rejected
        self.uploads = ws.uploads
        self.files = ws.files
        self.ephemerals = ws.ephemerals
        self.views = ws.views
        self.home_views = ws.home_views
        self.socket_envelopes = self._socket.envelopes
        self.socket_acks: list[SocketAck] = self._socket.acks
        self.socket_unmatched = self._socket.unmatched
        self.socket_connected: asyncio.Event = self._socket.connected

        ws.add_user(bot_user_id, "meowbot", is_bot=True, real_name="meowbot")
        ws.add_user("U0ADMIN", "ana", email="ana@example.org", real_name="Ana", is_admin=True)
        ws.add_user("U0USER", "bob", email="bob@example.org", real_name="Bob")
        ws.add_channel("C0GENERAL", "general")

        # Seeding the workspace, as the test's setup does it.
        self.add_channel = ws.add_channel
        self.archive_channel = ws.archive_channel
        self.add_user = ws.add_user
        self.add_usergroup = ws.add_usergroup
        self.add_message = ws.add_message
        self.messages = ws.messages
        self.message = ws.message

    # lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self._server.start(
            [
                *self._api.routes(),
                *self._files.routes(),
                *self._response_urls.routes(),
                *self._socket.routes(),
            ]
        )

    async def stop(self) -> None:
        await self._socket.close()
        await self._server.stop()

    async def __aenter__(self) -> SlackEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def base_url(self) -> str:
        return self._server.base_url

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    @property
    def socket_connections(self) -> int:
        """WebSocket connections accepted so far."""
        return self._socket.connections

    # failure injection and calls -----------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        error: str = "ratelimited",
        count: int = 1,
    ) -> None:
        """Make the next ``count`` calls to ``method`` fail (checked before auth)."""
        self._api.fail_next(
            method, status=status, retry_after=retry_after, error=error, count=count
        )

    def revoke_scope(self, scope: str) -> None:
        """The bot token loses `scope`, as an app installed without it: the methods that need
        it answer `missing_scope`, and `x-oauth-scopes` no longer lists it."""
        self._api.scopes = [s for s in self._api.scopes if s != scope]

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def clear_calls(self) -> None:
        self.calls.clear()

    async def wait_for_call(
        self, method: str, *, count: int = 1, timeout: float = WAIT_S, ok: bool | None = None
    ) -> Call:
        """Wait until ``count`` calls to ``method`` (optionally only ok/failed) were seen."""
        deadline = time.monotonic() + timeout
        while True:
            seen = [c for c in self.calls_to(method) if ok is None or c.ok is ok]
            if len(seen) >= count:
                return seen[count - 1]
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"saw {len(seen)} call(s) to {method}, wanted {count} within {timeout}s; "
                    f"calls so far: {[c.method for c in self.calls]}"
                )
            await asyncio.sleep(0.01)

    async def wait_for_responses(self, count: int = 1, *, timeout: float = WAIT_S) -> None:
        await self._response_urls.wait(count, timeout)

    # triggers and response urls ------------------------------------------------------------

    def new_trigger_id(self) -> str:
        """A trigger_id like Slack's; valid for one views.open/push within 3 seconds."""
        return self._triggers.new()

    def new_response_url(
        self, *, channel: str | None = None, message_ts: str | None = None, ephemeral: bool = False
    ) -> str:
        """A response_url on the emulator. Bound to a channel (and message, an `ephemeral` one
        too), posts act on it."""
        return self._response_urls.new(channel=channel, message_ts=message_ts, ephemeral=ephemeral)

    # payloads of what people do ------------------------------------------------------------

    def slash_command_payload(
        self, command: str, text: str = "", *, user: str = "U0ADMIN", channel: str = "C0GENERAL"
    ) -> dict[str, Any]:
        """The payload of a ``slash_commands`` envelope, with a fresh response_url/trigger_id."""
        return self._payloads.slash_command(command, text, user=user, channel=channel)

    def block_actions_payload(
        self,
        channel: str,
        ts: str,
        action_id: str,
        *,
        user: str = "U0ADMIN",
        selected_value: str | None = None,
        block_id: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for clicking ``action_id`` in a stored message, or in
        ``blocks`` (a version of it the person saw, an ephemeral message of the channel).

        Raises LookupError when there is no element with that action_id (in block
        ``block_id``, when given).
        """
        return self._payloads.block_actions(
            channel,
            ts,
            action_id,
            user=user,
            selected_value=selected_value,
            block_id=block_id,
            blocks=blocks,
        )

    def ephemeral_actions_payload(
        self,
        response_index: int,
        action_id: str,
        *,
        user: str = "U0ADMIN",
        selected_value: str | None = None,
        block_id: str | None = None,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for clicking ``action_id`` in an ephemeral message the
        bot sent through a response_url (``self.responses[response_index]``)."""
        return self._payloads.ephemeral_actions(
            response_index, action_id, user=user, selected_value=selected_value, block_id=block_id
        )

    def view_actions_payload(
        self,
        view: dict[str, Any],
        action_id: str,
        *,
        user: str = "U0ADMIN",
        selected_value: str | None = None,
        block_id: str | None = None,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload for clicking ``action_id`` in a view (a modal, or the
        home tab) as the person saw it: one of ``views``, or an earlier version of one."""
        return self._payloads.view_actions(
            view, action_id, user=user, selected_value=selected_value, block_id=block_id
        )

    def view_submission_payload(
        self, view: dict[str, Any], values: dict[str, Any], *, user: str = "U0ADMIN"
    ) -> dict[str, Any]:
        """A ``view_submission`` payload: ``user`` submits the modal ``view`` with its inputs
        holding ``values`` (``{block_id: {action_id: {"type": ..., "value": ...}}}``)."""
        return self._payloads.view_submission(view, values, user=user)

    def event_payload(self, event: dict[str, Any]) -> dict[str, Any]:
        """An ``events_api`` envelope payload (event_callback) wrapping ``event``."""
        return self._events.payload(event)

    def react(
        self, channel: str, ts: str, user: str, name: str, *, remove: bool = False
    ) -> dict[str, Any]:
        """``user`` adds (or removes) reaction ``name`` on a stored message, as in Slack's
        client; returns the ``reaction_added`` / ``reaction_removed`` event payload Slack would
        deliver for it (the emulator does not deliver events itself)."""
        return self._events.react(channel, ts, user, name, remove=remove)

    def mention(
        self, channel: str, user: str, text: str, *, thread: str | None = None
    ) -> dict[str, Any]:
        """``user`` mentions the bot in ``channel`` (in ``thread`` if given): the message is
        stored, so its thread exists, and the ``app_mention`` event payload is returned."""
        return self._events.mention(channel, user, text, thread)

    def edit_message(self, channel: str, ts: str, text: str) -> dict[str, Any]:
        """A person edits a stored message; returns the ``message_changed`` event payload."""
        return self._events.edit_message(channel, ts, text)

    def delete_message(self, channel: str, ts: str) -> dict[str, Any]:
        """A person deletes a stored message; returns the ``message_deleted`` event payload."""
        return self._events.delete_message(channel, ts)

    # Socket Mode ---------------------------------------------------------------------------

    async def socket_send(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool = True,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = 5.0,
    ) -> dict[str, Any]:
        """Send an envelope to the newest Socket Mode connection and return the client's ack."""
        return await self._socket.send(
            type,
            payload,
            accepts_response_payload=accepts_response_payload,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
            timeout=timeout,
        )

    async def socket_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask connected clients to reconnect, like Slack does before rotating a connection."""
        await self._socket.disconnect(reason)
