"""redis-server with AOF, for the restart tests."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .common import free_port, stop, wait_port

PACKAGES = {"redis-server": "redis-server"}


def redis_command(port: int, data: Path) -> list[str]:
    """A redis-server on loopback `port` that keeps its append-only file in `data`, so a
    restarted server comes back with what it had."""
    return [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--dir",
        str(data),
        "--daemonize",
        "no",
    ]


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    port = free_port()
    data = tmp
    cmd = [*redis_command(port, data), "--logfile", str(tmp / "redis.log")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, 10, proc, "redis-server")
        # The restart tests need to know how to bring this exact server back.
        yield {
            "REDIS_URL": f"redis://127.0.0.1:{port}/0",
            "MEOWBOT_TEST_REDIS_CMD": "\x1f".join(cmd),
        }
    finally:
        stop(proc)
