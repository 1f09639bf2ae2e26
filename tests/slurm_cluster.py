"""The test Slurm of scripts/testsvc/slurm.py as tests reach it: where it is, meowbot's
adapter over it, and its command line tools."""

from __future__ import annotations

import os
import subprocess

from bot.backends.slurm import SlurmRest
from tests.conftest import need_service

VARS = ("SLURM_REST_URL", "SLURM_JWT", "SLURM_USER", "SLURM_CONF")


def slurm_env() -> dict[str, str]:
    return {var: need_service(var) for var in VARS}


def slurm_rest(env: dict[str, str]) -> SlurmRest:
    return SlurmRest(
        env["SLURM_REST_URL"],
        token=env["SLURM_JWT"],
        user=env["SLURM_USER"],
        slurm_conf=env["SLURM_CONF"],
        timeout_s=10,
    )


def cli(env: dict[str, str], *args: str, check: bool = False) -> str:
    """A Slurm command line tool, authenticated by munge (a SLURM_JWT in the environment would
    switch it to JWT, which the slurmds do not accept for job steps)."""
    run_env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    run_env["SLURM_CONF"] = env["SLURM_CONF"]
    out = subprocess.run(list(args), env=run_env, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise AssertionError(f"{args}: {out.stderr}")
    return out.stdout
