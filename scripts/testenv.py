#!/usr/bin/env python3
"""Runs a command (the test suite) with real services started on loopback, then stops them.

`make test` calls this: it installs what is missing (Debian packages with apt-get when we are
root, otherwise it says how), starts each service of scripts/testsvc/ on a free port in a
temporary folder, exports where they are (REDIS_URL, ...), runs the command, stops everything
and exits with the command's code. Standard library only: it runs before the venv matters.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from testsvc import crd_validators  # found through the path above

# Started in this order, the services of one stage side by side (each stage's start-up is
# mostly waiting: Prometheus for live scrapes while the checkpoints train); a later stage may
# use what an earlier one exported. kube and victoria last: their starts return at once and
# go on in the background while the tests run (kube-apiserver's build when not cached;
# VictoriaMetrics once the test Prometheus is up, from its blocks), after the others are up so
# neither slows their start-up timeouts.
STAGES = [["redis", "alertmanager"], ["prometheus", "slurm", "checkpoints"], ["kube", "victoria"]]
SERVICES = [name for stage in STAGES for name in stage]
# Started only when named in MEOWBOT_TEST_SERVICES: none now.
OPT_IN: frozenset[str] = frozenset()
# A developer running a few tests may start only some (MEOWBOT_TEST_SERVICES=redis); tests
# of the others then skip outside CI and fail in it.
ONLY_VAR = "MEOWBOT_TEST_SERVICES"
# Not a service, installed whichever are named: systemd-analyze checks deploy/systemd's unit
# and a systemd user manager runs its sandbox (tests/unit/test_systemd_unit.py and
# tests/integration/test_systemd_sandbox.py); node and npm install and run prometheus-operator's
# schema validators (testsvc/crd_validators.py) for tests/integration/test_deploy_kubernetes.py.
TOOLS = {"systemd": "systemd-analyze", **crd_validators.PACKAGES}


def say(msg: str) -> None:
    print(f"testenv: {msg}", file=sys.stderr, flush=True)


def ensure_packages(packages: dict[str, str]) -> None:
    missing = sorted({pkg for pkg, binary in packages.items() if shutil.which(binary) is None})
    if not missing:
        return
    names = " ".join(missing)
    if os.geteuid() != 0:
        sys.exit(f"testenv: missing {names}; run: sudo apt-get install -y {names}")
    say(f"installing {names} with apt-get")
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


def enter_together(
    stack: contextlib.ExitStack, services: list[contextlib.AbstractContextManager[dict[str, str]]]
) -> dict[str, str]:
    """Starts the services side by side, each in a thread, and hands each one's stop to
    `stack`; the first failure is raised once every start has ended (the started ones stop)."""
    with ThreadPoolExecutor(max(1, len(services))) as pool:
        futures = [pool.submit(service.__enter__) for service in services]
    exported: dict[str, str] = {}
    failure: BaseException | None = None
    for service, future in zip(services, futures, strict=True):
        try:
            exported.update(future.result())
        except BaseException as exc:  # re-raised below, after the others
            failure = failure or exc
            continue
        stack.push(service)
    if failure is not None:
        raise failure
    return exported


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        sys.exit("usage: testenv.py -- COMMAND [ARGS...]")
    only = [n.strip() for n in os.environ.get(ONLY_VAR, "").split(",") if n.strip()]
    unknown = sorted(set(only) - set(SERVICES))
    if unknown:
        sys.exit(f"testenv: {ONLY_VAR} names unknown services {unknown}; known: {SERVICES}")
    names = [n for n in SERVICES if n in only or (not only and n not in OPT_IN)]
    # A run stopped from outside (a CI timeout, `kill`) still stops every service it started:
    # SIGTERM unwinds the stack below as Ctrl-C does (subprocess.call kills the child first).
    signal.signal(signal.SIGTERM, _stopped)
    signal.signal(signal.SIGHUP, _stopped)
    modules = [importlib.import_module(f"testsvc.{name}") for name in names]
    ensure_packages({**TOOLS, **{pkg: b for m in modules for pkg, b in m.PACKAGES.items()}})
    with (
        tempfile.TemporaryDirectory(prefix="meowbot-test-") as tmp_s,
        contextlib.ExitStack() as stack,
    ):
        tmp = Path(tmp_s)
        env = dict(os.environ)
        env["MEOWBOT_TEST_TMP"] = str(tmp)
        env.update(crd_validators.ensure())  # once per machine; a look at its folder after
        by_name = dict(zip(names, modules, strict=True))
        for stage in STAGES:
            started = [(n, by_name[n]) for n in stage if n in by_name]
            for name, _ in started:
                (tmp / name).mkdir(exist_ok=True)
            env.update(enter_together(stack, [m.start(tmp / n, env) for n, m in started]))
        say("services up: " + ", ".join(names))
        # The child gets its own exit code through; pytest's 5 (no tests ran) stays a failure.
        return subprocess.call(argv, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
