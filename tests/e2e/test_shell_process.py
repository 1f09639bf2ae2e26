"""`meowbot shell` as a process: its private redis-server lives and dies with it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bot.shell.local_redis import PREFIX, _remove_stale
from tests.conftest import need_service
from tests.e2e.test_process import clean_env


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_killed_shell_takes_its_redis_with_it(private_tmp: Path) -> None:
    need_service("REDIS_URL")  # the test services say redis-server is installed
    env = {**clean_env(), "MEOWBOT_HISTORY": os.devnull}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "shell",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    redis: list[int] = []
    try:
        assert proc.stdout is not None
        first = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert b"a private Redis for this shell" in first
        redis = [p for p in children(proc.pid) if b"redis-server" in _cmdline(p)]
        assert len(redis) == 1
        proc.send_signal(signal.SIGKILL)  # no cleanup of its own can run
        deadline = time.monotonic() + 10
        while alive(redis[0]):
            assert time.monotonic() < deadline, "redis-server outlived the shell"
            await asyncio.sleep(0.1)
        await asyncio.wait_for(proc.wait(), 10)
        # Its folder is left behind; the next shell clears it.
        folders = {p.name for p in private_tmp.glob(f"{PREFIX}*")}
        assert len(folders) == 1
        await _next_shell_clears(private_tmp, folders)
    finally:
        for pid in redis:  # when the test failed: the server it found, by its id
            if alive(pid):
                os.kill(pid, signal.SIGTERM)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def _next_shell_clears(tmp: Path, folders: set[str]) -> None:
    env = {**clean_env(), "MEOWBOT_HISTORY": os.devnull}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "shell",
        "-c",
        "/node-health help",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await asyncio.wait_for(proc.communicate(), 30)
    left = {p.name for p in tmp.glob(f"{PREFIX}*")}
    assert not folders & left


def test_a_starting_shells_folder_is_kept_and_a_dead_ones_cleared(private_tmp: Path) -> None:
    # A shell that has just made its folder (its server has no socket yet) and one that died.
    starting = private_tmp / f"{PREFIX}{os.getpid()}-abc"
    starting.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True, text=True)  # fmt: skip
    gone = private_tmp / f"{PREFIX}{dead.stdout.strip()}-def"
    gone.mkdir()
    _remove_stale(private_tmp)
    assert starting.exists() and not gone.exists()
