#!/usr/bin/env python3
"""Runs a command (the test suite) with real services started on loopback, then stops them.

`make test` calls this: it installs what is missing (Debian packages with apt-get when we are
root, otherwise it says how), starts each service on a free port in a temporary folder,
exports where they are (REDIS_URL, ...), runs the command, stops everything and exits with
the command's code. Standard library only: it runs before the venv matters.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# Debian package -> a binary it provides.
PACKAGES = {"redis-server": "redis-server"}


def say(msg: str) -> None:
    print(f"testenv: {msg}", file=sys.stderr, flush=True)


def ensure_packages() -> None:
    missing = [pkg for pkg, binary in PACKAGES.items() if shutil.which(binary) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        names = " ".join(missing)
        sys.exit(f"testenv: missing {names}; run: sudo apt-get install -y {names}")
    say(f"installing {' '.join(missing)} with apt-get")
    # Packages' init scripts must not start daemons on their default ports.
    rc_d = Path("/usr/sbin/policy-rc.d")
    if not rc_d.exists():
        rc_d.write_text("#!/bin/sh\nexit 101\n")
        rc_d.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        check=True,
        env=env,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes], name: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"testenv: {name} exited with {proc.returncode} at start-up")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    sys.exit(f"testenv: {name} did not listen on 127.0.0.1:{port} within {timeout_s} s")


@contextlib.contextmanager
def redis(tmp: Path) -> Iterator[dict[str, str]]:
    port = free_port()
    data = tmp / "redis"
    data.mkdir()
    cmd = [
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
        "--logfile",
        str(tmp / "redis.log"),
    ]
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


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        sys.exit("usage: testenv.py -- COMMAND [ARGS...]")
    ensure_packages()
    with (
        tempfile.TemporaryDirectory(prefix="meowbot-test-") as tmp_s,
        contextlib.ExitStack() as stack,
    ):
        tmp = Path(tmp_s)
        env = dict(os.environ)
        env.update(stack.enter_context(redis(tmp)))
        env["MEOWBOT_TEST_TMP"] = str(tmp)
        say(
            "services up: " + ", ".join(k for k in env if k.endswith("_URL") and k in {"REDIS_URL"})
        )
        code = subprocess.call(argv, env=env)
    # pytest's 5 means "no tests ran": never a pass.
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
