"""The interactive terminal: line editing and history (readline), rendering, the shell's verbs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from bot.config import Settings
from bot.shell.session import Output, ShellSession
from bot.shell.terminal import render_terminal, render_view
from handlers.commands import COMMANDS

PROMPT = "meowbot> "
HISTORY_FILE = Path(os.environ.get("MEOWBOT_HISTORY", "~/.meowbot_history")).expanduser()
# How often the idle shell looks for what the bot posted on its own (alerts, say).
BACKGROUND_POLL_S = 1.0
BACKGROUND_QUIET_S = 1.5

SHELL_HELP = """Type slash commands as in Slack, for example /node-health help.
  @meowbot TEXT      ask in plain words, as a mention (e.g. @meowbot is gpu-0042 ok?)
  reply [M] TEXT     answer in the thread of the last answer (or of message M), as a
                     mention there: a follow-up (reply what about its neighbours?)
  press N [CHOICE]   press button N (buttons are numbered across the screen; a menu takes a
                     choice: press 4 2)
  fill N TEXT        type TEXT into field N of the open form; submit, cancel
  say TEXT           post TEXT in the channel as you (say --as bob TEXT: as bob)
  react EMOJI [M]    react to message M (the newest by default); unreact EMOJI [M];
                     --as bob before EMOJI reacts as bob
  home               open the App Home tab
  sweep              run a health sweep of the fleet now (channel alerts follow)
  fault KIND NODE [GPU] [key=value], heal NODE [KIND]
                     break or mend a simulated node (e.g. fault xid gpu-0042 3 xid=79);
                     faults also come and go by themselves, one change a sweep interval
  digest             post the highlights digest of the last 7 days here
  help               this text; commands: {commands}
  quit               leave (or Ctrl-D)"""

MENTION = "@meowbot"
VERBS = (
    "reply",
    "press",
    "fill",
    "submit",
    "cancel",
    "say",
    "react",
    "unreact",
    "home",
    "sweep",
    "fault",
    "heal",
    "digest",
)


def render_output(out: Output, *, color: bool) -> str | None:
    """What a person sees for one thing on the screen; None for what shows nothing."""
    args = out.args
    note = _dim(f"({out.note})", color) + "\n" if out.note else ""
    if out.method == "message":
        body = render_terminal(
            args.get("blocks") or [], str(args.get("text", "")), color=color, start=out.start
        )
        return note + body
    if out.method == "view":
        view = args.get("view")
        if not isinstance(view, dict):
            return None
        text = note + render_view(view, color=color, start=out.start)
        hint = args.get("hint")
        return text + ("\n" + _dim(str(hint), color) if hint else "")
    if out.method == "removed":
        return _dim("(message removed)", color)
    if out.method == "file":
        where = " in thread" if args.get("where") else ""
        return _dim(f"[chart{where}: {args.get('title')}] saved to {args.get('path')}", color)
    if out.method == "notice":
        return _dim(str(args.get("text", "")), color)
    if out.method == "http_status":
        return f"Slack would show an error: the bot answered HTTP {args.get('status')}."
    return None


def _dim(text: str, color: bool) -> str:
    return f"\x1b[2m{text}\x1b[0m" if color else text


def print_outputs(
    session: ShellSession, outputs: list[Output], *, as_json: bool, color: bool, stream: TextIO
) -> None:
    if as_json:
        # Every Web API call and response_url post, as the bot made them.
        for out in session.last_raw:
            print(out.as_json(), file=stream)
        session.last_raw = []
        for out in outputs:
            if out.method in {"notice", "file", "http_status"}:
                print(out.as_json(), file=stream)
        stream.flush()
        return
    for out in outputs:
        text = render_output(out, color=color)
        if text:
            print(text, file=stream)
    stream.flush()


def is_shell_line(line: str) -> bool:
    return line.startswith(("/", MENTION)) or line.split(" ", 1)[0] in VERBS


async def run_one(session: ShellSession, line: str) -> list[Output]:
    """One line typed at the shell; ValueError says what was wrong with it."""
    line = line.strip()
    if line.startswith("/"):
        return await session.command(line)
    if line.startswith(MENTION):
        return await session.mention(line.removeprefix(MENTION).strip())
    verb, _, rest = line.partition(" ")
    rest = rest.strip()
    if verb == "home":
        return await session.home()
    if verb == "reply":
        first, _, text = rest.partition(" ")
        if first.isdigit() and text.strip():
            return await session.reply(text.strip(), int(first))
        if not rest:
            raise ValueError("reply takes the text, e.g. reply and yesterday? (or reply 3 TEXT)")
        return await session.reply(rest)
    if verb == "press":
        words = rest.split(None, 1)
        if not words or not words[0].isdigit():
            raise ValueError("press takes a button number, e.g. press 1")
        return await session.press(int(words[0]), words[1] if len(words) > 1 else None)
    if verb == "fill":
        field, _, text = rest.partition(" ")
        if not field:
            raise ValueError("fill takes a field and its text, e.g. fill 1 /node-health gpu-0042")
        return await session.fill(field, text.strip())
    if verb == "submit":
        return await session.submit()
    if verb == "cancel":
        return await session.cancel()
    if verb == "say":
        as_user, rest = _as_user(rest)
        if not rest:
            raise ValueError("say takes the text to post, e.g. say loss is down to 2.1")
        return await session.say(rest, as_user=as_user)
    if verb in {"react", "unreact"}:
        as_user, rest = _as_user(rest)
        words = rest.split()
        if not words or len(words) > 2 or (len(words) == 2 and not words[1].isdigit()):
            raise ValueError(f"{verb} takes an emoji and a message number: {verb} meow_party 2")
        number = int(words[1]) if len(words) == 2 else None
        return await session.react(words[0], number, remove=verb == "unreact", as_user=as_user)
    if verb == "sweep":
        return await session.sweep()
    if verb == "digest":
        return await session.digest()
    if verb in {"fault", "heal"}:
        return session.fleet_action([verb, *shlex.split(rest)])
    raise ValueError(f"unknown: {line} (type help)")


def _as_user(rest: str) -> tuple[str | None, str]:
    """`--as bob rest...` -> ("bob", "rest..."): a verb done by another person."""
    if rest.startswith("--as "):
        _, name, tail = [*rest.split(None, 2), ""][:3]
        return name, tail
    return None, rest


async def run_repl(
    settings: Settings, *, command: str | None, as_json: bool, user: str | None
) -> int:
    color = sys.stdout.isatty() and not as_json and "NO_COLOR" not in os.environ
    session = ShellSession(settings, user_id=user) if user else ShellSession(settings)
    await session.start()
    try:
        if command is not None:
            if not is_shell_line(command.strip()):
                print(
                    'meowbot: -c takes a slash command or a shell word, e.g. -c "/node-health '
                    'help" or -c home',
                    file=sys.stderr,
                )
                return 2
            try:
                outputs = await run_one(session, command)
            except ValueError as exc:
                print(f"meowbot: {exc}", file=sys.stderr)
                return 2
            print_outputs(session, outputs, as_json=as_json, color=color, stream=sys.stdout)
            return 1 if any(o.method == "http_status" for o in outputs) else 0
        return await _interactive(session, as_json=as_json, color=color)
    finally:
        await session.close()


class _StatusLine:
    """One dim line that rewrites itself in place while a step runs, erased before the
    answer is printed."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def show(self, text: str) -> None:
        self.stream.write("\r\x1b[2K" + _dim(text, True))
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False


