"""A real Slurm 22.05 cluster on loopback: munged, slurmctld, 17 slurmd, slurmrestd.

Nodes: the local host plus sixteen emulated nodes gpu-0001..gpu-0016, each a real slurmd
started with `slurmd -D -N NAME` on its own port at 127.0.0.1, with eight fake GPUs
(`Gres=gpu:8` over character devices made with mknod, when the machine allows mknod).
Everything lives in a folder of this run with a private munge socket and JWT key, so a test
cluster never meets another one and nothing is written under /etc, /run or /var.

Yields SLURM_REST_URL, SLURM_JWT (a root token for 2 h), SLURM_USER=root and SLURM_CONF.
On exit every job is cancelled first (a job step whose slurmd is gone leaves a slurmstepd
behind that ignores SIGTERM), then the daemons are stopped, newest first.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from .common import fail, free_port, say, stop, wait_port

PACKAGES = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "slurmrestd": "slurmrestd",
    "slurm-client": "scontrol",
    "munge": "munged",
    # auth/jwt (slurmrestd's token auth) is a plugin, not a binary on PATH: listed under
    # scontrol so that a fresh machine gets it in the same apt-get run; a machine that has
    # Slurm but not the plugin gets it from _ensure_jwt_plugin() below.
    "slurm-wlm-jwt-plugin": "scontrol",
}

GPU_NODES = [f"gpu-{i:04d}" for i in range(1, 17)]
GPUS_PER_NODE = 8
JWT_PACKAGE = "slurm-wlm-jwt-plugin"
REST_USER = "slurmrest"
API = "v0.0.38"
# The REST plugins of 22.05 that need no slurmdbd (the dbv0.0.NN ones fail without it).
OPENAPI_PLUGINS = ("openapi/v0.0.36", "openapi/v0.0.37", "openapi/v0.0.38")
START_TIMEOUT_S = 45.0
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}$")


def _say(msg: str) -> None:
    say("slurm", msg)


def _fail(msg: str, logs: Sequence[Path] = ()) -> NoReturn:
    fail("slurm", msg, logs)


def _local_node_name() -> str:
    """The local host's short name, unless it cannot be a node name beside the gpu nodes."""
    short = socket.gethostname().split(".")[0]
    if _NAME_RE.match(short) and short.lower() != "localhost" and short not in GPU_NODES:
        return short
    return "head-0001"


def _controller_host() -> str:
    # slurmctld only runs where SlurmctldHost names this host (or "localhost").
    short = socket.gethostname().split(".")[0]
    return short if _NAME_RE.match(short) else "localhost"


def _ensure_jwt_plugin() -> None:
    """auth/jwt is in its own Debian package, a plugin rather than a binary on PATH."""
    if glob.glob("/usr/lib/*/slurm-wlm/auth_jwt.so") or glob.glob("/usr/lib*/slurm*/auth_jwt.so"):
        return
    if os.geteuid() != 0:
        _fail(f"the auth/jwt plugin is missing; run: sudo apt-get install -y {JWT_PACKAGE}")
    _say(f"installing {JWT_PACKAGE} with apt-get (slurmrestd's token auth)")
    apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", JWT_PACKAGE]
    if subprocess.run(cmd, env=apt_env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=apt_env, check=True)
        subprocess.run(cmd, env=apt_env, check=True)


def _ensure_rest_user() -> None:
    try:
        pwd.getpwnam(REST_USER)
        return
    except KeyError:
        pass
    nologin = "/usr/sbin/nologin" if Path("/usr/sbin/nologin").exists() else "/bin/false"
    _say(f"creating the system user {REST_USER} (slurmrestd refuses to run as root)")
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", nologin, REST_USER],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _fake_gpus(folder: Path) -> bool:
    """/dev/null-like character devices for gres.conf; False where mknod is not allowed."""
    folder.mkdir(exist_ok=True)
    try:
        for i in range(GPUS_PER_NODE):
            dev = folder / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:
        _say(f"no fake GPUs ({exc}); nodes get no Gres")
        return False
    return True


