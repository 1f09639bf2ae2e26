"""deploy/systemd/meowbot.service and meowbot.env.example: systemd's own checks of the unit
(`systemd-analyze verify` and `security`, offline), and the unit and the example held to what
the bot reads. The sandbox itself is run for real by tests/integration/test_systemd_sandbox.py.

systemd-analyze comes with Debian's systemd package, which scripts/testenv.py installs when it
is missing; without it these tests skip, and fail under CI=true."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.server import HANDOVER_S, SHUTDOWN_GRACE_S
from tests.conftest import IN_CI
from tests.deploy_files import (
    ENV_EXAMPLE,
    REPO,
    UNIT,
    env_file_entries,
    make_run_argv,
    unit_entries,
    unit_value,
)

INSTALLED = "/opt/meowbot/venv/bin/meowbot"
CHECKOUT = REPO / ".venv" / "bin" / "meowbot"
SHIPPED = UNIT.read_text()

# What `systemd-analyze security` still counts against the unit, each what the bot needs:
# the network it works over (TCP to Slack, Redis, Prometheus, slurmrestd: 1.0 of the score),
# Unix sockets (munge through scontrol, a unix:// Redis), the host's root (its scontrol,
# slurm.conf and munge socket), PrivateUsers= (not tried with munge's peer credentials: the
# sandbox test's user manager cannot run a unit as another user) and the clock's read-only
# rtc device that ProtectClock= leaves. Measured: 1.2 with systemd 252.
EXPOSED = {
    "RestrictAddressFamilies=~AF_(INET|INET6)",
    "PrivateNetwork=",
    "IPAddressDeny=",
    "RestrictAddressFamilies=~AF_UNIX",
    "RootDirectory=/RootImage=",
    "PrivateUsers=",
    "DeviceAllow=",
}
MAX_EXPOSURE = 1.2


def analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        msg = "systemd-analyze is missing: apt-get install -y systemd (make test installs it)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def checkout_copy(folder: Path, text: str = SHIPPED, name: str = "meowbot.service") -> Path:
    """The unit with ExecStart pointing at this checkout's meowbot instead of
    /opt/meowbot/venv's (verify wants the binary to exist); the rest as given."""
    assert CHECKOUT.exists(), "no .venv/bin/meowbot: run `make run` or `make test` first"
    path = folder / name
    path.write_text(text.replace(f"ExecStart={INSTALLED} ", f"ExecStart={CHECKOUT} "))
    return path


def verify(path: Path) -> list[str]:
    """What `systemd-analyze verify` says against the unit: nothing when it is sound. Its exit
    code stays 0 for an unknown key or a value it cannot parse (it only warns), so every line
    naming the unit counts, and a non-zero exit."""
    out = subprocess.run(
        [analyze(), "verify", str(path)], capture_output=True, text=True, timeout=120
    )
    said = [
        line
        for line in (out.stdout + out.stderr).splitlines()
        if path.name in line or str(path) in line
    ]
    return said + ([f"exit {out.returncode}"] if out.returncode else [])


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    assert verify(checkout_copy(tmp_path)) == []


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        # A key spelled wrong: systemd ignores it, so the hardening would silently be gone.
        (("RestrictAddressFamilies=", "RestrictAdressFamilies="), "Unknown key"),
        (("ProtectSystem=strict", "ProtectSystem=strictest"), "Failed to parse"),
        (("KillMode=mixed", "KillMode=gently"), "Failed to parse"),
        ((f"ExecStart={INSTALLED} ", "ExecStart=/nonexistent/bin/meowbot "), "not executable"),
    ],
)
def test_verify_fails_on_a_broken_copy(tmp_path: Path, broken: tuple[str, str], said: str) -> None:
    old, new = broken
    assert old in SHIPPED
    lines = verify(checkout_copy(tmp_path, SHIPPED.replace(old, new, 1)))
    assert lines and any(said in line for line in lines), lines


