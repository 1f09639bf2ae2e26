"""`meowbot doctor`'s Slurm lines against the real Slurm 22.05 (scripts/testsvc/slurm.py): a
healthy identity, a token of a user that may only read, slurmrestd down, and the command's own
wiring. Each line is checked against what Slurm's own tools say, and every node's drain marks
and reason are read before and after: the rights probe changes nothing."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.backends.slurm import SlurmRest
from bot.config import load_settings
from bot.doctor.report import Line, Status
from bot.doctor.run import doctor
from bot.doctor.slurm_part import PROBE_NODE, slurm_lines
from scripts.testsvc.common import free_port
from tests import slurm_cluster

MONTH_S = 30 * 86400
READER = "nobody"  # neither root nor SlurmUser, no AdminLevel (no slurmdbd): may only read


@pytest.fixture
def slurm_env() -> dict[str, str]:
    return slurm_cluster.slurm_env()


def token(env: dict[str, str], user: str, lifespan_s: int = MONTH_S) -> str:
    """A token as an operator makes one for meowbot (`scontrol token`, as root over munge)."""
    out = slurm_cluster.cli(
        env, "scontrol", "token", f"username={user}", f"lifespan={lifespan_s}", check=True
    )
    return out.strip().removeprefix("SLURM_JWT=")


@pytest.fixture
async def adapter(slurm_env: dict[str, str]) -> AsyncIterator[Callable[[str], SlurmRest]]:
    made: list[SlurmRest] = []

    def make(user: str) -> SlurmRest:
        made.append(
            SlurmRest(
                slurm_env["SLURM_REST_URL"],
                token=token(slurm_env, user),
                user=user,
                slurm_conf=slurm_env["SLURM_CONF"],
                timeout_s=10,
            )
        )
        return made[-1]

    yield make
    for one in made:
        await one.close()


def marks(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Every node's drain or down mark and its reason, as sinfo has them (the base state of a
    node in service moves with other tests' jobs; what a drain sets does not)."""
    out = slurm_cluster.cli(env, "sinfo", "-N", "-h", "-o", "%N|%T|%E", check=True)
    got: dict[str, tuple[str, str]] = {}
    for row in out.splitlines():
        name, state, reason = row.split("|", 2)
        marked = any(word in state for word in ("drain", "down", "fail"))
        got[name] = (state if marked else "in service", reason)
    assert got and PROBE_NODE not in got
    return got


def ctld_log(env: dict[str, str]) -> str:
    return (Path(env["SLURM_CONF"]).parent / "slurmctld.log").read_text(errors="replace")


def by_what(lines: list[Line]) -> dict[str, Line]:
    return {line.what: line for line in lines}


async def test_a_healthy_identity_passes_every_line_as_slurm_itself_says(
    slurm_env: dict[str, str], adapter: Callable[[str], SlurmRest]
) -> None:
    before = marks(slurm_env)
    logged = len(ctld_log(slurm_env))
    lines = await slurm_lines(adapter("root"))
    assert [line.status for line in lines] == [Status.PASS] * 5, lines
    got = by_what(lines)
    release = slurm_cluster.cli(slurm_env, "scontrol", "version", check=True).split()[-1]
    assert (
        got["slurmrestd"].said
        == f"{slurm_env['SLURM_REST_URL']}: Slurm {release}, REST API v0.0.38"
    )
    assert got["token"].said.startswith("SLURM_USER root, the token's own user, valid until ")
    names = set(slurm_cluster.cli(slurm_env, "sinfo", "-N", "-h", "-o", "%N").split())
    assert got["nodes"].said == f"{len(names)} listed, 0 drained or down"
    scontrol = shutil.which("scontrol")
    assert (
        got["drain path"].said == f"scontrol at {scontrol} (REST API v0.0.38 cannot update nodes)"
    )
    assert got["may drain"].said.startswith("root may update nodes: ")
    # slurmctld went past the rights check to the node name, and stopped there.
    assert f"node {PROBE_NODE} does not exist" in ctld_log(slurm_env)[logged:]
    assert marks(slurm_env) == before


async def test_a_token_that_may_only_read_fails_may_drain_with_the_fix(
    slurm_env: dict[str, str], adapter: Callable[[str], SlurmRest]
) -> None:
    before = marks(slurm_env)
    logged = len(ctld_log(slurm_env))
    reader = token(slurm_env, READER)
    got = by_what(await slurm_lines(adapter(READER)))
    # It reads as well as root does: only the drain is refused.
    for what in ("slurmrestd", "token", "nodes", "drain path"):
        assert got[what].status is Status.PASS, got[what]
    may = got["may drain"]
    assert may.status is Status.FAIL
    assert may.said == (
        f"slurmctld refuses node updates from {READER} (Invalid user id): every Drain and "
        "Resume meowbot sends is refused"
    )
    assert may.fix.startswith(f"make {READER} a Slurm admin (`sacctmgr modify user {READER} ")
    # What scontrol says to the same drain by hand, and what slurmctld logged.
    by_hand = subprocess.run(
        ["scontrol", "update", f"nodename={PROBE_NODE}", "state=drain", "reason=by-hand"],
        env={**os.environ, "SLURM_CONF": slurm_env["SLURM_CONF"], "SLURM_JWT": reader},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert by_hand.returncode == 1 and "Invalid user id" in by_hand.stderr, by_hand
    uid = pwd.getpwnam(READER).pw_uid
    assert f"Security violation, UPDATE_NODE RPC from uid={uid}" in ctld_log(slurm_env)[logged:]
    assert marks(slurm_env) == before


async def test_slurmrestd_down_is_a_failed_line_not_a_crash(slurm_env: dict[str, str]) -> None:
    before = marks(slurm_env)
    url = f"http://127.0.0.1:{free_port()}"
    down = SlurmRest(url, token=token(slurm_env, "root"), user="root", timeout_s=2)
    started = time.monotonic()
    try:
        lines = await slurm_lines(down)
    finally:
        await down.close()
    assert time.monotonic() - started < 5
    server, token_line = lines
    assert server.what == "slurmrestd" and server.status is Status.FAIL
    assert server.said.startswith(f"{url}: cannot be reached")
    assert server.fix == "start slurmrestd, or correct SLURM_REST_URL"
    assert token_line.status is Status.PASS  # read from the token itself
    assert marks(slurm_env) == before


async def test_the_command_builds_slurm_as_the_bot_does(
    slurm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `doctor`: the bot's own adapter (scontrol found on PATH, slurm.conf from
    SLURM_CONF), and a missing SLURM_JWT said as a failed line."""
    monkeypatch.setenv("SLURM_CONF", slurm_env["SLURM_CONF"])
    before = marks(slurm_env)
    common = {
        "SLACK_BOT_TOKEN": None,
        "REDIS_URL": None,
        "PROMETHEUS_URL": None,
        "KUBECONFIG": None,
        "SLURM_REST_URL": slurm_env["SLURM_REST_URL"],
        "SLURM_USER": "root",
    }
    lines = await doctor(load_settings(**common, SLURM_JWT=token(slurm_env, "root")))
    slurm = [line for line in lines if line.part == "Slurm"]
    assert [line.what for line in slurm] == [
        "slurmrestd",
        "token",
        "nodes",
        "drain path",
        "may drain",
    ]
    assert all(line.status is Status.PASS for line in slurm), slurm
    lines = await doctor(load_settings(**common, SLURM_JWT=None))
    [configured] = [line for line in lines if line.part == "Slurm"]
    assert configured.status is Status.FAIL and "SLURM_JWT" in configured.said
    assert marks(slurm_env) == before
