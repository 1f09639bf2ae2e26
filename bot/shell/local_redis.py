"""A private redis-server for the terminal shell, when REDIS_URL is not set.

Channel alerts and highlights keep their state in Redis (transactions and Lua scripts shared by
replicas); the in-process stand-in cannot run them. A throwaway server on a Unix socket in a
temporary folder, with nothing saved to disk, lets the shell try them with the real store code;
it goes when the shell exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import redis.asyncio as aioredis

from bot.backends.redis_client import close_client, redis_client

START_TIMEOUT_S = 5.0
PR_SET_PDEATHSIG = 1
PREFIX = "meowbot-shell-redis-"


def _shell_alive(folder: Path) -> bool:
    """Whether the shell that made `folder` (its pid is in the name) still runs. A folder of an
    older name is judged by its socket: a live server answers on it."""
    pid = folder.name.removeprefix(PREFIX).partition("-")[0]
    if pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # another user's process
        return True
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(folder / "redis.sock"))
        except OSError:
            return False
    return True


def _remove_stale(tmp: Path) -> None:
    """Folders of shells that were killed outright: their server died with them (see
    `_die_with_parent`) but nobody removed the folder. A shell still running keeps its folder,
    even while its server is starting and has no socket yet."""
    for folder in tmp.glob(f"{PREFIX}*"):
        if not _shell_alive(folder):
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)


def _die_with_parent() -> None:
    """In the child, before exec: a shell killed outright (a closed terminal) takes its Redis
    with it, where the shell's own cleanup never ran."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LocalRedis:
    def __init__(self, folder: Path, process: subprocess.Popen[bytes]) -> None:
        self.folder = folder
        self.process = process

    @property
    def url(self) -> str:
        return f"unix://{self.folder / 'redis.sock'}"

    @classmethod
    async def start(cls) -> LocalRedis | None:
        """Starts redis-server, or returns None when it is not installed or does not start."""
        binary = shutil.which("redis-server")
        if binary is None:
            return None
        _remove_stale(Path(tempfile.gettempdir()))
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        argv = [
            binary,
            "--port",
            "0",  # no TCP listener: nobody else on the machine reaches it
            "--unixsocket",
            str(folder / "redis.sock"),
            "--unixsocketperm",
            "700",
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            str(folder / "redis.log"),
        ]
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # its log is a file: it holds none of the shell's pipes
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        server = cls(folder, process)
        if await server._ready():
            return server
        server.stop()
        return None

    async def _ready(self) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_S
        while loop.time() < deadline and self.process.poll() is None:
            if (self.folder / "redis.sock").exists():
                # No retries: this loop is the waiting, within its own deadline.
                client = redis_client(self.url, retry_budget_s=0)
                try:
                    await client.ping()
                    return True
                except (OSError, aioredis.ConnectionError):
                    pass
                finally:
                    await close_client(client)
            await asyncio.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder)
