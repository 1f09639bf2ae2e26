"""Shared fixtures: the real services started by scripts/testenv.py, found through the env.

Outside `make test` a test needing a service is skipped with the reason; with CI=true it fails
instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from scripts.testsvc.common import lasting_port
from scripts.testsvc.redis import redis_command

IN_CI = os.environ.get("CI", "").lower() == "true"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The unit tests run first and the tests of the real kube-apiserver last. Prometheus
    comes up while the unit tests, which need no service, run; on a fresh machine
    kube-apiserver is built in the background (scripts/testsvc/kube.py, about 3.5 minutes on
    two cores) while every other test runs, so they find each ready instead of waiting.
    Under `make test` the unit tests run in a process of their own beside the others
    (scripts/test_workers.py)."""
    items.sort(key=lambda item: (item.path.name in KUBE_TEST_FILES, "unit" not in item.path.parts))


KUBE_TEST_FILES = frozenset(
    {
        "test_kubernetes.py",
        "test_kubernetes_both.py",
        "test_action_matrix.py",
        "test_validation_kube.py",  # the integration test and the e2e one
        "test_deploy_kubernetes.py",
    }
)


def need_service(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        msg = f"{var} is not set: run the tests with `make test`, which starts the service"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    status = ENGINE_STATUS.get(var)
    if status is not None:
        # Under `make test` Prometheus (and VictoriaMetrics after it) comes up while the first
        # tests run, and hands over before its live history is long enough for the medians
        # the tests read (scripts/testsvc/prometheus.py): the first reader waits for both.
        live_at = _engine_ready(var, os.environ.get(status))
        time.sleep(max(0.0, live_at - time.time()))
    return value


ENGINE_STATUS = {
    "PROMETHEUS_URL": "MEOWBOT_TEST_PROM_STATUS",
    "VICTORIA_URL": "MEOWBOT_TEST_VM_STATUS",
}


PROM_WAIT_S = 600.0  # history, backfill, first scrapes and rules on a loaded 2-core machine


def _engine_ready(var: str, status_file: str | None) -> float:
    """The wall time from which the test engine behind `var` may be read, once its status
    says ready."""
    if not status_file:
        return 0.0
    deadline = time.monotonic() + PROM_WAIT_S
    while time.monotonic() < deadline:
        text = Path(status_file).read_text().strip()
        if text.startswith("ready"):
            return float(text.split()[1])
        if text.startswith("failed"):
            pytest.fail(f"the test engine of {var} did not start: {text}")
        time.sleep(0.2)
    pytest.fail(f"the test engine of {var} was not ready within {PROM_WAIT_S:.0f} s")


@pytest.fixture
def redis_url() -> str:
    return need_service("REDIS_URL")


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


class RedisServer:
    """A redis-server of one test's own (AOF on), that the test may stop and start again; the
    session's server is never stopped, so other tests keep theirs."""

    def __init__(self, cmd: list[str], port: int) -> None:
        self.cmd = cmd
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        raise TimeoutError(f"redis-server did not listen on {self.port}")

    def stop(self) -> None:
        """SIGTERM: redis-server flushes the AOF and exits, as on a clean restart."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    need_service("REDIS_URL")  # the session's server says redis-server is installed
    port = lasting_port()  # restarted on it by some tests
    cmd = redis_command(port, tmp_path)
    server = RedisServer(cmd, port)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of the test's own as the process's (and its children's, TMPDIR)
    temporary folder: what a shell leaves there (its private Redis) is never another test's
    or another process's on the machine. Short, for the Unix socket paths made in it."""
    folder = Path(tempfile.mkdtemp(prefix="mw-"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