def _slurm_conf(run: Path, ctld_port: int, ports: dict[str, int], gpus: bool) -> str:
    host = _controller_host()
    local = next(iter(ports))
    gres = f" Gres=gpu:{GPUS_PER_NODE}" if gpus else ""
    lines = [
        "ClusterName=meowtest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={ports[local]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={run}/munge/munge.sock",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={run}/jwt.key",
        "CredType=cred/munge",
        "CommunicationParameters=NoInAddrAny",
        f"StateSaveLocation={run}/state",
        f"SlurmdSpoolDir={run}/spool-%n",
        f"SlurmctldPidFile={run}/slurmctld.pid",
        f"SlurmdPidFile={run}/slurmd-%n.pid",
        f"SlurmctldLogFile={run}/slurmctld.log",
        f"SlurmdLogFile={run}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "ReturnToService=2",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        # The emulated nodes claim more than this machine has; trust the config.
        "SlurmdParameters=config_overrides",
        "MailProg=/bin/true",
        "KillWait=2",
        "MinJobAge=600",
        "GresTypes=gpu" if gpus else "",
        f"NodeName={local} NodeAddr=127.0.0.1 Port={ports[local]} CPUs=2 RealMemory=1000"
        " State=UNKNOWN",
        *(
            f"NodeName={name} NodeAddr=127.0.0.1 Port={port} CPUs=8 RealMemory=1000{gres}"
            " State=UNKNOWN"
            for name, port in ports.items()
            if name != local
        ),
        "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(line for line in lines if line) + "\n"


def _run(cmd: list[str], env: dict[str, str], timeout_s: float = 10) -> str:
    out = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip() or out.returncode}")
    return out.stdout


def _wait_nodes_idle(names: list[str], env: dict[str, str], deadline: float) -> None:
    last = ""
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            last = _run(["sinfo", "-h", "-N", "-o", "%N %t"], env, timeout_s=5)
            states = dict(line.split() for line in last.splitlines() if line.strip())
            if all(states.get(n) == "idle" for n in names):
                return
        time.sleep(0.2)
    raise TimeoutError(f"nodes not idle in time; sinfo said:\n{last}")


def _wait_rest(url: str, token: str, deadline: float, proc: subprocess.Popen[bytes]) -> None:
    req = urllib.request.Request(
        f"{url}/slurm/{API}/ping",
        headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token},
    )
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"slurmrestd exited with {proc.returncode} at start-up")
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:
                body = json.loads(resp.read() or b"{}")
                if resp.status == 200 and not body.get("errors"):
                    return
                last = str(body)[:300]
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise TimeoutError(f"slurmrestd did not answer /slurm/{API}/ping: {last}")


def _cancel_all_jobs(env: dict[str, str], timeout_s: float = 20) -> None:
    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
        _run(["scancel", "--full", "--user=root"], env)
    deadline = time.monotonic() + timeout_s
    left = "?"
    while time.monotonic() < deadline:
        try:
            left = _run(["squeue", "-h", "-o", "%i %t"], env, timeout_s=5).strip()
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            _say(f"squeue failed while cancelling jobs: {exc}")
            return
        if not left:
            return
        time.sleep(0.2)
    _say(f"jobs still listed after {timeout_s} s: {left!r}")


