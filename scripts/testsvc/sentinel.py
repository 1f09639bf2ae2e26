"""A Redis primary, one replica and three Sentinels on loopback, for the failover test.

Each process has its own free port and its own folder (a Sentinel rewrites its config file as
it learns). `start` returns once the replica is in sync and every Sentinel sees the replica and
the two other Sentinels, so that killing the primary leads to a failover and not to a wait.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .common import free_port, stop

SERVICE = "mymaster"
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
READY_TIMEOUT_S = 30.0


def _server(port: int, data: Path, *extra: str) -> list[str]:
    # No persistence: what survives a failover is what reached the replica, nothing else.
    return [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(data),
        "--logfile",
        str(data / "redis.log"),
        "--daemonize",
        "no",
        *extra,
    ]


def _sentinel_conf(port: int, data: Path, primary_port: int) -> Path:
    conf = data / "sentinel.conf"
    conf.write_text(
        f"port {port}\n"
        "bind 127.0.0.1\n"
        f"dir {data}\n"
        f"logfile {data / 'sentinel.log'}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} {QUORUM}\n"
        f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
        f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
        f"sentinel parallel-syncs {SERVICE} 1\n"
    )
    return conf


def ask(port: int, *command: str, timeout_s: float = 2.0) -> str:
    """One command by RESP over a plain socket; the reply as text (errors included)."""
    parts = [f"*{len(command)}\r\n"] + [f"${len(c.encode())}\r\n{c}\r\n" for c in command]
    with socket.create_connection(("127.0.0.1", port), timeout_s) as s:
        s.sendall("".join(parts).encode())
        s.settimeout(timeout_s)
        chunks = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if _complete(b"".join(chunks)):
                break
        return b"".join(chunks).decode(errors="replace")


def _complete(reply: bytes) -> bool:
    # Good enough for the replies read here: one line, or a bulk string read to its end.
    if reply[:1] in (b"+", b"-", b":"):
        return reply.endswith(b"\r\n")
    if reply[:1] == b"$":
        head, _, body = reply.partition(b"\r\n")
        return len(body) >= int(head[1:]) + 2
    return reply.endswith(b"\r\n")  # arrays: the callers read short flat ones


@dataclass
class SentinelSet:
    primary_port: int
    replica_port: int
    sentinel_ports: list[int]
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def kill_primary(self) -> float:
        """SIGKILL to the primary: no goodbye to its replica or clients. Returns when (the
        monotonic clock) it was killed."""
        return self.kill(self.primary_port)

    def kill(self, port: int) -> float:
        proc = self.procs[port]
        at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        return at

    def primary_named_by_sentinels(self) -> int | None:
        """The port the Sentinels agree on as primary, or None while they do not."""
        seen = set()
        for port in self.sentinel_ports:
            with contextlib.suppress(OSError):
                reply = ask(port, "SENTINEL", "get-master-addr-by-name", SERVICE)
                seen.add(reply.split("\r\n")[-2] if reply.startswith("*2") else "")
        return int(next(iter(seen))) if len(seen) == 1 and "" not in seen else None

    def _ready(self) -> bool:
        try:
            info = ask(self.replica_port, "INFO", "replication")
            if "master_link_status:up" not in info:
                return False
            for port in self.sentinel_ports:
                state = ask(port, "SENTINEL", "master", SERVICE)
                fields = state.split("\r\n")
                values = dict(zip(fields[2::4], fields[4::4], strict=False))
                if values.get("num-slaves") != "1" or values.get("num-other-sentinels") != "2":
                    return False
        except (OSError, ValueError):
            return False
        return True


def _wait_listening(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process on {port} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port}")


@contextlib.contextmanager
def start(tmp: Path) -> Iterator[SentinelSet]:
    """Starts the five processes in folders under `tmp`; stops every one of them on the way
    out, whatever happened."""
    ports = [free_port() for _ in range(5)]
    if len(set(ports)) != 5:
        raise RuntimeError("free_port gave the same port twice")
    s = SentinelSet(ports[0], ports[1], ports[2:])
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        for name, port, extra in (
            ("primary", s.primary_port, ()),
            ("replica", s.replica_port, ("--replicaof", "127.0.0.1", str(s.primary_port))),
        ):
            data = tmp / name
            data.mkdir()
            proc = subprocess.Popen(
                _server(port, data, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            s.procs[port] = proc
            _wait_listening(port, proc, deadline)
        for i, port in enumerate(s.sentinel_ports):
            data = tmp / f"sentinel{i}"
            data.mkdir()
            conf = _sentinel_conf(port, data, s.primary_port)
            proc = subprocess.Popen(
                ["redis-server", str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            s.procs[port] = proc
            _wait_listening(port, proc, deadline)
        while not s._ready():
            if time.monotonic() > deadline:
                raise TimeoutError("the Sentinels did not see the replica and each other")
            time.sleep(0.1)
        yield s
    finally:
        for proc in s.procs.values():
            stop(proc)
