"""The terminal shell as a Slack transport.

It is not a second implementation of the bot: it starts the same aiohttp server and `AsyncApp`
that serve Slack, points the bot's Web API client at an in-process Slack side (the project's
Slack emulator, on loopback), and sends the very payloads Slack sends (signed form posts for
slash commands, button presses and modal submissions; events for reactions and App Home). What
the bot then does in Slack, Web API calls and response_url posts, is what the shell shows.

The session keeps the screen as a person in Slack sees it: every message and view in its
current state (edits followed), and one numbering of their buttons across the screen, so
`press N` presses what is shown now, on any recent message.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import random
import re
import secrets
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from bot.app import create_bot
from bot.config import Settings
from bot.models import JOB_LEVEL_KINDS, FaultKind
from bot.server import SLACK_EVENTS_PATH, Bot
from bot.shell.emulator import SlackEmulator
from bot.shell.local_redis import LocalRedis
from bot.shell.terminal import button_targets
from bot.triage.checks import WEATHER_KINDS

log = logging.getLogger(__name__)

SHELL_TEAM = "T0SHELL"
SHELL_CHANNEL = "C0SHELL"
SHELL_USER = "U0SHELL"
SHELL_EMAIL_DOMAIN = "example.org"
# Work after an ack is over when nothing is in flight and Slack has been quiet this long.
SETTLE_QUIET_S = 0.05
SETTLE_MAX_S = 60.0
PROGRESS_AFTER_S = 1.0  # a step longer than this shows that it is still going
# How long `sweep` waits for the notifier to post what the sweep found (one post a second).
SWEEP_POST_MAX_S = 60.0
# The simulated weather: the faults that come and go on their own in an interactive shell
# are the checks whose entry says `weather` (bot/triage/checks.py: WEATHER_KINDS).
# One change of the simulated fleet a minute, whatever the sweep interval: readable.
WEATHER_EVERY_S = 60
WEATHER_MAX = 4  # at most this many at once: a change is a heal past it
# Buttons of this many recent messages and views stay pressable; older ones scrolled away.
RECENT_SHOWN = 50
MESSAGE_METHODS = {"chat.postMessage", "chat.postEphemeral", "chat.update"}
VIEW_METHODS = {"views.open", "views.push", "views.update", "views.publish"}


@dataclass(frozen=True)
class Output:
    """One thing the bot did in Slack, in order: a Web API call or a response_url post.

    The session's screen outputs use their own methods: `message` and `view` (the final state
    of one message or view, `start` numbering its buttons, `note` what happened to it),
    `removed`, `file` (a chart saved to `args["path"]`), `notice` and `http_status`.
    """

    method: str
    args: dict[str, Any]
    start: int = 1
    note: str = ""

    def as_json(self) -> str:
        return json.dumps({"method": self.method, "args": self.args}, ensure_ascii=False)


@dataclass
class Shown:
    """A message or view on the screen, in its current state."""

    key: str
    kind: str  # message | ephemeral | modal | home
    content: dict[str, Any]  # a message's text and blocks, or the stored view
    channel: str = ""
    ts: str = ""
    number: int = 0  # a channel message's number, for `react`
    closed: bool = False  # a modal that was submitted or cancelled


@dataclass
class _Batch:
    """What one settle changed on the screen, each key once, in first-touched order."""

    touched: dict[str, str] = field(default_factory=dict)  # key -> note
    extra: list[tuple[float, Output]] = field(default_factory=list)


class ShellSession:
    def __init__(
        self,
        settings: Settings,
        *,
        user_id: str = SHELL_USER,
        files_dir: Path | None = None,
        local_redis: bool = True,
    ) -> None:
        self.base_settings = settings
        self.user_id = user_id
        self.emulator = SlackEmulator(team_id=SHELL_TEAM)
        self.bot: Bot | None = None
        self.bot_url = ""
        self.redis: LocalRedis | None = None
        self.cluster_user: str | None = None
        self._files_dir = files_dir
        self._local_redis = local_redis
        self._http: aiohttp.ClientSession | None = None
        self._signing_secret = secrets.token_hex(16)
        self._seen_calls = 0
        self._seen_responses = 0
        self._event_seq = 0
        # The screen: what is shown, by key, and the numbers of their buttons.
        self.shown: dict[str, Shown] = {}
        self.buttons: dict[int, tuple[str, dict[str, Any]]] = {}
        self._next_button = 1
        self._next_message = 1
        # response_url -> the key of the message it was handed out with (a pressed message).
        self._response_origin: dict[str, str] = {}
        # The modal being filled: view id -> block id -> action id -> Slack's state value.
        self.modal_values: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        self.last_raw: list[Output] = []  # every call of the last step, for --json
        # Told how a long step goes (a status line on a terminal); None says nothing.
        self.progress: Callable[[str], None] | None = None
        self._weather_rng = random.Random(f"meowbot-shell-weather:{settings.seed}")
        self._weather_faults: list[tuple[str, str]] = []
        self._sweeping = asyncio.Lock()
        # The button whose confirm dialog is showing: pressing it again confirms.
        self._confirming: tuple[int, str | None] | None = None
        # The thread of the last question asked in plain words: where `reply` goes by default.
        self._asked_thread: str | None = None

    # -- lifecycle

    async def start(self) -> None:
        await self.emulator.start()
        self.emulator.add_channel(SHELL_CHANNEL, "shell")
        overrides: dict[str, Any] = {
            "slack_api_url": self.emulator.api_url,
            "slack_bot_token": SecretStr(self.emulator.bot_token),
            "slack_signing_secret": SecretStr(self._signing_secret),
        }
        base = self.base_settings
        if not base.redis_url and self._local_redis:
            # Alerts and highlights need Redis; a private server runs them for real.
            self.redis = await LocalRedis.start()
            if self.redis is not None:
                overrides["redis_url"] = self.redis.url
        if not base.alert_channel:
            overrides["alert_channel"] = SHELL_CHANNEL
        if not base.admins and self.user_id == SHELL_USER:
            # On a terminal you are the operator: you may drain and silence the simulated
            # fleet. `--user` (or MEOWBOT_ADMINS) tries the refusals.
            overrides["admins"] = SHELL_USER
        self.bot = await create_bot(base.model_copy(update=overrides))
        self.cluster_user = await self._pick_cluster_user()
        self._add_shell_user()
        port = await self.bot.start_http("127.0.0.1", 0)
        self.bot_url = f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}"
        self._http = aiohttp.ClientSession()
        # The notifier runs as in `meowbot run`; the sweeps are the shell's own (run_weather and
        # `sweep`), one at a time; the digest only on demand.
        self.bot.start_background(sweep=False, digest=False)

    async def _pick_cluster_user(self) -> str | None:
        """The simulated user whose jobs `/job-slow` lists for the shell's own user: the owner
        of the oldest running job, so a fresh shell has something to look at at once."""
        assert self.bot is not None
        if self.base_settings.sim_nodes is None or self.user_id != SHELL_USER:
            return None
        if SHELL_USER in self.bot.deps.users.mapping:
            return self.bot.deps.users.mapping[SHELL_USER]
        scheduler = self.bot.deps.triage.scheduler
        if scheduler is None:
            return None
        jobs = await scheduler.jobs()
        running = sorted(
            (j for j in jobs if j.state.value == "running"), key=lambda j: int(j.job_id)
        )
        return running[0].user if running else None

    def _add_shell_user(self) -> None:
        # The bot maps a Slack user to a cluster user by the local part of their email.
        email = f"{self.cluster_user}@{SHELL_EMAIL_DOMAIN}" if self.cluster_user else None
        if self.user_id != SHELL_USER:
            self.emulator.add_user(self.user_id, self.user_name)
        self.emulator.add_user(SHELL_USER, self.cluster_user or "you", email=email)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
        if self.bot is not None:
            await self.bot.close()
        await self.emulator.stop()
        if self.redis is not None:
            self.redis.stop()

    @property
    def user_name(self) -> str:
        """The name Slack sends beside the user id: the emulator's, as set at start."""
        user = self.emulator.workspace.users.get(self.user_id) or {}
        return str(user.get("name") or self.user_id.lower())

    @property
    def files_dir(self) -> Path:
        if self._files_dir is None:
            self._files_dir = Path(tempfile.mkdtemp(prefix="meowbot-files-"))
        self._files_dir.mkdir(parents=True, exist_ok=True)
        return self._files_dir

    # -- sending what Slack sends

    async def _post_signed(
        self, body: str, *, content_type: str = "application/x-www-form-urlencoded"
    ) -> tuple[int, str]:
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
            return resp.status, await resp.text()

    async def _post_event(self, payload: dict[str, Any]) -> list[Output]:
        status, _ = await self._post_signed(json.dumps(payload), content_type="application/json")
        return await self._outputs_after(status)

    async def command(self, line: str) -> list[Output]:
        """Runs `/command text` as Slack would send it; returns what the screen shows."""
        name, _, text = line.strip().partition(" ")
        form = {
            "token": "shell",
            "team_id": SHELL_TEAM,
            "team_domain": "shell",
            "channel_id": SHELL_CHANNEL,
            "channel_name": "shell",
            "user_id": self.user_id,
            "user_name": self.user_name,
            "command": name,
            "text": text.strip(),
            "api_app_id": "A0SHELL",
            "is_enterprise_install": "false",
            "response_url": self.emulator.new_response_url(channel=SHELL_CHANNEL),
            "trigger_id": self.emulator.new_trigger_id(),
        }
        status, _ = await self._post_signed(urllib.parse.urlencode(form))
        return await self._outputs_after(status)

    async def mention(self, text: str) -> list[Output]:
        """Asks in plain words, as a mention in the channel: the bot answers in its thread."""
        payload = self.emulator.mention(SHELL_CHANNEL, self.user_id, text)
        self._asked_thread = str(payload["event"]["ts"])
        return await self._post_event(payload)

    async def reply(self, text: str, number: int | None = None) -> list[Output]:
        """Asks in plain words in a thread, as a mention there: the thread of channel message
        `number`, else of the last question asked in plain words (its answer's), else of the
        newest channel message. The bot reads it as a follow-up of the thread."""
        thread = self.thread_of(number)
        self._asked_thread = thread
        payload = self.emulator.mention(SHELL_CHANNEL, self.user_id, text, thread=thread)
        return await self._post_event(payload)

    def thread_of(self, number: int | None) -> str:
        """The thread ts that a reply to channel message `number` (or the last answer) joins."""
        if number is None and self._asked_thread is not None:
            return self._asked_thread
        messages = [
            s for s in self.shown.values() if s.kind == "message" and s.channel == SHELL_CHANNEL
        ]
        if number is not None:
            messages = [s for s in messages if s.number == number]
            if not messages:
                raise ValueError(f"no message {number} on the screen")
        if not messages:
            raise ValueError("nothing to reply to yet: ask first (@meowbot is gpu-0042 ok?)")
        shown = max(messages, key=lambda s: s.number)
        return str(shown.content.get("thread_ts") or shown.ts)

    async def home(self) -> list[Output]:
        """Opens the App Home tab, as Slack's app_home_opened event does."""
        return await self._post_event(
            self.emulator.event_payload(
                {
                    "type": "app_home_opened",
                    "user": self.user_id,
                    "tab": "home",
                    "channel": "D0SHELL",
                    "event_ts": f"{time.time():.6f}",
                }
            )
        )

    # -- buttons

    def _button(self, number: int) -> tuple[Shown, dict[str, Any]]:
        entry = self.buttons.get(number)
        if entry is None:
            if not self.buttons:
                raise ValueError("no button on the screen yet")
            low, high = min(self.buttons), max(self.buttons)
            raise ValueError(f"no button {number} on the screen (buttons {low} to {high})")
        key, pressed = entry
        shown = self.shown.get(key)
        if shown is None:
            raise ValueError(f"button {number} was on a message that is gone")
        if shown.closed:
            raise ValueError(f"button {number} was on a form that is closed")
        # The message may have been edited since: press what it shows now.
        current = button_targets(shown.content.get("blocks") or [])
        same = [
            t
            for t in current
            if t["action_id"] == pressed["action_id"] and t["value"] == pressed["value"]
        ]
        if not same:
            raise ValueError(
                f"button {number} ({pressed['text']}) is no longer on its message: it changed "
                "since; press one of its new buttons"
            )
        return shown, same[0]

    def cancel_confirm(self) -> None:
        """Anything else typed after a confirm dialog is its Cancel, as a click elsewhere."""
        self._confirming = None

    async def press(self, number: int, choice: str | None = None) -> list[Output]:
        """Presses button N of the screen (or picks `choice` in select or menu N). A button
        that asks first (a `confirm` dialog) asks here too: pressing it again confirms."""
        shown, target = self._button(number)
        if target.get("url"):
            return [Output("notice", {"text": f"button {number} opens {target['url']}"})]
        confirm = target["element"].get("confirm")
        if isinstance(confirm, dict) and self._confirming != (number, choice):
            self._confirming = (number, choice)
            return [Output("notice", {"text": _confirm_text(confirm, number, choice)})]
        self._confirming = None
        action: dict[str, Any] = {
            "type": target.get("type", "button"),
            "action_id": target.get("action_id", ""),
            "block_id": target.get("block_id", ""),
            "action_ts": f"{time.time():.6f}",
        }
        if target["options"] or target["type"] != "button":
            option = _pick(target, choice, number)
            action["selected_option"] = option
            if shown.kind == "modal":
                self._set_value(shown, target, {"type": target["type"], "selected_option": option})
        else:
            action["value"] = target.get("value") or ""
            action["text"] = target["element"].get("text", {"type": "plain_text", "text": ""})
        payload: dict[str, Any] = {
            "type": "block_actions",
            "team": {"id": SHELL_TEAM, "domain": "shell"},
            "user": {"id": self.user_id, "username": self.user_name, "team_id": SHELL_TEAM},
            "api_app_id": "A0SHELL",
            "token": "shell",
            "trigger_id": self.emulator.new_trigger_id(),
            "actions": [action],
        }
        if shown.kind in {"modal", "home"}:
            payload["container"] = {"type": "view", "view_id": shown.content.get("id", "")}
            payload["view"] = self._view_with_state(shown)
        else:
            ephemeral = shown.kind == "ephemeral"
            # A response_url bound to the message: replace_original then edits it in place
            # (an ephemeral one lives on the screen only, and is replaced there).
            url = self.emulator.new_response_url(
                channel=shown.channel, message_ts=None if ephemeral else shown.ts
            )
            self._response_origin[url] = shown.key
            payload["container"] = {
                "type": "message",
                "message_ts": shown.ts,
                "channel_id": shown.channel,
                "is_ephemeral": ephemeral,
            }
            payload["channel"] = {"id": shown.channel, "name": "shell"}
            message = {"type": "message", "ts": shown.ts, **shown.content}
            payload["message"] = message
            payload["response_url"] = url
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        status, _ = await self._post_signed(body)
        return await self._outputs_after(status)

    # -- modals

    def open_modal(self) -> Shown:
        modals = [s for s in self.shown.values() if s.kind == "modal" and not s.closed]
        if not modals:
            raise ValueError("no form is open")
        return modals[-1]

    def inputs(self, modal: Shown) -> list[dict[str, Any]]:
        """The modal's input blocks, numbered from 1 as `fill` takes them."""
        return [
            b
            for b in modal.content.get("blocks") or []
            if b.get("type") == "input" and isinstance(b.get("element"), dict)
        ]

    async def fill(self, field_ref: str, value: str) -> list[Output]:
        """Types `value` into a field of the open form (by number or by its label's start).
        A field that dispatches its action (the playground's Run) tells the bot at once, as
        Slack does, and the form may change with it."""
        modal = self.open_modal()
        fields = self.inputs(modal)
        block = _field(fields, field_ref)
        element = block["element"]
        kind = str(element.get("type"))
        label = _plain_label(block)
        target = {"block_id": block.get("block_id", ""), "action_id": element.get("action_id", "")}
        if kind == "plain_text_input" or kind.endswith("_input"):
            state: dict[str, Any] = {"type": kind, "value": value}
        else:
            options = _options(element)
            if not options:
                raise ValueError(f"{label} takes no typed value")
            chosen = [_match_option(options, part.strip(), label) for part in value.split(",")]
            if kind in {"checkboxes"} or kind.startswith("multi_"):
                state = {"type": kind, "selected_options": chosen}
            else:
                state = {"type": kind, "selected_option": chosen[0]}
        self._set_value(modal, target, state)
        filled = [Output("notice", {"text": f"{label}: {_state_text(state)}"})]
        if not block.get("dispatch_action"):
            return filled
        action = {**target, **state, "action_ts": f"{time.time():.6f}"}
        payload: dict[str, Any] = {
            "type": "block_actions",
            "team": {"id": SHELL_TEAM, "domain": "shell"},
            "user": {"id": self.user_id, "username": self.user_name, "team_id": SHELL_TEAM},
            "api_app_id": "A0SHELL",
            "token": "shell",
            "trigger_id": self.emulator.new_trigger_id(),
            "container": {"type": "view", "view_id": modal.content.get("id", "")},
            "view": self._view_with_state(modal),
            "actions": [action],
        }
        status, _ = await self._post_signed(
            urllib.parse.urlencode({"payload": json.dumps(payload)})
        )
        return filled + await self._outputs_after(status)

    async def submit(self) -> list[Output]:
        """Submits the open form, as its submit button does in Slack."""
        modal = self.open_modal()
        payload = {
            "type": "view_submission",
            "team": {"id": SHELL_TEAM, "domain": "shell"},
            "user": {"id": self.user_id, "username": self.user_name, "team_id": SHELL_TEAM},
            "api_app_id": "A0SHELL",
            "token": "shell",
            "trigger_id": self.emulator.new_trigger_id(),
            "view": self._view_with_state(modal),
            "response_urls": [],
        }
        status, text = await self._post_signed(
            urllib.parse.urlencode({"payload": json.dumps(payload)})
        )
        answer = _json_object(text)
        action = answer.get("response_action")
        notices: list[Output] = []
        if action == "errors":
            errors = answer.get("errors") or {}
            labels = {b.get("block_id"): _plain_label(b) for b in modal.content.get("blocks") or []}
            for block_id, message in errors.items():
                notices.append(
                    Output("notice", {"text": f"{labels.get(block_id, block_id)}: {message}"})
                )
            notices.append(Output("notice", {"text": "the form is still open: fill, then submit"}))
        elif action in {"update", "push"} and isinstance(answer.get("view"), dict):
            view = {**answer["view"], "id": modal.content.get("id", "")}
            if action == "push":
                view["id"] = f"{view['id']}+"
            self._close(modal)
            notices.append(self._show_view(view, "modal"))
        else:
            self._close(modal)  # a plain ack (or clear) closes the form
        outputs = await self._outputs_after(status)
        return notices + outputs

    async def cancel(self) -> list[Output]:
        """Closes the open form without submitting, as its close button does."""
        modal = self.open_modal()
        self._close(modal)
        if not modal.content.get("notify_on_close"):
            return [Output("notice", {"text": "form closed"})]
        payload = {
            "type": "view_closed",
            "team": {"id": SHELL_TEAM, "domain": "shell"},
            "user": {"id": self.user_id, "username": self.user_name, "team_id": SHELL_TEAM},
            "api_app_id": "A0SHELL",
            "token": "shell",
            "view": self._view_with_state(modal),
            "is_cleared": False,
        }
        status, _ = await self._post_signed(
            urllib.parse.urlencode({"payload": json.dumps(payload)})
        )
        return [Output("notice", {"text": "form closed"}), *await self._outputs_after(status)]

    def _close(self, modal: Shown) -> None:
        modal.closed = True
        self.modal_values.pop(str(modal.content.get("id", "")), None)

    def _set_value(self, shown: Shown, target: dict[str, Any], state: dict[str, Any]) -> None:
        values = self.modal_values.setdefault(str(shown.content.get("id", "")), {})
        values.setdefault(str(target["block_id"]), {})[str(target["action_id"])] = state

    def _view_with_state(self, shown: Shown) -> dict[str, Any]:
        view = copy.deepcopy(shown.content)
        view_id = str(view.get("id", ""))
        values: dict[str, dict[str, dict[str, Any]]] = {}
        # What Slack sends for untouched inputs: their initial value, or nothing.
        for block in view.get("blocks") or []:
            element = block.get("element")
            if block.get("type") != "input" or not isinstance(element, dict):
                continue
            kind = str(element.get("type"))
            state: dict[str, Any] = {"type": kind}
            if kind.endswith("_input"):
                state["value"] = element.get("initial_value")
            elif "initial_options" in element:
                state["selected_options"] = element["initial_options"]
            elif kind.startswith("multi_") or kind == "checkboxes":
                state["selected_options"] = []
            else:
                state["selected_option"] = element.get("initial_option")
            block_id = str(block.get("block_id", ""))
            values.setdefault(block_id, {})[str(element.get("action_id", ""))] = state
        for block_id, actions in self.modal_values.get(view_id, {}).items():
            values.setdefault(block_id, {}).update(actions)
        view["state"] = {"values": values}
        return view

    # -- reactions and people's messages

    def message_ts(self, number: int | None) -> tuple[str, str]:
        """(channel, ts) of channel message `number`, or of the newest one."""
        messages = [s for s in self.shown.values() if s.kind == "message"]
        if number is not None:
            messages = [s for s in messages if s.number == number]
            if not messages:
                raise ValueError(f"no message {number} on the screen")
        if not messages:
            raise ValueError("no message to react to yet: say something first (say TEXT)")
        latest = max(messages, key=lambda s: s.number)
        return latest.channel, latest.ts

    def person(self, name: str | None) -> str:
        """The Slack user id of `name` (a user name like bob, or an id); you without a name."""
        if not name:
            return self.user_id
        wanted = name.lstrip("@").lower()
        for user_id, user in self.emulator.workspace.users.items():
            if wanted in {user_id.lower(), str(user.get("name", "")).lower()} and not user.get(
                "is_bot"
            ):
                return user_id
        people = sorted(
            str(u.get("name"))
            for u in self.emulator.workspace.users.values()
            if not u.get("is_bot")
        )
        raise ValueError(f"no person {name!r} here; there are {', '.join(people)}")

    async def say(self, text: str, *, as_user: str | None = None) -> list[Output]:
        """Posts `text` in the channel as you (or as another person), and delivers the message
        event to the bot."""
        user = self.person(as_user)
        ts = self.emulator.workspace.next_ts()
        self.emulator.add_message(SHELL_CHANNEL, ts=ts, text=text, user=user)
        key = f"msg:{SHELL_CHANNEL}:{ts}"
        number = self._next_message
        self._next_message += 1
        self.shown[key] = Shown(
            key, "message", {"text": text}, channel=SHELL_CHANNEL, ts=ts, number=number
        )
        by = "you" if user == self.user_id else self.emulator.workspace.users[user]["name"]
        said = Output("notice", {"text": f"(message {number}, by {by}) {text}"})
        event = {
            "type": "message",
            "channel": SHELL_CHANNEL,
            "channel_type": "channel",
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
        }
        return [said, *await self._post_event(self.emulator.event_payload(event))]

    async def react(
        self, name: str, number: int | None, *, remove: bool = False, as_user: str | None = None
    ) -> list[Output]:
        """Adds (or removes) reaction `name` on message `number` (the newest by default), as
        you or as another person."""
        name = name.strip().strip(":")
        if not name:
            raise ValueError("react takes an emoji name, e.g. react meow_party")
        user = self.person(as_user)
        channel, ts = self.message_ts(number)
        payload = self.emulator.react(channel, ts, user, name, remove=remove)
        msg = self.emulator.message(channel, ts)
        counts = ", ".join(f":{r['name']}: {r['count']}" for r in msg.get("reactions", []))
        note = Output("notice", {"text": f"reactions now: {counts or 'none'}"})
        return [note, *await self._post_event(payload)]

    # -- the bot's own jobs, on demand

    async def digest(self) -> list[Output]:
        """Posts the highlights digest of the last seven days here, as `digest --now` does."""
        assert self.bot is not None
        runner = self.bot.deps.digest
        if runner is None:
            return [Output("notice", {"text": _NEEDS_REDIS.format(what="The digest")})]
        now = runner.hl.clock()
        from bot.highlights.schedule import Week

        week = Week(start=now - timedelta(days=7), end=now, id=f"now-{now:%Y%m%dT%H%M%S}")
        ts = await runner.post_digest(SHELL_TEAM, SHELL_CHANNEL, week, tag=False)
        outputs = await self.settle()
        if ts is None:
            outputs.append(
                Output("notice", {"text": "an empty week (empty_week: skip): nothing posted"})
            )
        return outputs

    async def sweep(self) -> list[Output]:
        """Runs a passive health sweep now; its alerts come as the notifier posts them."""
        assert self.bot is not None
        alerting = self.bot.deps.alerting
        if alerting is None:
            return [Output("notice", {"text": _NEEDS_REDIS.format(what="Channel alerts")})]
        if not alerting.can_sweep:
            text = "no metrics source: a sweep has nothing to read (set PROMETHEUS_URL)"
            return [Output("notice", {"text": text})]
        done = await self._sweep_now()
        # The background notifier posts what changed, one message a second a channel as in
        # Slack: wait until its queue is empty, so the answer to `sweep` is all of it.
        deadline = time.monotonic() + SWEEP_POST_MAX_S
        while await alerting.store.dirty() and time.monotonic() < deadline:
            alerting.wake.set()
            await asyncio.sleep(0.2)
        outputs = await self.settle()
        if done is not None and not outputs:
            outputs.append(Output("notice", {"text": "sweep done: no change to the alerts"}))
        return outputs

    async def _sweep_now(self) -> Any:
        """One sweep at once. The shell is the only replica and runs its own sweeps (one at a
        time), so a sweep asked for by hand need not wait out the interval lock."""
        assert self.bot is not None and self.bot.deps.alerting is not None
        from bot.alerts.runtime import SWEEP_LOCK
        from bot.backends.alert_store import RedisAlertStore

        alerting = self.bot.deps.alerting
        async with self._sweeping:
            store = alerting.store
            if isinstance(store, RedisAlertStore):
                await store.redis.delete(store.locks.lock_key(SWEEP_LOCK))
            return await alerting.sweep_once()

    @property
    def weather_on(self) -> bool:
        """Faults come and go by themselves where sweeps can see them: on the simulated fleet,
        with channel alerts running."""
        assert self.bot is not None
        fleet = getattr(self.bot.deps.triage.metrics, "fleet", None)
        return fleet is not None and self.bot.deps.alerting is not None

    def weather(self) -> str | None:
        """One change of the simulated fleet's weather: a new fault on a random node, or the
        mending of one that came this way earlier. Returns what happened, in words."""
        assert self.bot is not None
        fleet = getattr(self.bot.deps.triage.metrics, "fleet", None)
        if fleet is None:
            return None
        rng = self._weather_rng
        if self._weather_faults and (
            len(self._weather_faults) >= WEATHER_MAX or rng.random() < 0.4
        ):
            node, kind = self._weather_faults.pop(rng.randrange(len(self._weather_faults)))
            fleet.heal(node, kind)
            return f"{kind} on {node} went away"
        node = rng.choice(fleet.nodes)
        kind = rng.choice(WEATHER_KINDS)
        fleet.inject(kind, node, since=fleet.now - timedelta(minutes=2))
        self._weather_faults.append((node, kind))
        return f"{kind} came on {node}"

    async def run_weather(self, stop: asyncio.Event) -> None:
        """The shell's sweeper: the fleet is swept every sweep interval, and once a minute a
        fault comes or goes on the simulated fleet (one change), so alerts open and resolve as
        in a day on a real cluster, slowly enough to read."""
        assert self.bot is not None
        every = self.bot.settings.sweep_interval_s
        changed_at = time.monotonic()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
            if stop.is_set():
                return
            if self.weather_on and time.monotonic() - changed_at >= WEATHER_EVERY_S:
                changed_at = time.monotonic()
                self.weather()
            try:
                await self._sweep_now()
            except Exception as exc:  # the loop outlives one bad sweep, as the bot's own does
                log.warning("sweep failed", extra={"error": str(exc)})

    def fleet_action(self, words: list[str]) -> list[Output]:
        """`fault KIND NODE [GPU]` breaks a simulated node now; `heal NODE [KIND]` mends it."""
        assert self.bot is not None
        fleet = getattr(self.bot.deps.triage.metrics, "fleet", None)
        if fleet is None:
            raise ValueError("fault and heal act on the simulated fleet only")
        verb, args = words[0], words[1:]
        # `heal NODE [KIND]`, `fault KIND NODE ...`: each word checked, with what it may be.
        node_at, kind_at = (0, 1) if verb == "heal" else (1, 0)
        if len(args) > kind_at:
            kinds = sorted(k.value for k in FaultKind if k not in JOB_LEVEL_KINDS)
            if args[kind_at] not in kinds:
                raise ValueError(f"no fault kind {args[kind_at]!r}; the kinds: {', '.join(kinds)}")
        if len(args) > node_at and args[node_at] not in fleet.nodes:
            raise ValueError(
                f"the simulated fleet has no node {args[node_at]} (it has {_span(fleet)})"
            )
        if verb == "heal":
            if not args:
                raise ValueError("heal NODE [KIND], e.g. heal gpu-0042")
            healed = fleet.heal(args[0], args[1] if len(args) > 1 else None)
            text = (
                f"{args[0]} mended: " + ", ".join(sorted({str(f.kind.value) for f in healed}))
                if healed
                else f"{args[0]} had no injected fault to mend"
            )
            return [Output("notice", {"text": text + "; `sweep` to see the alerts follow"})]
        if len(args) < 2:
            raise ValueError(
                "fault KIND NODE [GPU] [key=value...], e.g. fault xid gpu-0042 3 xid=79"
            )
        kind, node = args[0], args[1]
        rest = args[2:]
        gpu = int(rest.pop(0)) if rest and rest[0].isdigit() else None
        # The simulator's own details (xid=79, slowdown=0.3, nic=mlx5_3), numbers as numbers.
        detail: dict[str, Any] = {}
        for word in rest:
            key, sep, value = word.partition("=")
            if not sep:
                raise ValueError(f"{word!r}: details are key=value, e.g. xid=79")
            detail[key] = _number(value)
        # The fleet's clock stands still at its `now`: a fault begun just before it is new.
        since = fleet.now - timedelta(minutes=2)
        try:
            fleet.inject(kind, node, gpu, since=since, **detail)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"cannot inject {kind} on {node}: {exc}") from None
        return [Output("notice", {"text": f"{kind} on {node} from now; `sweep` to see it"})]

    # -- reading what the bot did

    async def _outputs_after(self, status: int) -> list[Output]:
        outputs = await self.settle()
        if status != 200:
            outputs.append(Output("http_status", {"status": status}))
        return outputs

    async def settle(self, quiet_s: float = SETTLE_QUIET_S, *, report: bool = True) -> list[Output]:
        """Waits until the work after the ack is done (nothing in flight, Slack quiet for
        `quiet_s`), then returns what the screen shows."""
        assert self.bot is not None
        started = time.monotonic()
        deadline = started + SETTLE_MAX_S
        last = (-1, -1)
        while time.monotonic() < deadline:
            await asyncio.sleep(quiet_s)
            now = (len(self.emulator.calls), len(self.emulator.responses))
            if self.bot.deps.inflight.count == 0 and now == last:
                break
            last = now
            if report and self.progress and time.monotonic() - started > PROGRESS_AFTER_S:
                # A long answer (a streamed one, say) is shown once, when done; meanwhile
                # say that it is coming, so the terminal does not look stuck.
                edits = sum(
                    1 for c in self.emulator.calls[self._seen_calls :] if c.method == "chat.update"
                )
                waited = time.monotonic() - started
                self.progress(
                    f"the bot is answering… {waited:.0f} s"
                    + (f", {edits} edit{'s' if edits != 1 else ''} so far" if edits else "")
                )
        return self.take_new()

    def pending(self) -> bool:
        """Did the bot do anything since the last look (a background post, say)?"""
        return (
            len(self.emulator.calls) > self._seen_calls
            or len(self.emulator.responses) > self._seen_responses
        )

    def take_new(self) -> list[Output]:
        """Everything the bot did since the last look, as the screen shows it: each message
        or view once, in its final state (a streamed answer is shown when it is done)."""
        raw: list[tuple[float, Output, dict[str, Any]]] = []
        emu = self.emulator
        for call in emu.calls[self._seen_calls :]:
            raw.append((call.at, Output(call.method, call.args), {"ok": call.ok, **call.result}))
        for (url, body), at, went in zip(
            emu.responses[self._seen_responses :],
            emu.responses_at[self._seen_responses :],
            emu.responses_to[self._seen_responses :],
            strict=True,
        ):
            raw.append((at, Output("response_url", body), {"url": url, **went}))
        self._seen_calls = len(emu.calls)
        self._seen_responses = len(emu.responses)
        raw.sort(key=lambda entry: entry[0])
        self.last_raw = [out for _, out, _ in raw]
        batch = _Batch()
        for at, out, result in raw:
            self._apply(out, result, batch, at)
        return self._screen(batch)

    def _apply(self, out: Output, result: dict[str, Any], batch: _Batch, at: float) -> None:
        args = out.args
        if out.method in MESSAGE_METHODS and result.get("ok"):
            channel = str(result.get("channel") or args.get("channel") or "")
            ts = str(result.get("ts") or result.get("message_ts") or "")
            if out.method == "chat.postEphemeral":
                key = f"eph:{ts}"
                self.shown[key] = Shown(key, "ephemeral", _content(args), channel, ts)
                batch.touched.setdefault(key, _where("ephemeral", args))
                return
            key = f"msg:{channel}:{ts}"
            if out.method == "chat.update" and key not in self.shown:
                batch.touched.setdefault(key, "")
            elif out.method == "chat.update":
                batch.touched.setdefault(key, "message updated")
            else:
                batch.touched.setdefault(key, _where("message", args))
            self._track_message(key, channel, ts)
        elif out.method == "response_url":
            self._apply_response(args, result, batch)
        elif out.method in VIEW_METHODS and result.get("ok"):
            view = result.get("view")
            if isinstance(view, dict):
                kind = "home" if out.method == "views.publish" else "modal"
                key = "home" if kind == "home" else f"view:{view.get('id')}"
                was_open = key in self.shown and not self.shown[key].closed
                self.shown.pop(key, None)
                self.shown[key] = Shown(key, kind, view)  # newest last: `open_modal` takes it
                # Opened and filled in within one step, a form is simply shown, as it is.
                note = batch.touched.pop(key, "form updated" if was_open else "")
                batch.touched[key] = note if kind == "modal" else ""
        elif out.method == "files.completeUploadExternal" and result.get("ok"):
            for entry in result.get("files") or []:
                batch.extra.append((at, self._save_file(str(entry.get("id")), args)))

    def _track_message(self, key: str, channel: str, ts: str) -> None:
        try:
            msg = self.emulator.message(channel, ts)
        except Exception:  # gone again by now (deleted): nothing to show
            self.shown.pop(key, None)
            return
        current = self.shown.get(key)
        number = current.number if current else self._next_message
        if current is None and channel.startswith("C"):
            self._next_message += 1
        elif current is None:
            number = 0  # a DM: not a channel message to react to
        self.shown.pop(key, None)  # newest last: the oldest scroll away first
        self.shown[key] = Shown(key, "message", _content(msg), channel, ts, number)

    def _apply_response(self, body: dict[str, Any], went: dict[str, Any], batch: _Batch) -> None:
        origin = self._response_origin.get(str(went.get("url")))
        if body.get("delete_original") and origin:
            self.shown.pop(origin, None)
            batch.touched[origin] = "removed"
            return
        if body.get("replace_original") and origin in self.shown:
            shown = self.shown[origin]
            if shown.kind == "message":
                self._track_message(origin, shown.channel, shown.ts)
            else:
                shown.content = _content(body)
            batch.touched.setdefault(origin, "message updated")
            return
        if not went.get("ts"):
            return
        channel, ts = str(went["channel"]), str(went["ts"])
        if went.get("ephemeral"):
            key = f"eph:{ts}"
            self.shown[key] = Shown(key, "ephemeral", _content(body), channel, ts)
            batch.touched.setdefault(key, "only you can see this")
        else:
            key = f"msg:{channel}:{ts}"
            batch.touched.setdefault(key, "in thread" if body.get("thread_ts") else "")
            self._track_message(key, channel, ts)

    def _screen(self, batch: _Batch) -> list[Output]:
        outputs: list[Output] = []
        for key, note in batch.touched.items():
            shown = self.shown.get(key)
            if note == "removed" or shown is None:
                outputs.append(Output("removed", {"text": "(message removed)"}))
                continue
            if shown.kind in {"modal", "home"}:
                outputs.append(self._show_view(shown.content, shown.kind, note=note))
                continue
            if shown.kind == "message" and shown.channel.startswith("D"):
                note = "in your messages with meowbot" + (f", {note}" if note else "")
            elif shown.number and note != "message updated":
                note = f"message {shown.number}" + (f", {note}" if note else "")
            elif shown.number:
                note = f"message {shown.number} updated"
            outputs.append(self._numbered("message", shown, note))
        outputs.extend(out for _, out in batch.extra)
        self._forget_old()
        return outputs

    def _show_view(self, view: dict[str, Any], kind: str, *, note: str = "") -> Output:
        key = "home" if kind == "home" else f"view:{view.get('id')}"
        shown = self.shown.get(key)
        if shown is None or shown.content is not view:
            shown = Shown(key, kind, view)
            self.shown.pop(key, None)
            self.shown[key] = shown
        out = self._numbered("view", shown, note)
        if kind == "modal" and self.inputs(shown):
            names = [f"{n}: {_plain_label(b)}" for n, b in enumerate(self.inputs(shown), 1)]
            out.args["hint"] = (
                "fill N TEXT to type in a field (" + "; ".join(names) + "), then submit or cancel"
            )
        return out

    def _numbered(self, method: str, shown: Shown, note: str) -> Output:
        start = self._next_button
        for offset, target in enumerate(button_targets(shown.content.get("blocks") or [])):
            self.buttons[start + offset] = (shown.key, target)
            self._next_button += 1
        content = self._with_names(shown.content)
        args = dict(content) if method == "message" else {"view": content}
        return Output(method, args, start=start, note=note)

    def _with_names(self, value: Any) -> Any:
        """A copy for the screen with `<@U123>` as `<@U123|name>`, so a person reads a name
        where Slack's client would show one, not an id."""
        if isinstance(value, dict):
            return {k: self._with_names(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._with_names(v) for v in value]
        if isinstance(value, str) and "<@" in value:
            return _MENTION.sub(self._named, value)
        return value

    def _named(self, match: re.Match[str]) -> str:
        user = self.emulator.workspace.users.get(match.group(1))
        return f"<@{match.group(1)}|{user['name']}>" if user else match.group(0)

    def _forget_old(self) -> None:
        # Old messages scroll away; their buttons stop being pressable with them.
        if len(self.shown) <= RECENT_SHOWN:
            return
        for key in list(self.shown)[: len(self.shown) - RECENT_SHOWN]:
            del self.shown[key]
        self.buttons = {n: e for n, e in self.buttons.items() if e[0] in self.shown}

    def _save_file(self, file_id: str, args: dict[str, Any]) -> Output:
        info = self.emulator.files.get(file_id) or {}
        name = Path(str(info.get("name") or f"{file_id}.bin")).name
        path = self.files_dir / f"{file_id}-{name}"
        path.write_bytes(self.emulator.uploads.get(file_id, b""))
        title = str(info.get("title") or name)
        where = "in thread" if args.get("thread_ts") else ""
        return Output("file", {"path": str(path), "title": title, "where": where})


_NEEDS_REDIS = (
    "{what} keep their state in Redis: set REDIS_URL, or install redis-server and the shell "
    "starts a private one."
)


_MENTION = re.compile(r"<@([UW][A-Z0-9]+)>")


def _content(args: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(args[k]) for k in ("text", "blocks", "thread_ts") if k in args}


def _where(kind: str, args: dict[str, Any]) -> str:
    if kind == "ephemeral":
        return "only you can see this"
    return "in thread" if args.get("thread_ts") else ""


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _plain_label(block: dict[str, Any]) -> str:
    label = block.get("label")
    return str(label.get("text", "")) if isinstance(label, dict) else str(block.get("block_id"))


def _options(element: dict[str, Any]) -> list[dict[str, Any]]:
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    return [o for o in options if isinstance(o, dict)]


def _match_option(options: list[dict[str, Any]], wanted: str, label: str) -> dict[str, Any]:
    texts = [str((o.get("text") or {}).get("text", "")) for o in options]
    if wanted.isdigit() and 1 <= int(wanted) <= len(options):
        return options[int(wanted) - 1]
    low = wanted.lower()
    for option, text in zip(options, texts, strict=True):
        if low in {text.lower(), str(option.get("value", "")).lower()}:
            return option
    starts = [o for o, t in zip(options, texts, strict=True) if t.lower().startswith(low)]
    if len(starts) == 1:
        return starts[0]
    listed = ", ".join(f"{n}: {t}" for n, t in enumerate(texts, 1))
    raise ValueError(f"{label} has no choice {wanted!r}; choose one of {listed}")


def _pick(target: dict[str, Any], choice: str | None, number: int) -> dict[str, Any]:
    options = _options(target["element"])
    if not options:
        raise ValueError(f"menu {number} has no choices to pick")
    if choice is None:
        listed = ", ".join(
            f"{n}: {(o.get('text') or {}).get('text', '')}" for n, o in enumerate(options, 1)
        )
        raise ValueError(f"menu {number}: say which, e.g. press {number} 1 ({listed})")
    return _match_option(options, choice, f"menu {number}")


def _field(fields: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    if not fields:
        raise ValueError("this form has no field to fill")
    if ref.isdigit():
        if 1 <= int(ref) <= len(fields):
            return fields[int(ref) - 1]
        raise ValueError(f"no field {ref}: the form has {len(fields)}")
    matches = [b for b in fields if _plain_label(b).lower().startswith(ref.lower())]
    if len(matches) != 1:
        names = ", ".join(f"{n}: {_plain_label(b)}" for n, b in enumerate(fields, 1))
        raise ValueError(f"which field is {ref!r}? The form has {names}")
    return matches[0]


def _confirm_text(confirm: dict[str, Any], number: int, choice: str | None) -> str:
    def text(key: str, default: str) -> str:
        value = confirm.get(key)
        return str(value.get("text", default)) if isinstance(value, dict) else default

    again = f"press {number}" + (f" {choice}" if choice else "")
    return (
        f"{text('title', 'Are you sure?')}: {text('text', '')}\n"
        f"[{text('confirm', 'Yes')}]: {again} again; [{text('deny', 'Cancel')}]: anything else"
    )


def _span(fleet: Any) -> str:
    names = list(fleet.nodes)
    return f"{names[0]} to {names[-1]}" if names else "none"


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def _state_text(state: dict[str, Any]) -> str:
    if "value" in state:
        return str(state["value"])
    chosen = state.get("selected_options") or [state.get("selected_option")]
    return ", ".join(str((o or {}).get("text", {}).get("text", "")) for o in chosen)
