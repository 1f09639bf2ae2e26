"""A test Slurm node "rebooted": its slurmd restarted in a Linux time namespace whose boot
clock starts now, so Slurm reads a new boot time for the node, as after a real
reboot (slurmd reports its uptime; the namespace is what a freshly booted machine shows). On
exit the node's slurmd runs again as before; scripts/testsvc/slurm.py stops it with the
cluster."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import need_service


def _slurmd_pid(conf: str, node: str) -> int:
    pidfile = re.search(r"^SlurmdPidFile=(\S+)", Path(conf).read_text(), re.MULTILINE)
    assert pidfile is not None
    return int(Path(pidfile.group(1).replace("%n", node)).read_text().strip())


def _stop(pid: int, timeout_s: float = 15) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":  # gone; its parent (testenv) reaps it
            return
        time.sleep(0.1)
    raise TimeoutError(f"slurmd {pid} did not stop")


def _slurmd(conf: str, node: str, *prefix: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    env["SLURM_CONF"] = conf
    return subprocess.Popen(
        [*prefix, "slurmd", "-D", "-N", node, "-f", conf],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@contextlib.contextmanager
def rebooted(node: str) -> Iterator[None]:
    conf = need_service("SLURM_CONF")
    _stop(_slurmd_pid(conf, node))
    uptime = int(float(Path("/proc/uptime").read_text().split()[0]))
    fresh = _slurmd(conf, node, "unshare", "--time", f"--boottime=-{uptime}", "--fork")
    try:
        yield
    finally:
        _stop(_slurmd_pid(conf, node))
        fresh.wait(timeout=15)
        _slurmd(conf, node)
