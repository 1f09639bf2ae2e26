#!/usr/bin/env python3
"""Runs the test suite as two pytest processes side by side: the unit tests, pure and
CPU-bound, at a lower priority, beside the tests of the services, which mostly wait on them
(Slack's pacing, Slurm's jobs, Alertmanager's groups) and start once the test Prometheus is
up. The CPU of the first fills the waits of the second; the lower priority keeps a service
test that waits on an answer within seconds from waiting behind a unit test's Monte Carlo.
The services' output streams; the unit tests' follows when both have ended. Exits non-zero
when either run failed (or ran nothing).

Usage (under scripts/testenv.py): scripts/test_workers.py [PYTEST ARGS...]
Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UNIT = "tests/unit"
UNIT_NICE = 10


ENGINE_WAIT_S = 600.0


def _engine_up(status_file: str | None) -> None:
    """Until the status file says ready or failed (a failure the tests then report)."""
    deadline = time.monotonic() + ENGINE_WAIT_S
    while status_file and time.monotonic() < deadline:
        if not Path(status_file).read_text().startswith("starting"):
            return
        time.sleep(0.5)


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", *args]
    with tempfile.TemporaryFile("w+") as unit_out:
        unit = subprocess.Popen(
            [*pytest, UNIT],
            stdout=unit_out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.nice(UNIT_NICE),
        )
        # The services' tests start once the test Prometheus is up (started in the background:
        # scripts/testsvc/prometheus.py): its history and backfill take a core for a minute,
        # and a test timing an answer would be timing them. The unit tests run meanwhile.
        _engine_up(os.environ.get("MEOWBOT_TEST_PROM_STATUS"))
        services = subprocess.Popen([*pytest, "tests", f"--ignore={UNIT}"])

        def stop(signum: int, _frame: object) -> None:
            for proc in (unit, services):
                proc.terminate()
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        services_code = services.wait()
        unit_code = unit.wait()
        unit_out.seek(0)
        print(f"\n=== {UNIT} (run beside the others) ===", flush=True)
        sys.stdout.write(unit_out.read())
    print(f"test_workers: services exited {services_code}, unit {unit_code}", flush=True)
    return max(services_code, unit_code)


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parents[1])
    sys.exit(main(sys.argv[1:]))
