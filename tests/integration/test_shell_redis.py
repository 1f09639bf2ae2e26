"""The terminal shell with Redis: its private redis-server, channel alerts from sweeps of the
simulated fleet as faults come and go, reactions that make highlights, and the digest."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.shell.repl import run_one
from bot.shell.session import ShellSession
from tests.conftest import need_service
from tests.unit.test_shell import buttons, screen, shell_settings


@pytest.fixture
async def shell(tmp_path: Path, private_tmp: Path) -> AsyncIterator[ShellSession]:
    need_service("REDIS_URL")  # the test services say redis-server is installed
    # No REDIS_URL given to the shell: it starts its own redis-server, as for a new user.
    session = ShellSession(shell_settings(), files_dir=tmp_path / "files")
    await session.start()
    try:
        yield session
    finally:
        await session.close()


def alert_of(text: str, title: str) -> str:
    """The part of the screen from the message titled `title` to the next message."""
    start = text.index(title)
    rest = text[start:]
    end = rest.find("\n(message ", 1)
    return rest if end < 0 else rest[:end]


async def test_the_shell_runs_its_own_redis_and_stops_it(tmp_path: Path, private_tmp: Path) -> None:
    need_service("REDIS_URL")
    session = ShellSession(shell_settings(), files_dir=tmp_path)
    await session.start()
    assert session.redis is not None
    assert session.bot is not None and session.bot.deps.store.name == "redis"
    assert session.bot.deps.alerting is not None and session.bot.deps.highlights.hl is not None
    folder = session.redis.folder
    assert folder.parent == private_tmp and (folder / "redis.sock").exists()
    await session.close()
    assert session.redis.process.poll() is not None
    assert not folder.exists()


async def test_a_fault_opens_an_alert_and_its_mending_resolves_it(shell: ShellSession) -> None:
    await run_one(shell, "sweep")  # what the fleet had already
    assert "on gpu-0042" not in screen(await run_one(shell, "sweep"))
    await run_one(shell, "fault xid gpu-0042 3 xid=79")
    opened = screen(await run_one(shell, "sweep"))
    # The sweep names the Xid by its code: gpu-0042 is in the Xid 79 event's message.
    alert = alert_of(opened, "Xid 79 on")
    assert "gpu-0042" in alert
    number = re.search(r"\(message (\d+)(?: updated)?\)\n.*Xid 79 on", opened)
    assert number is not None, opened
    await run_one(shell, "heal gpu-0042")
    resolved = await run_one(shell, "sweep")
    updated = [o for o in resolved if o.note == f"message {number.group(1)} updated"]
    assert len(updated) == 1
    shown = screen(updated)
    assert "Resolved on: `gpu-0042`" in shown or "RESOLVED: Xid 79" in shown


async def test_a_button_of_an_earlier_alert_is_pressed(shell: ShellSession) -> None:
    await run_one(shell, "fault xid gpu-0042 3 xid=79")
    await run_one(shell, "fault xid gpu-0043 2 xid=79")
    text = screen(await run_one(shell, "sweep"))
    # Both are one Xid 79 event (with any Xid 79 the fleet already had).
    first = buttons(alert_of(text, "Xid 79 on"))
    assert {"Drain gpu-0042", "Drain gpu-0043"} <= set(first.values())
    drain = next(n for n, label in first.items() if label == "Drain gpu-0042")
    # The alert's Drain asks first, as its confirm dialog does in Slack.
    asked = screen(await run_one(shell, f"press {drain}"))
    assert f"press {drain} again" in asked
    assert shell.emulator.calls_to("chat.postEphemeral") == []
    pressed = screen(await run_one(shell, f"press {drain}"))
    assert "HTTP" not in pressed and "again" not in pressed
    assert "gpu-0042" in pressed


async def test_reactions_make_a_highlight_the_digest_shows(shell: ShellSession) -> None:
    said = screen(await run_one(shell, "say --as bob the 7B run beat the baseline!"))
    assert said.startswith("(message 1, by bob)")
    assert "reactions now: :meow_party: 1" in screen(await run_one(shell, "react meow_party"))
    digest = screen(await run_one(shell, "digest"))
    assert "the 7B run beat the baseline!" in digest
    assert "bob" in digest
    await run_one(shell, "unreact meow_party 1")
    assert "the 7B run beat the baseline!" not in screen(await run_one(shell, "digest"))


async def test_own_reactions_do_not_make_a_highlight(shell: ShellSession) -> None:
    await run_one(shell, "say my own run finished")
    await run_one(shell, "react meow_party")
    assert "my own run finished" not in screen(await run_one(shell, "digest"))


async def test_weather_faults_come_and_go_by_themselves(shell: ShellSession) -> None:
    """The simulated weather: a change brings a fault a sweep alerts on, and a later change
    takes it away, which the next sweep resolves in the same message."""
    await run_one(shell, "sweep")  # what the fleet had already
    came = shell.weather()
    assert came is not None and " came on " in came
    kind, node = came.split(" came on ")
    opened = screen(await run_one(shell, "sweep"))
    assert node in opened and kind in opened
    changes = []
    while any(n == node for n, _ in shell._weather_faults):
        assert len(changes) < 50, "the weather never took the fault away"
        changes.append(shell.weather())
    assert f"{kind} on {node} went away" in changes
    resolved = screen(await run_one(shell, "sweep"))
    # Alerts name a kind in words with its code beside it.
    # Its message is resolved, or (an event of several nodes) names it among the resolved.
    assert "RESOLVED: " in resolved or f"Resolved on: `{node}`" in resolved
    assert f"({kind})" in resolved and node in resolved