def test_the_exposure_stays_what_the_bot_needs(tmp_path: Path) -> None:
    path = checkout_copy(tmp_path)
    cmd = [analyze(), "security", "--offline=true", "--no-pager"]
    text = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for meowbot\.service: (\d+\.\d+)", text.stdout)
    assert m, text.stdout + text.stderr
    as_json = subprocess.run(
        [*cmd, "--json=short", str(path)], capture_output=True, text=True, timeout=120, check=True
    )
    exposed = {c["name"] for c in json.loads(as_json.stdout) if c["set"] is False}
    assert exposed <= EXPOSED, f"newly exposed: {sorted(exposed - EXPOSED)}"
    assert float(m.group(1)) <= MAX_EXPOSURE


def test_exec_start_is_make_run_from_the_venv() -> None:
    binary, *args = unit_value(SHIPPED, "Service", "ExecStart").split()
    assert binary == INSTALLED
    assert [Path(binary).name, *args] == make_run_argv()


def test_the_stop_timeout_covers_the_graceful_stop() -> None:
    """SIGTERM: the grace for in-flight work, the hand-over (its work unwinding, then its
    askers told), the background loops' grace; then connections close."""
    worst = SHUTDOWN_GRACE_S + 2 * HANDOVER_S + SHUTDOWN_GRACE_S
    timeout = float(unit_value(SHIPPED, "Service", "TimeoutStopSec"))
    assert worst < timeout <= worst + 10
    # SIGTERM to the bot alone, so a drain's scontrol is not cut off under it.
    assert unit_value(SHIPPED, "Service", "KillMode") == "mixed"


def test_the_bot_writes_only_where_the_sandbox_lets_it() -> None:
    env = dict(
        item.split("=", 1)
        for value in [v for k, v in unit_entries(SHIPPED)["Service"] if k == "Environment"]
        for item in value.split()
    )
    cache = unit_value(SHIPPED, "Service", "CacheDirectory")
    assert env["MPLCONFIGDIR"] == f"%C/{cache}"
    assert unit_value(SHIPPED, "Service", "ProtectSystem") == "strict"
    assert not set(env) & set(setting_names()), "a setting belongs in the environment file"


def setting_names() -> set[str]:
    """Every environment variable bot/config.py's Settings reads."""
    names: set[str] = set()
    for info in Settings.model_fields.values():
        if info.alias:
            names.add(info.alias)
        choices = getattr(info.validation_alias, "choices", ())
        names.update(c for c in choices if isinstance(c, str) and c.isupper())
    return names


# Read by scontrol, which meowbot runs on Slurm 22.05 with its own environment, not by meowbot.
NOT_SETTINGS = {"SLURM_CONF": "scontrol"}


def test_every_name_in_the_example_is_a_setting() -> None:
    text = ENV_EXAMPLE.read_text()
    for line in text.splitlines():
        line = line.strip()
        assert not line or line.startswith("# ") or line == "#" or "=" in line, line
    names = [name for name, _, _ in env_file_entries(text)]
    assert len(names) == len(set(names)), "a name given twice"
    unknown = set(names) - setting_names() - set(NOT_SETTINGS)
    assert not unknown, f"not a setting of bot/config.py: {sorted(unknown)}"


def test_the_example_names_every_slack_redis_prometheus_and_slurm_variable() -> None:
    documented = set(
        re.findall(r"`((?:SLACK|REDIS|PROMETHEUS|SLURM)_[A-Z_]+)`", docs_environment_table())
    )
    assert {"SLACK_BOT_TOKEN", "REDIS_URL", "PROMETHEUS_URL", "SLURM_JWT"} <= documented
    names = {name for name, _, _ in env_file_entries(ENV_EXAMPLE.read_text())}
    assert documented <= names, sorted(documented - names)
    assert "MEOWBOT_CONFIG" in names


def docs_environment_table() -> str:
    page = (REPO / "docs" / "configuration.md").read_text()
    return page.split("## Environment", 1)[1].split("\n## ", 1)[0]


def test_the_example_as_it_stands_is_a_valid_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its placeholders pass the bot's own checks: Socket Mode over Slurm and Prometheus."""
    monkeypatch.chdir(tmp_path)  # no .env of the checkout's
    for name in setting_names():
        monkeypatch.delenv(name, raising=False)
    for name, value, commented in env_file_entries(ENV_EXAMPLE.read_text()):
        if not commented:
            monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.mode.value == "socket"
    assert settings.cluster_backends == ("PROMETHEUS_URL", "SLURM_REST_URL")
    assert settings.redis_url and settings.admin_list == ("@hpc-admins",)
