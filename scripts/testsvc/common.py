"""Helpers shared by the service starters."""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_LASTING: set[int] = set()


def lasting_port() -> int:
    """A loopback port free now and below the kernel's ephemeral range, for a server that
    listens on it only later (the Alertmanager webhooks' replicas, a Redis restarted): a
    port from `free_port` is in that range, where any outgoing connection meanwhile may take
    it as its own local port, and the later listen fails with EADDRINUSE."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        port = random.randrange(10_000, max(low, 10_001))
        if port in _LASTING:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _LASTING.add(port)
        return port


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None, name: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            sys.exit(f"testenv: {name} exited with {proc.returncode} at start-up")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    sys.exit(f"testenv: {name} did not listen on 127.0.0.1:{port} within {timeout_s} s")


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def say(service: str, msg: str) -> None:
    print(f"testenv: {service}: {msg}", file=sys.stderr, flush=True)


def fail(service: str, msg: str, logs: Sequence[Path] = ()) -> NoReturn:
    """Stops the test run with the reason and the end of each log that explains it."""
    for log in logs:
        if log.exists():
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"--- {log} (last lines)\n" + "\n".join(tail), file=sys.stderr)
    sys.exit(f"testenv: {service}: {msg}")
