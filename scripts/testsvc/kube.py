"""A real kube-apiserver 1.20.2 with Debian's etcd on loopback (no kubelet, no controllers).

The binary is built once per machine from Debian's source package (testsvc/kube_build.py,
about 3 minutes cold on two cores) and cached. So that a cold build does not add its minutes
to `make test`, `start` returns at once: etcd, then the build (or the cached binary), then the
API server run in a background thread while the other services start and the other tests run;
the Kubernetes tests wait for it (tests/conftest.py: kube_ready reads the status file).

Yields:
- MEOWBOT_TEST_KUBE_URL, MEOWBOT_TEST_KUBE_CA (written by the API server when it starts),
- MEOWBOT_TEST_KUBE_TOKEN (user `admin`, group system:masters),
- MEOWBOT_TEST_KUBE_USER_TOKEN (user `meowbot-test`, no rights until a test binds a role),
- MEOWBOT_TEST_KUBE_STATUS: a file that reads `starting`, then `ready` or `failed: why`,
- MEOWBOT_TEST_KUBECONFIG and MEOWBOT_TEST_KUBECONFIG_USER: kubeconfigs for both tokens.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from . import kube_build
from .common import free_port, say, stop, wait_port

PACKAGES = {"golang-go": "go", "etcd-server": "etcd"}
READY_TIMEOUT_S = 60.0
USER = "meowbot-test"


def _kubeconfig(url: str, ca: Path, user: str, token: str) -> str:
    # JSON is YAML: a kubeconfig without a YAML writer (scripts/ use the standard library only).
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "test", "cluster": {"server": url, "certificate-authority": str(ca)}}
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "test", "user": user}}],
            "current-context": user,
        },
        indent=1,
    )


def _wait_ready(url: str, ca: Path, token: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kube-apiserver exited with {proc.returncode} at start-up")
        if ca.exists():
            ctx = ssl.create_default_context(cafile=str(ca))
            req = urllib.request.Request(
                url + "/readyz", headers={"Authorization": f"Bearer {token}"}
            )
            with (
                contextlib.suppress(OSError, urllib.error.URLError, ssl.SSLError),
                urllib.request.urlopen(req, timeout=2, context=ctx) as resp,
            ):
                if resp.status == 200:
                    return
        time.sleep(0.2)
    raise RuntimeError(f"kube-apiserver was not ready within {READY_TIMEOUT_S:.0f} s")


class _Cluster:
    """etcd and kube-apiserver, started in a thread; stopped apiserver first."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.etcd_port, self.peer_port, self.port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca = tmp / "certs" / "apiserver.crt"
        self.admin_token = secrets.token_hex(16)
        self.user_token = secrets.token_hex(16)
        self.status = tmp / "status"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="kube", daemon=True)

    def _spawn(self, cmd: list[str], log: str) -> subprocess.Popen[bytes]:
        with self.lock:
            if self.stopping.is_set():
                raise RuntimeError("stopped before start")
            out = (self.tmp / log).open("ab")
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            self.procs.append(proc)
            return proc

    def _run(self) -> None:
        started = time.monotonic()
        try:
            etcd = self._spawn(
                [
                    "etcd",
                    "--data-dir",
                    str(self.tmp / "etcd"),
                    "--listen-client-urls",
                    f"http://127.0.0.1:{self.etcd_port}",
                    "--advertise-client-urls",
                    f"http://127.0.0.1:{self.etcd_port}",
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{self.peer_port}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{self.peer_port}",
                    "--initial-cluster",
                    f"default=http://127.0.0.1:{self.peer_port}",
                ],
                "etcd.log",
            )
            binary = kube_build.build(self.tmp / "build.log")
            built = time.monotonic() - started
            wait_port(self.etcd_port, 20, etcd, "etcd")
            key = self.tmp / "sa.key"
            subprocess.run(
                ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
            )
            pub = self.tmp / "sa.pub"
            subprocess.run(
                ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                check=True,
                capture_output=True,
            )
            tokens = self.tmp / "tokens.csv"
            tokens.write_text(
                f"{self.admin_token},admin,uid-admin,system:masters\n"
                f"{self.user_token},{USER},uid-{USER}\n"
            )
            api = self._spawn(
                [
                    str(binary),
                    f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    f"--cert-dir={self.tmp / 'certs'}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={pub}",
                    f"--service-account-signing-key-file={key}",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    f"--token-auth-file={tokens}",
                    "--authorization-mode=RBAC",
                    "--disable-admission-plugins=ServiceAccount",
                    "--endpoint-reconciler-type=none",
                ],
                "kube-apiserver.log",
            )
            _wait_ready(self.url, self.ca, self.admin_token, api)
            total = time.monotonic() - started
            say(
                "kube",
                f"API server ready at {self.url} ({built:.0f} s build, {total:.0f} s in all)",
            )
            self.status.write_text("ready")
        except Exception as exc:  # said to the tests, which fail with it
            self.status.write_text(f"failed: {exc}")
            say("kube", f"not started: {exc}")

    def stop(self) -> None:
        with self.lock:
            self.stopping.set()
            procs = list(self.procs)
        # The tests are over: a build still under way is cut (its Go cache keeps what it
        # compiled, so the next run goes on from there).
        kube_build.cancel()
        for proc in reversed(procs):  # the API server before etcd
            stop(proc)
        self.thread.join(30)


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    cluster = _Cluster(tmp)
    cluster.status.write_text("starting")
    for name, token, user in (
        ("admin.kubeconfig", cluster.admin_token, "admin"),
        ("user.kubeconfig", cluster.user_token, USER),
    ):
        (tmp / name).write_text(_kubeconfig(cluster.url, cluster.ca, user, token))
    cluster.thread.start()
    try:
        yield {
            "MEOWBOT_TEST_KUBE_URL": cluster.url,
            "MEOWBOT_TEST_KUBE_CA": str(cluster.ca),
            "MEOWBOT_TEST_KUBE_TOKEN": cluster.admin_token,
            "MEOWBOT_TEST_KUBE_USER_TOKEN": cluster.user_token,
            "MEOWBOT_TEST_KUBE_STATUS": str(cluster.status),
            "MEOWBOT_TEST_KUBECONFIG": str(tmp / "admin.kubeconfig"),
            "MEOWBOT_TEST_KUBECONFIG_USER": str(tmp / "user.kubeconfig"),
        }
    finally:
        cluster.stop()