def _popen(cmd: list[str], env: dict[str, str], log: Path | None = None) -> subprocess.Popen[bytes]:
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    t0 = time.monotonic()
    deadline = t0 + START_TIMEOUT_S
    if os.geteuid() != 0:
        _fail("the test cluster needs root (SlurmUser=root, slurmd, slurmrestd -u slurmrest)")
    _ensure_jwt_plugin()
    _ensure_rest_user()
    # The daemons' folder must be readable by the slurmrest user (slurm.conf) and the munge
    # socket's folder must not be writable by others: a folder of our own under the system
    # temp dir, mode 755, removed on exit. A link from tmp points at it for the logs.
    run = Path(tempfile.mkdtemp(prefix="meowslurm-"))
    run.chmod(0o755)
    with contextlib.suppress(OSError):
        (tmp / "run").symlink_to(run)
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    senv = {**env, "SLURM_CONF": str(run / "slurm.conf")}
    for var in ("SLURM_JWT", "SLURM_JOB_ID", "SQUEUE_FORMAT", "SINFO_FORMAT"):
        senv.pop(var, None)
    ctld: subprocess.Popen[bytes] | None = None
    try:
        # munge: a private key and socket.
        (run / "munge").mkdir()
        (run / "munge").chmod(0o755)
        key = run / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        munged = _popen(
            [
                "munged",
                "--foreground",
                f"--socket={run}/munge/munge.sock",
                f"--key-file={key}",
                f"--pid-file={run}/munge/munged.pid",
                f"--seed-file={run}/munge/munged.seed",
                "--num-threads=4",
            ],
            senv,
            run / "munged.log",
        )
        procs.append(("munged", munged))

        jwt = run / "jwt.key"
        jwt.write_bytes(secrets.token_bytes(32))
        jwt.chmod(0o600)
        (run / "state").mkdir()
        gpus = _fake_gpus(run / "dev")
        if gpus:
            (run / "gres.conf").write_text(
                f"AutoDetect=off\nName=gpu File={run}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n"
            )
        names = [_local_node_name(), *GPU_NODES]
        ports: dict[str, int] = {}
        for name in names:
            ports[name] = free_port()
            (run / f"spool-{name}").mkdir()
        ctld_port = free_port()
        (run / "slurm.conf").write_text(_slurm_conf(run, ctld_port, ports, gpus))
        (run / "slurm.conf").chmod(0o644)

        for _ in range(100):
            if (run / "munge" / "munge.sock").exists():
                break
            if munged.poll() is not None:
                _fail(f"munged exited with {munged.returncode}", [run / "munged.log"])
            time.sleep(0.05)

        ctld = _popen(["slurmctld", "-D", "-i", "-f", senv["SLURM_CONF"]], senv)
        procs.append(("slurmctld", ctld))
        try:
            wait_port(ctld_port, 15, ctld, "slurmctld")
        except SystemExit as exc:
            _fail(str(exc.code).removeprefix("testenv: "), [run / "slurmctld.log"])
        for name in names:
            procs.append(
                (
                    f"slurmd {name}",
                    _popen(["slurmd", "-D", "-N", name, "-f", senv["SLURM_CONF"]], senv),
                )
            )

        rest_port = free_port()
        rest = _popen(
            [
                "slurmrestd",
                "-f",
                senv["SLURM_CONF"],
                "-a",
                "rest_auth/jwt",
                "-s",
                ",".join(OPENAPI_PLUGINS),
                "-u",
                REST_USER,
                f"127.0.0.1:{rest_port}",
            ],
            {**senv, "SLURM_JWT": "daemon"},
            run / "slurmrestd.log",
        )
        procs.append(("slurmrestd", rest))

        try:
            token_out = _run(
                ["scontrol", "token", "username=root", "lifespan=7200"], senv, timeout_s=10
            )
            token = token_out.strip().removeprefix("SLURM_JWT=")
            url = f"http://127.0.0.1:{rest_port}"
            _wait_nodes_idle(names, senv, deadline)
            _wait_rest(url, token, deadline, rest)
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            _fail(
                str(exc),
                [run / "slurmctld.log", run / f"slurmd-{GPU_NODES[0]}.log", run / "slurmrestd.log"],
            )
        _say(f"{len(names)} nodes idle and slurmrestd up in {time.monotonic() - t0:.1f} s")
        yield {
            "SLURM_REST_URL": url,
            "SLURM_JWT": token,
            "SLURM_USER": "root",
            "SLURM_CONF": senv["SLURM_CONF"],
        }
    finally:
        if ctld is not None and ctld.poll() is None:
            _cancel_all_jobs(senv)
        for _name, proc in reversed(procs):
            stop(proc, timeout_s=10)
        # A slurmd a test restarted (tests/slurm_reboot.py) is not ours to wait for: stopped
        # by its config file, which is this cluster's alone.
        if "SLURM_CONF" in senv:
            subprocess.run(["pkill", "-f", f"slurmd .*-f {senv['SLURM_CONF']}"], check=False)
        if not os.environ.get("MEOWBOT_KEEP_SLURM"):
            shutil.rmtree(run, ignore_errors=True)
