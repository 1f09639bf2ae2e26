"""The terminal shell as a Slack transport.

It is not a second implementation of the bot: it starts the same aiohttp server and `AsyncApp`
that serve Slack, points the bot's Web API client at an in-process Slack side (the project's
Slack emulator, on loopback), and sends the very payloads Slack sends (signed form posts for
slash commands and button presses). What the bot then does in Slack, Web API calls and
response_url posts, is what the shell shows.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from bot.app import SLACK_EVENTS_PATH, Bot, create_bot
from bot.config import Settings
from bot.render.terminal import button_targets
from bot.shell.slack_emulator import SlackEmulator

SHELL_TEAM = "T0SHELL"
SHELL_CHANNEL = "C0SHELL"
SHELL_USER = "U0SHELL"
# Work after an ack is over when nothing is in flight and Slack has been quiet this long.
SETTLE_QUIET_S = 0.05
SETTLE_MAX_S = 60.0


@dataclass(frozen=True)
class Output:
    """One thing the bot did in Slack, in order: a Web API call or a response_url post."""

    method: str
    args: dict[str, Any]

    def as_json(self) -> str:
        return json.dumps({"method": self.method, "args": self.args}, ensure_ascii=False)


class ShellSession:
    def __init__(self, settings: Settings, *, user_id: str = SHELL_USER) -> None:
        self.base_settings = settings
        self.user_id = user_id
        self.emulator = SlackEmulator(team_id=SHELL_TEAM)
        self.bot: Bot | None = None
        self.bot_url = ""
        self._http: aiohttp.ClientSession | None = None
        self._signing_secret = secrets.token_hex(16)
        self._seen_calls = 0
        self._seen_responses = 0
        self._event_seq = 0
        # The newest message shown, whose buttons `press N` refers to.
        self.last_message: dict[str, Any] | None = None

    async def start(self) -> None:
        await self.emulator.start()
        self.emulator.add_channel(SHELL_CHANNEL, "shell")
        if self.user_id not in {SHELL_USER}:
            self.emulator.add_user(self.user_id, self.user_id.lower())
        self.emulator.add_user(SHELL_USER, "you")
        settings = self.base_settings.model_copy(
            update={
                "slack_api_url": self.emulator.api_url,
                "slack_bot_token": SecretStr(self.emulator.bot_token),
                "slack_signing_secret": SecretStr(self._signing_secret),
            }
        )
        self.bot = await create_bot(settings)
        port = await self.bot.start_http("127.0.0.1", 0)
        self.bot_url = f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}"
        self._http = aiohttp.ClientSession()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
        if self.bot is not None:
            await self.bot.close()
        await self.emulator.stop()

    # -- sending what Slack sends

    async def _post_signed(
        self, body: str, *, content_type: str = "application/x-www-form-urlencoded"
    ) -> int:
        assert self._http is not None
        ts = str(int(time.time()))
        signature = (
            SignatureVerifier(self._signing_secret).generate_signature(timestamp=ts, body=body)
            or ""
        )
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": signature,
        }
        async with self._http.post(self.bot_url, data=body, headers=headers) as resp:
            await resp.read()
            return resp.status

    async def command(self, line: str) -> list[Output]:
        """Runs `/command text` as Slack would send it; returns what the bot did."""
        name, _, text = line.strip().partition(" ")
        form = {
            "token": "shell",
            "team_id": SHELL_TEAM,
            "team_domain": "shell",
            "channel_id": SHELL_CHANNEL,
            "channel_name": "shell",
            "user_id": self.user_id,
            "user_name": self.user_id.lower(),
            "command": name,
            "text": text.strip(),
            "api_app_id": "A0SHELL",
            "is_enterprise_install": "false",
            "response_url": self.emulator.new_response_url(),
            "trigger_id": self.emulator.new_trigger_id(),
        }
        return await self._outputs_after(await self._post_signed(urllib.parse.urlencode(form)))

    async def home(self) -> list[Output]:
        """Opens the App Home tab, as Slack's app_home_opened event does."""
        self._event_seq += 1
        payload = {
            "token": "shell",
            "team_id": SHELL_TEAM,
            "api_app_id": "A0SHELL",
            "type": "event_callback",
            "event_id": f"Ev0SHELL{self._event_seq:06d}",
            "event_time": int(time.time()),
            "event": {
                "type": "app_home_opened",
                "user": self.user_id,
                "tab": "home",
                "channel": "D0SHELL",
                "event_ts": f"{time.time():.6f}",
            },
        }
        status = await self._post_signed(json.dumps(payload), content_type="application/json")
        return await self._outputs_after(status)

    async def press(self, number: int) -> list[Output]:
        """Presses button N of the newest message or view (numbered as the terminal shows)."""
        message = self.last_message
        targets = button_targets(message.get("blocks", [])) if message else []
        if not 1 <= number <= len(targets):
            raise ValueError(f"no button {number}: the last message has {len(targets)}")
        target = targets[number - 1]
        assert message is not None
        is_view = message.get("_view", False)
        container: dict[str, Any] = (
            {"type": "view", "view_id": "V0SHELL"}
            if is_view
            else {
                "type": "message",
                "message_ts": message.get("ts", "0"),
                "channel_id": SHELL_CHANNEL,
                "is_ephemeral": message.get("_ephemeral", False),
            }
        )
        payload: dict[str, Any] = {
            "type": "block_actions",
            "team": {"id": SHELL_TEAM, "domain": "shell"},
            "user": {"id": self.user_id, "username": self.user_id.lower(), "team_id": SHELL_TEAM},
            "api_app_id": "A0SHELL",
            "token": "shell",
            "container": container,
            "trigger_id": self.emulator.new_trigger_id(),
            "actions": [
                {
                    "type": target.get("type", "button"),
                    "action_id": target.get("action_id", ""),
                    "block_id": target.get("block_id", ""),
                    "value": target.get("value", ""),
                    "text": target.get("text", {"type": "plain_text", "text": ""}),
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        clean = {k: v for k, v in message.items() if not k.startswith("_")}
        if is_view:
            payload["view"] = clean
        else:
            payload["channel"] = {"id": SHELL_CHANNEL, "name": "shell"}
            payload["message"] = clean
            payload["response_url"] = self.emulator.new_response_url()
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return await self._outputs_after(await self._post_signed(body))

    async def _outputs_after(self, status: int) -> list[Output]:
        outputs = await self.settle()
        if status != 200:
            outputs.append(Output("http_status", {"status": status}))
        return outputs

    # -- reading what the bot did

    async def settle(self) -> list[Output]:
        """Waits until the work after the ack is done, then returns the new outputs."""
        assert self.bot is not None
        deadline = time.monotonic() + SETTLE_MAX_S
        last = (-1, -1)
        while time.monotonic() < deadline:
            await asyncio.sleep(SETTLE_QUIET_S)
            now = (len(self.emulator.calls), len(self.emulator.responses))
            if self.bot.deps.inflight.count == 0 and now == last:
                break
            last = now
        return self._new_outputs()

    def _new_outputs(self) -> list[Output]:
        outputs: list[tuple[float, Output]] = []
        for call in self.emulator.calls[self._seen_calls :]:
            outputs.append((call.at, Output(call.method, call.args)))
        emu = self.emulator
        for (_, body), at in zip(
            emu.responses[self._seen_responses :],
            emu.responses_at[self._seen_responses :],
            strict=True,
        ):
            outputs.append((at, Output("response_url", body)))
        self._seen_calls = len(self.emulator.calls)
        self._seen_responses = len(self.emulator.responses)
        outputs.sort(key=lambda pair: pair[0])
        for _, out in outputs:
            shown = out.method in {"chat.postMessage", "chat.postEphemeral", "response_url"}
            if shown and (out.args.get("blocks") or out.args.get("text")):
                self.last_message = {**out.args, "_ephemeral": out.method != "chat.postMessage"}
            view = out.args.get("view")
            if out.method in {"views.publish", "views.open", "views.update"} and isinstance(
                view, dict
            ):
                self.last_message = {**view, "_view": True}
        return [out for _, out in outputs]
