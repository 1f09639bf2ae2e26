"""Builds kube-apiserver 1.20.2 from Debian's `kubernetes` source package, once per machine.

No registry ships a kube-apiserver binary and there is no Docker engine or Go module proxy
here, but Debian's source package holds the upstream 1.20.2 tree with `vendor/`, and Debian's
golang-go builds it in GOPATH mode (the recipe of ../shared/SERVICES.md). The binary, the
source and the Go build cache live in a cache folder that outlives the test run
(`${XDG_CACHE_HOME:-~/.cache}/meowbot/kube-apiserver-1.20.2/`): a present binary is reused
as it is, and a rebuild with the Go cache takes seconds instead of about 3 minutes.

Runnable alone (`python scripts/testsvc/kube_build.py`) to warm the cache by hand.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

VERSION = "v1.20.2"
DEB_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
ORIG_TAR = "kubernetes_1.20.5+really1.20.2.orig.tar.gz"
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
# Packages whose openapi is generated elsewhere, or not part of the server.
_OPENAPI_SKIP = ("vendor/k8s.io/code-generator", "vendor/k8s.io/sample-apiserver")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "meowbot" / "kube-apiserver-1.20.2"


# The build's own revision, in the binary's name: a binary built before a fix of the recipe
# is not reused (r2: the vendored reflect2 made safe for Go 1.18 and later, `_fix_reflect2`).
BUILD_REVISION = "r2"


def binary_path() -> Path:
    return cache_dir() / f"kube-apiserver-{BUILD_REVISION}"


def _say(msg: str) -> None:
    print(f"testenv: kube: {msg}", file=sys.stderr, flush=True)


_running: list[subprocess.Popen[bytes]] = []
_cancelled = threading.Event()


def cancel() -> None:
    """Stops a build under way (the tests are over); the Go cache keeps what it compiled."""
    _cancelled.set()
    for proc in list(_running):
        if proc.poll() is None:
            proc.kill()


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    if _cancelled.is_set():
        raise RuntimeError("build cancelled")
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        # nice: the build shares the machine with the tests that run meanwhile.
        proc = subprocess.Popen(
            ["nice", "-n", "15", *cmd], cwd=cwd, env=env, stdout=out, stderr=out
        )
        _running.append(proc)
        try:
            rc = proc.wait()
        finally:
            _running.remove(proc)
    if rc != 0:
        raise RuntimeError(f"{cmd[0]} {cmd[1] if len(cmd) > 1 else ''} exited {rc}; see {log}")


def _fetch_source(work: Path, log: Path) -> Path:
    """The upstream tarball from Debian's source package, with apt lists of our own so the
    system's apt configuration is neither read for deb-src nor changed."""
    tar = work / "src" / ORIG_TAR
    if tar.exists():
        return tar
    parts = work / "apt" / "sources.list.d"
    parts.mkdir(parents=True, exist_ok=True)
    text = SOURCES.read_text() if SOURCES.exists() else ""
    if not text:
        text = (
            "Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
            "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
    (parts / "debian.sources").write_text(text.replace("Types: deb\n", "Types: deb-src\n"))
    for sub in ("lists/partial", "cache/archives/partial"):
        (work / "apt" / sub).mkdir(parents=True, exist_ok=True)
    apt_o = [
        "-o",
        "Dir::Etc::SourceList=/dev/null",
        "-o",
        f"Dir::Etc::SourceParts={parts}",
        "-o",
        f"Dir::State::Lists={work / 'apt' / 'lists'}",
        "-o",
        f"Dir::Cache={work / 'apt' / 'cache'}",
    ]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", *apt_o, "update", "-qq"], work, env, log)
    (work / "src").mkdir(exist_ok=True)
    _run(
        ["apt-get", *apt_o, "source", "--download-only", f"kubernetes={DEB_VERSION}"],
        work / "src",
        env,
        log,
    )
    if not tar.exists():
        raise RuntimeError(f"apt-get source left no {ORIG_TAR}; see {log}")
    return tar


def _openapi_packages(tree: Path) -> list[str]:
    """Every package with a `+k8s:openapi-gen=` tag, as the generator's -i wants them."""
    found: set[str] = set()
    for top in ("pkg", "staging", "vendor", "cmd", "plugin"):
        root = tree / top
        if not root.exists():
            continue
        out = subprocess.run(
            ["grep", "-rl", "--include=*.go", "+k8s:openapi-gen=", str(root)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        for line in out.splitlines():
            rel = str(Path(line).parent.relative_to(tree))
            if rel.startswith("staging/src/"):
                rel = "vendor/" + rel[len("staging/src/") :]
            if rel.startswith(_OPENAPI_SKIP):
                continue
            found.add("k8s.io/kubernetes/" + rel)
    return sorted(found)


def build(log: Path | None = None) -> Path:
    """The kube-apiserver binary: the cached one, else built (about 3 minutes cold on two
    cores, seconds with the Go build cache). Raises RuntimeError with the log's path."""
    binary = binary_path()
    if binary.exists():
        return binary
    work = cache_dir()
    work.mkdir(parents=True, exist_ok=True)
    # Two test runs starting at once on a fresh machine build once: the second waits here
    # and finds the binary.
    with (work / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        return _build(work, binary, log or work / "build.log")


def _build(work: Path, binary: Path, log: Path) -> Path:
    started = time.monotonic()
    tar = _fetch_source(work, log)
    gopath = work / "gopath"
    tree = gopath / "src" / "k8s.io" / "kubernetes"
    if not (tree / "cmd" / "kube-apiserver").exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tar) as tf:
            top = tf.getmembers()[0].name.split("/")[0]
            # Extraction filters came in 3.11.4; Debian 12's Python is 3.11.2.
            if hasattr(tarfile, "tar_filter"):
                tf.extractall(tree.parent, filter="tar")
            else:
                tf.extractall(tree.parent)  # Debian's own signed source package
        (tree.parent / top).rename(tree)
    _fix_reflect2(tree / "vendor" / "github.com" / "modern-go" / "reflect2")
    env = {
        **os.environ,
        "GOPATH": str(gopath),
        "GOCACHE": str(work / "gocache"),
        "GO111MODULE": "off",
        "CGO_ENABLED": "0",
        "GOMAXPROCS": "2",
        "GOFLAGS": "",
        # go finds vendor/ from the working directory as PWD spells it.
        "PWD": str(tree),
    }
    generated = tree / "pkg" / "generated" / "openapi" / "zz_generated.openapi.go"
    if not generated.exists():
        gen = work / "openapi-gen"
        _run(
            ["go", "build", "-o", str(gen), "./vendor/k8s.io/kube-openapi/cmd/openapi-gen"],
            tree,
            env,
            log,
        )
        _run(
            [
                str(gen),
                "-i",
                ",".join(_openapi_packages(tree)),
                "-p",
                "k8s.io/kubernetes/pkg/generated/openapi",
                "-O",
                "zz_generated.openapi",
                "-h",
                "vendor/k8s.io/code-generator/hack/boilerplate.go.txt",
                "-r",
                str(work / "violations.report"),
            ],
            tree,
            env,
            log,
        )
    partial = work / "kube-apiserver.partial"
    ldflags = (
        f"-s -w -X k8s.io/kubernetes/vendor/k8s.io/component-base/version.gitVersion={VERSION}"
    )
    _run(
        [
            "go",
            "build",
            "-tags",
            "selinux,notest",
            "-ldflags",
            ldflags,
            "-o",
            str(partial),
            "./cmd/kube-apiserver",
        ],
        tree,
        env,
        log,
    )
    # A rename, so a run that finds the binary never finds half of one.
    partial.rename(binary)
    _say(f"built kube-apiserver in {time.monotonic() - started:.0f} s ({binary})")
    return binary


# reflect2 1.0.1 (vendored in 1.20.2) links to reflect.mapiterinit with its pre-1.18 signature,
# which returned the iterator; from Go 1.18 the caller passes one in. Built with Debian's Go
# 1.19, json-iterator's first walk of a map (every custom resource's metadata) passed
# garbage for it and kube-apiserver died with SIGSEGV. reflect2 1.0.2's fix, the same way:
# the iterator is the caller's, laid out as the runtime's.
_REFLECT2_FIXES = (
    (
        "unsafe_link.go",
        "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer) *hiter\n",
        "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)\n",
    ),
    (
        "unsafe_link.go",
        "\t// rest fields are ignored\n",
        "\tt           unsafe.Pointer\n\th           unsafe.Pointer\n"
        "\tbuckets     unsafe.Pointer\n\tbptr        unsafe.Pointer\n"
        "\toverflow    *[]unsafe.Pointer\n\toldoverflow *[]unsafe.Pointer\n"
        "\tstartBucket uintptr\n\toffset      uint8\n\twrapped     bool\n"
        "\tB           uint8\n\ti           uint8\n\tbucket      uintptr\n"
        "\tcheckBucket uintptr\n",
    ),
    (
        "unsafe_map.go",
        "\treturn &UnsafeMapIterator{\n\t\thiter:      mapiterinit(type2.rtype, "
        "*(*unsafe.Pointer)(obj)),\n",
        "\tvar it hiter\n\tmapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)\n"
        "\treturn &UnsafeMapIterator{\n\t\thiter:      &it,\n",
    ),
)


def _fix_reflect2(folder: Path) -> None:
    """Applies `_REFLECT2_FIXES` once (a tree already fixed is left as it is)."""
    for name, old, new in _REFLECT2_FIXES:
        path = folder / name
        text = path.read_text()
        if new in text:
            continue
        if text.count(old) != 1:
            raise RuntimeError(f"{path}: not reflect2 1.0.1 as expected; cannot fix it")
        path.write_text(text.replace(old, new))


if __name__ == "__main__":
    print(build())
