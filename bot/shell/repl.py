"""The interactive terminal: line editing and history (readline), rendering, `press N`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from bot.commands import COMMANDS
from bot.config import Settings
from bot.render.terminal import render_terminal, render_view
from bot.shell.session import Output, ShellSession

PROMPT = "meowbot> "
HISTORY_FILE = Path(os.environ.get("MEOWBOT_HISTORY", "~/.meowbot_history")).expanduser()
SHOWN_AS_MESSAGE = {"chat.postMessage", "chat.postEphemeral", "chat.update", "response_url"}
SHOWN_AS_VIEW = {"views.open", "views.update", "views.push", "views.publish"}

SHELL_HELP = """Type slash commands as in Slack, for example /node-health help.
  press N      press button N of the last message or view
  home         open the App Home tab
  help         this text; commands: {commands}
  quit         leave (or Ctrl-D)"""


def render_output(out: Output, *, color: bool) -> str | None:
    """What a person sees for one thing the bot did; None for plumbing (auth.test...)."""
    args = out.args
    if out.method in SHOWN_AS_MESSAGE:
        if args.get("delete_original"):
            return _dim("(message removed)", color)
        where = ""
        if out.method == "chat.postEphemeral" or args.get("response_type") == "ephemeral":
            where = "only you can see this"
        elif out.method == "chat.update" or args.get("replace_original"):
            where = "message updated"
        elif args.get("thread_ts"):
            where = "in thread"
        body = render_terminal(args.get("blocks") or [], str(args.get("text", "")), color=color)
        return (_dim(f"({where})", color) + "\n" if where else "") + body
    if out.method in SHOWN_AS_VIEW:
        view = args.get("view")
        return str(render_view(view, color=color)) if isinstance(view, dict) else None
    if out.method == "files.completeUploadExternal":
        files = args.get("files") or []
        names = ", ".join(str(f.get("title") or f.get("id")) for f in files if isinstance(f, dict))
        return _dim(f"[file uploaded: {names}]", color)
    if out.method == "http_status":
        return f"Slack would show an error: the bot answered HTTP {args.get('status')}."
    return None


def _dim(text: str, color: bool) -> str:
    return f"\x1b[2m{text}\x1b[0m" if color else text


def _print_outputs(outputs: list[Output], *, as_json: bool, color: bool, stream: TextIO) -> None:
    for out in outputs:
        if as_json:
            print(out.as_json(), file=stream)
            continue
        text = render_output(out, color=color)
        if text:
            print(text, file=stream)
    stream.flush()


async def run_one(session: ShellSession, line: str) -> list[Output]:
    line = line.strip()
    if line == "home":
        return await session.home()
    if line.startswith("press"):
        _, _, num = line.partition(" ")
        if not num.strip().isdigit():
            raise ValueError("press takes a button number, e.g. press 1")
        return await session.press(int(num))
    return await session.command(line)


async def run_repl(
    settings: Settings, *, command: str | None, as_json: bool, user: str | None
) -> int:
    color = sys.stdout.isatty() and not as_json and "NO_COLOR" not in os.environ
    session = ShellSession(settings, **({"user_id": user} if user else {}))
    await session.start()
    try:
        if command is not None:
            if not command.strip().startswith("/"):
                print(
                    'meowbot: -c takes a slash command, e.g. -c "/node-health help"',
                    file=sys.stderr,
                )
                return 2
            outputs = await run_one(session, command)
            _print_outputs(outputs, as_json=as_json, color=color, stream=sys.stdout)
            return 1 if any(o.method == "http_status" for o in outputs) else 0
        return await _interactive(session, as_json=as_json, color=color)
    finally:
        await session.close()


async def _interactive(session: ShellSession, *, as_json: bool, color: bool) -> int:
    readline: Any = None
    with contextlib.suppress(ImportError):
        import readline

        with contextlib.suppress(OSError):
            readline.read_history_file(HISTORY_FILE)
    assert session.bot is not None
    store = session.bot.deps.store.name
    if store != "redis":
        print(_dim("state: in-process stand-in, nothing is shared or kept (set REDIS_URL)", color))
    print(SHELL_HELP.format(commands=" ".join(c.name for c in COMMANDS)))
    loop = asyncio.get_running_loop()
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
            if not (line.startswith(("/", "press")) or line == "home"):
                print("Type a slash command (/node-health help), press N, help or quit.")
                continue
            try:
                outputs = await run_one(session, line)
            except ValueError as exc:
                print(str(exc))
                continue
            _print_outputs(outputs, as_json=as_json, color=color, stream=sys.stdout)
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(HISTORY_FILE)
