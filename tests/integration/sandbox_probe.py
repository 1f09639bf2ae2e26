"""Run inside deploy/systemd/meowbot.service's sandbox by tests/integration/test_systemd_sandbox.py:
tries what meowbot and scontrol do there, and what the sandbox must refuse, and prints one
JSON object, a name to [worked, what it gave or the error].

Usage: sandbox_probe.py NODE (a test Slurm node to drain and resume through scontrol)."""

from __future__ import annotations

import asyncio
import ctypes
import json
import mmap
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

found: dict[str, tuple[bool, Any]] = {}


def tried(name: str, attempt: Callable[[], Any]) -> None:
    try:
        found[name] = (True, attempt())
    except Exception as exc:
        found[name] = (False, f"{type(exc).__name__}: {exc}")


def status(field: str) -> str:
    with open("/proc/self/status") as f:
        return next(line.split()[1] for line in f if line.startswith(f"{field}:"))


def write(path: str) -> str:
    with open(path, "w") as f:
        f.write("probe")
    return path


def chart() -> list[str]:
    """A /job-slow chart as the bot draws it; matplotlib keeps its font cache in
    MPLCONFIGDIR, which it then holds."""
    from bot.render.charts import NodeValue, job_chart

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    pace = [(t0 + timedelta(minutes=10 * i), 1.0 + (i % 5) / 50) for i in range(100)]
    png = job_chart(
        title="sandbox",
        pace=pace,
        yesterday=pace,
        since=None,
        metric_label="SM clock",
        per_node=[NodeValue(f"gpu-{i:04d}", 1.0 + i / 100) for i in range(8)],
        stragglers={"gpu-0003"},
        median=1.0,
    )
    assert png.startswith(b"\x89PNG")
    return sorted(os.listdir(os.environ["MPLCONFIGDIR"]))


def ctypes_callback() -> list[int]:
    """libffi makes a closure for a C callback: it must not need writable, executable memory."""
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

    def by_value(a: int, b: int) -> int:
        left = ctypes.cast(a, ctypes.POINTER(ctypes.c_int))[0]
        return int(left - ctypes.cast(b, ctypes.POINTER(ctypes.c_int))[0])

    values = (ctypes.c_int * 4)(3, 1, 4, 2)
    ctypes.CDLL(None).qsort(values, 4, ctypes.sizeof(ctypes.c_int), compare(by_value))
    return list(values)


def writable_executable() -> str:
    mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    return "mapped"


def netlink() -> str:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
    return "opened"


def extensions() -> str:
    import hiredis  # noqa: F401
    import kiwisolver  # noqa: F401
    import matplotlib.backends.backend_agg  # noqa: F401
    import numpy  # noqa: F401
    import PIL._imaging  # noqa: F401
    import pydantic_core  # noqa: F401

    import bot.app  # noqa: F401
    import handlers.registry  # noqa: F401

    return "imported"


def scontrol_over_munge() -> str:
    """Without SLURM_JWT scontrol signs with munge, over its Unix socket."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    out = subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"scontrol ping exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout.strip()


async def drain_and_resume(node: str) -> list[list[str]]:
    """The adapter's own drain and resume, through scontrol on Slurm 22.05."""
    from bot.backends.slurm import SlurmRest

    slurm = SlurmRest(
        os.environ["SLURM_REST_URL"],
        token=os.environ["SLURM_JWT"],
        user=os.environ["SLURM_USER"],
        timeout_s=20,
    )
    seen: list[list[str]] = []
    try:
        await slurm.drain(node, "meowbot: sandbox probe")
        seen.append([*(await slurm.nodes([node]))[node].flags])
        await slurm.resume(node)
        seen.append([*(await slurm.nodes([node]))[node].flags])
    finally:
        await slurm.close()
    return seen


def main(node: str) -> None:
    tried("capabilities", lambda: status("CapEff"))
    tried("no new privileges", lambda: status("NoNewPrivs"))
    tried("seccomp", lambda: status("Seccomp"))
    tried("write /", lambda: write("/meowbot-probe"))
    tried("write /usr/local", lambda: write("/usr/local/meowbot-probe"))
    tried("write /tmp", lambda: write("/tmp/meowbot-probe"))
    tried("list /home", lambda: os.listdir("/home"))
    tried("chart", chart)
    tried("ctypes callback", ctypes_callback)
    tried("writable executable memory", writable_executable)
    tried("netlink socket", netlink)
    tried("extensions", extensions)
    tried("scontrol over munge", scontrol_over_munge)
    tried("drain and resume", lambda: asyncio.run(drain_and_resume(node)))
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