def _banner(session: ShellSession, color: bool) -> list[str]:
    assert session.bot is not None
    lines = []
    store = session.bot.deps.store.name
    if session.redis is not None:
        lines.append("state: a private Redis for this shell, gone when it exits")
    elif store != "redis":
        lines.append(
            "state: in-process stand-in, nothing is shared or kept; channel alerts and "
            "highlights need Redis (set REDIS_URL, or install redis-server)"
        )
    if session.cluster_user:
        lines.append(
            f"you are {session.cluster_user} on the simulated cluster: /job-slow lists your jobs"
        )
    return [_dim(line, color) for line in lines]


async def _interactive(session: ShellSession, *, as_json: bool, color: bool) -> int:
    readline: Any = None
    with contextlib.suppress(ImportError):
        import readline

        with contextlib.suppress(OSError):
            readline.read_history_file(HISTORY_FILE)
    for line in _banner(session, color):
        print(line)
    print(SHELL_HELP.format(commands=" ".join(c.name for c in COMMANDS)))
    loop = asyncio.get_running_loop()
    status = _StatusLine(sys.stdout) if sys.stdout.isatty() and not as_json else None
    session.progress = status.show if status is not None else None
    # One step at a time: a command's answers are its own, not the background look's.
    turn = asyncio.Lock()
    stop = asyncio.Event()

    async def background() -> None:
        # Alerts and other posts the bot makes on its own show up between commands.
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), BACKGROUND_POLL_S)
            if turn.locked() or not session.pending():
                continue
            async with turn:
                # The notifier posts one message a second: wait for a lull, so a burst of
                # alerts is printed under one heading.
                outputs = await session.settle(quiet_s=BACKGROUND_QUIET_S, report=False)
                if outputs:
                    print("\n" + _dim("(posted meanwhile)", color))
                    print_outputs(session, outputs, as_json=as_json, color=color, stream=sys.stdout)
                    print(PROMPT, end="", flush=True)

    poller = asyncio.create_task(background())
    weather = (
        asyncio.create_task(session.run_weather(stop))
        if session.bot is not None and session.bot.deps.alerting is not None
        else None
    )
    try:
        while True:
            try:
                # input() blocks: run it off the loop so the bot keeps serving meanwhile.
                line = await loop.run_in_executor(None, input, PROMPT)
            except (EOFError, KeyboardInterrupt):
                print()
                return 0
            line = line.strip()
            if not line:
                continue
            if line in {"quit", "exit"}:
                return 0
            if line in {"help", "?"}:
                print(SHELL_HELP.format(commands=" ".join(c.name for c in COMMANDS)))
                continue
            if not is_shell_line(line):
                print(
                    "Type a slash command (/node-health help), @meowbot and a question, "
                    "a shell verb, help or quit."
                )
                continue
            async with turn:
                if not line.startswith("press"):
                    session.cancel_confirm()
                try:
                    outputs = await run_one(session, line)
                except ValueError as exc:
                    print(str(exc))
                    continue
                finally:
                    if status is not None:
                        status.clear()
                print_outputs(session, outputs, as_json=as_json, color=color, stream=sys.stdout)
    finally:
        stop.set()
        await poller
        if weather is not None:
            await weather
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(HISTORY_FILE)
