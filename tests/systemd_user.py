"""A systemd user manager of root's own, to run a unit's sandbox for real where systemd is not
PID 1 (this machine, CI): `systemd --user` as root in a mount namespace of its own, over a
tmpfs on /run holding what PID 1 makes at boot (/run/systemd/system, which says systemd runs,
and the inaccessible nodes ProtectHome= and the like mount over what they hide), in cgroups
of its own, its runtime, unit and cache folders in a temporary folder. It applies a unit's
sandbox as the system manager does, but cannot change user: User= and Group= are left out,
and the unit runs as root with CapabilityBoundingSet= taking every capability away.

Needs root, systemd, util-linux's unshare and a writable cgroup tree; where any is missing
`manager()` skips, and fails under CI=true."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.testsvc.common import stop
from tests.conftest import IN_CI

SYSTEMD = Path("/lib/systemd/systemd")
START_S = 20.0
STOP_S = 15.0
_serial = itertools.count()

# Run by sh in the manager's own mount namespace: /run/systemd/inaccessible as PID 1 makes it.
_BOOT = """
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/systemd/system /run/systemd/inaccessible
cd /run/systemd/inaccessible
mkdir dir && touch reg && mknod chr c 0 0 && mknod blk b 0 0 && mkfifo fifo
"$MEOWBOT_PY" -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
chmod 000 dir reg chr blk fifo sock
cd /
exec "$MEOWBOT_SYSTEMD" --user
"""
# Moves itself into the manager's cgroups, then into a mount namespace of its own.
_ENTER = (
    'for f in "$@"; do echo $$ > "$f"; done; '
    'exec unshare --mount --propagation private sh -c "$MEOWBOT_BOOT"'
)


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "a systemd user manager that mounts a unit's sandbox needs root"
    for tool in ("systemctl", "unshare", "mount", "mknod"):
        if shutil.which(tool) is None:
            return f"{tool} is missing"
    if not SYSTEMD.exists():
        return f"{SYSTEMD} is missing: apt-get install -y systemd"
    if not _hierarchies():
        return "no writable cgroup tree under /sys/fs/cgroup"
    return None


def _hierarchies() -> list[Path]:
    """Where a manager needs cgroups of its own: the unified tree, or in the hybrid layout
    systemd's named hierarchy and the unified one beside the v1 controllers."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        found = [root]
    else:
        found = [p for p in (root / "systemd", root / "unified") if p.is_dir()]
    return [p for p in found if os.access(p, os.W_OK)]


@dataclass
class UserManager:
    folder: Path
    process: subprocess.Popen[bytes]
    env: dict[str, str]

    @property
    def units(self) -> Path:
        return self.folder / "config" / "systemd" / "user"

    @property
    def cache(self) -> Path:
        """%C, where CacheDirectory= puts its folders."""
        return self.folder / "cache"

    def systemctl(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(
            ["systemctl", "--user", "--no-pager", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"systemctl --user {' '.join(args)}: {out.stderr or out.stdout}")
        return out.stdout.strip()

    def show(self, unit: str, prop: str) -> str:
        return self.systemctl("show", "-P", prop, unit)

    def wait_inactive(self, unit: str, timeout_s: float) -> str:
        """The unit's state once it has stopped (inactive or failed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.show(unit, "ActiveState")
            if state in ("inactive", "failed"):
                return state
            assert time.monotonic() < deadline, f"{unit} still {state} after {timeout_s} s"
            time.sleep(0.2)


@contextlib.contextmanager
def manager(folder: Path) -> Iterator[UserManager]:
    """A user manager, running until the block ends; then it and everything it started stop."""
    reason = _missing()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    runtime = folder / "run"
    runtime.mkdir(mode=0o700, parents=True)
    (folder / "config" / "systemd" / "user").mkdir(parents=True)
    (folder / "cache").mkdir()
    name = f"meowbot-test-{os.getpid()}-{next(_serial)}"
    groups = [h / name for h in _hierarchies()]
    for group in groups:
        group.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "HOME": str(folder),
        "XDG_RUNTIME_DIR": str(runtime),
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_CACHE_HOME": str(folder / "cache"),
        "MEOWBOT_PY": sys.executable,
        "MEOWBOT_SYSTEMD": str(SYSTEMD),
        "MEOWBOT_BOOT": _BOOT,
    }
    log = (folder / "manager.log").open("wb")
    process = subprocess.Popen(
        ["sh", "-c", _ENTER, "sh", *(str(g / "cgroup.procs") for g in groups)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    user = UserManager(folder, process, {k: env[k] for k in ("PATH", "XDG_RUNTIME_DIR")})
    try:
        _wait_up(user)
        yield user
    finally:
        _stop(process, groups)
        log.close()


def _wait_up(user: UserManager) -> None:
    deadline = time.monotonic() + START_S
    while True:
        assert user.process.poll() is None, (
            f"systemd --user exited with {user.process.returncode}: "
            + (user.folder / "manager.log").read_text(errors="replace")
        )
        if (user.folder / "run" / "systemd" / "private").exists():
            state = user.systemctl("show", "-P", "SystemState", check=False)
            if state in ("running", "degraded"):
                return
        assert time.monotonic() < deadline, "systemd --user did not come up"
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes], groups: list[Path]) -> None:
    """The manager by its pid, then whatever it left in its cgroups, then the cgroups."""
    stop(process, STOP_S)
    for group in groups:
        for procs in group.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + STOP_S
    for group in groups:
        for sub in sorted((p for p in group.rglob("*") if p.is_dir()), reverse=True):
            _rmdir(sub, deadline)
        _rmdir(group, deadline)


def _rmdir(group: Path, deadline: float) -> None:
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
