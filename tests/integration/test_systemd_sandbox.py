"""deploy/systemd/meowbot.service's sandbox, run for real by a systemd user manager
(tests/systemd_user.py) against the test Slurm 22.05 and Redis: scontrol still reaches munge's
socket and drains through the adapter, matplotlib draws and keeps its cache, `meowbot run`
serves /healthz and stops cleanly on SIGTERM; and the sandbox is on (no capability, read-only
root, no writable executable memory, no netlink socket).

The unit is the shipped one but for what a user manager or this test's services need, each
said in the drop-in: no User=/Group= (a user manager cannot change user: it runs as root with
no capability), the test cluster's folder in /tmp bound back in (PrivateTmp= hides it; a
site's munge socket is in /run/munge, which nothing hides), and where this machine's Python
or checkout lies under a home, ProtectHome=tmpfs with them bound back read-only."""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from scripts.testsvc.common import free_port
from tests.conftest import need_service
from tests.deploy_files import REPO, UNIT
from tests.slurm_cluster import slurm_env
from tests.systemd_user import UserManager, manager

PROBE = Path(__file__).with_name("sandbox_probe.py")
NODE = "gpu-0005"  # drained and resumed by the probe; no other Slurm test uses it
HOMES = ("/home", "/root", "/run/user")


def sandboxed(user: UserManager, name: str, exec_start: str, env: dict[str, str]) -> Path:
    """The shipped unit as `name`, running `exec_start` with `env` as its environment file;
    returns the folder its output goes to."""
    out = user.folder / "out"
    out.mkdir(exist_ok=True)
    env_file = user.folder / f"{name}.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    text = "".join(
        line
        for line in UNIT.read_text().splitlines(keepends=True)
        if not line.startswith(("User=", "Group="))
    )
    text = re.sub(r"^EnvironmentFile=.*$", f"EnvironmentFile={env_file}", text, flags=re.M)
    text = re.sub(r"^ExecStart=.*$", f"ExecStart={exec_start}", text, flags=re.M)
    (user.units / f"{name}.service").write_text(text)
    drop_in = [
        "[Service]",
        "Restart=no",
        f"StandardOutput=file:{out / name}.out",
        f"StandardError=file:{out / name}.err",
        f"BindReadOnlyPaths={Path(env['SLURM_CONF']).parent}",
    ]
    # The interpreter and the checkout where the sandbox hides them: under a home
    # (ProtectHome=) or under /tmp (PrivateTmp=; a clean clone often lies there), bound back.
    paths = {Path(sys.base_prefix).resolve(), REPO}
    under_home = [str(p) for p in paths if str(p).startswith(tuple(f"{h}/" for h in HOMES))]
    under_tmp = [str(p) for p in paths if str(p).startswith(("/tmp/", "/var/tmp/"))]
    if under_home:
        drop_in.append("ProtectHome=tmpfs")
    if under_home or under_tmp:
        drop_in.append(f"BindReadOnlyPaths={' '.join(sorted([*under_home, *under_tmp]))}")
    (user.units / f"{name}.service.d").mkdir()
    (user.units / f"{name}.service.d" / "test.conf").write_text("\n".join(drop_in) + "\n")
    user.systemctl("daemon-reload")
    return out


def test_scontrol_munge_and_charts_work_in_the_sandbox(tmp_path: Path) -> None:
    slurm = slurm_env()
    with manager(tmp_path) as user:
        out = sandboxed(user, "meowbot-probe", f"{sys.executable} {PROBE} {NODE}", slurm)
        user.systemctl("start", "meowbot-probe.service")
        assert user.wait_inactive("meowbot-probe.service", 120) == "inactive", (
            out / "meowbot-probe.err"
        ).read_text()
        found = json.loads((out / "meowbot-probe.out").read_text())
        cache = user.cache / "meowbot"
    worked = {name: ok for name, (ok, _) in found.items()}
    said = {name: what for name, (_, what) in found.items()}
    # The sandbox is on.
    assert said["capabilities"] == "0000000000000000"
    assert said["no new privileges"] == "1" and said["seccomp"] == "2"
    assert "Read-only file system" in said["write /"]
    assert "Read-only file system" in said["write /usr/local"]
    assert not worked["list /home"] or said["list /home"] == []
    assert "Operation not permitted" in said["writable executable memory"]
    assert "Address family not supported" in said["netlink socket"]
    # What meowbot and scontrol need still works.
    assert worked["write /tmp"], said["write /tmp"]
    assert worked["extensions"], said["extensions"]
    assert worked["ctypes callback"] and said["ctypes callback"] == [1, 2, 3, 4]
    assert worked["chart"], said["chart"]
    assert any(name.startswith("fontlist") for name in said["chart"])
    assert any(p.name.startswith("fontlist") for p in cache.iterdir())  # %C/meowbot
    assert worked["scontrol over munge"], said["scontrol over munge"]
    assert "is UP" in said["scontrol over munge"]
    assert worked["drain and resume"], said["drain and resume"]
    drained, resumed = said["drain and resume"]
    assert "DRAIN" in drained and "DRAIN" not in resumed


def test_meowbot_run_serves_and_stops_cleanly_in_the_sandbox(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **slurm_env(),
        "REDIS_URL": need_service("REDIS_URL"),
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_SIGNING_SECRET": "sandbox",
        "SLACK_API_URL": f"http://127.0.0.1:{free_port()}/api/",  # nothing is posted here
        "PORT": str(port),
    }
    with manager(tmp_path) as user:
        out = sandboxed(user, "meowbot", f"{REPO / '.venv' / 'bin' / 'meowbot'} run", env)
        user.systemctl("start", "meowbot.service")
        health = healthz(port, out / "meowbot.err")
        pid = user.show("meowbot.service", "MainPID")
        proc = Path("/proc") / pid
        status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines())
        root = next(
            line.split()[5]
            for line in (proc / "mountinfo").read_text().splitlines()
            if line.split()[4] == "/"
        )
        started = time.monotonic()
        user.systemctl("stop", "meowbot.service")
        took = time.monotonic() - started
        result = user.show("meowbot.service", "Result")
        code = user.show("meowbot.service", "ExecMainStatus")
    assert health["ok"] is True and health["redis"] == "ok"
    assert health["backends"]["scheduler"] == "slurm"
    assert status["CapEff"].strip() == "0000000000000000"
    assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
    assert "ro" in root.split(",")
    assert (result, code) == ("success", "0")
    assert took < 35
    log = (out / "meowbot.err").read_text()
    assert "meowbot is up" in log and "shutting down" in log


def healthz(port: int, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                body: dict[str, Any] = json.loads(resp.read())
                return body
        except OSError:
            text = log.read_text(errors="replace") if log.exists() else ""
            assert time.monotonic() < deadline, f"no /healthz on {port}: {text[-2000:]}"
            time.sleep(0.2)
