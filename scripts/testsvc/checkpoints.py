"""Real in-training checkpoints and a real OpenAI-compatible server over them, for the playground.

1. ``meowbot demo-checkpoints`` (bot/playground/demo_train.py) trains the tiny run: a GPT-2 of
   2 layers and 64 wide, 500 steps on CPU (about 50 s on 2 cores), a checkpoint every 100
   steps. The result is cached in ``~/.cache/meowbot/`` (``$XDG_CACHE_HOME``), keyed by a hash
   of demo_train.py, the arguments, Python's version (the text includes stdlib docstrings) and
   the torch/transformers/tokenizers versions, so only a machine's first ``make test`` trains.
2. Steps 100-400 are copied into ``<tmp>/checkpoints/<run>/``, before the server starts; step 500
   is copied beside it, into ``<tmp>/next/step-500``, for a test to publish later by moving it
   into place (one ``os.rename``, same file system). Only one test may move it: the others copy.
3. ``HF_HUB_OFFLINE=1 transformers serve --host 127.0.0.1 --port P --device cpu`` starts on a free
   port (about 5-7 s); one completion of step 100 proves it serves before the tests run.

Yields:

- ``PLAYGROUND_TEST_URL``: the server's base URL, ending in ``/v1``;
- ``PLAYGROUND_TEST_DIR``: the checkpoint root (``<run>/step-<N>/`` folders under it);
- ``PLAYGROUND_TEST_RUN``: the run's name (``tiny-zen``);
- ``PLAYGROUND_TEST_NEXT``: the held-back ``step-500`` folder, outside PLAYGROUND_TEST_DIR;
- ``PLAYGROUND_TEST_SERVE_CMD``: the server's argv joined by ``\\x1f``, without ``--port``: a
  test that kills a server (mid-stream) starts its own with ``--port N`` appended, under
  ``HF_HUB_OFFLINE=1``.

It installs nothing: the Makefile installs torch (the CPU build, first) and the
``playground-test`` extra. Standard library only here.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from .common import fail, free_port, say, stop

PACKAGES: dict[str, str] = {}  # Python packages only, installed by the Makefile

ROOT = Path(__file__).resolve().parents[2]
DEMO_TRAIN = ROOT / "bot" / "playground" / "demo_train.py"
RUN = "tiny-zen"
STEPS = 500
EVERY = 100
SEED = 0
INSTALL_HINT = 'pip install torch==2.13.0 && pip install -e ".[test,playground-test]"'
TRAIN_TIMEOUT_S = 600.0  # about 50 s seen on 2 busy cores
START_TIMEOUT_S = 90.0  # about 7 s seen, most of it importing torch and transformers
WARM_TIMEOUT_S = 60.0


def _say(msg: str) -> None:
    say("checkpoints", msg)


def _fail(msg: str, logs: Sequence[Path] = ()) -> NoReturn:
    fail("checkpoints", msg, logs)


def _versions() -> dict[str, str]:
    versions = {}
    for dist in ("torch", "transformers", "tokenizers", "fastapi", "uvicorn"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            _fail(
                f"{dist} is not installed in {sys.prefix}; `make test` installs it, or run: "
                f"{INSTALL_HINT}"
            )
    return versions


def cache_dir(versions: dict[str, str]) -> Path:
    key = hashlib.sha256()
    key.update(DEMO_TRAIN.read_bytes())
    key.update(json.dumps([RUN, STEPS, EVERY, SEED, sys.version, versions]).encode())
    # Beside the kube-apiserver build: a fresh clone on the same machine trains no more.
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "meowbot" / f"demo-checkpoints-{key.hexdigest()[:16]}"


def _train(cache: Path, tmp: Path) -> None:
    """Trains into a side folder, then renames it to the cache: never half a cache."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f"{cache.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    log = tmp / "train.log"
    cmd = [
        sys.executable,
        "-m",
        "bot",
        "demo-checkpoints",
        "--out",
        str(partial),
        "--run",
        RUN,
        "--steps",
        str(STEPS),
        "--every",
        str(EVERY),
        "--seed",
        str(SEED),
    ]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    _say(f"training {RUN} ({STEPS} steps on CPU, about a minute; cached for the next run)")
    started = time.monotonic()
    with log.open("wb") as out:
        try:
            done = subprocess.run(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=TRAIN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            _fail(f"training took over {TRAIN_TIMEOUT_S:.0f} s", [log])
    if done.returncode != 0:
        _fail(f"training exited with {done.returncode}", [log])
    with contextlib.suppress(OSError):  # another run may have filled the cache meanwhile
        partial.rename(cache)
    shutil.rmtree(partial, ignore_errors=True)
    last = log.read_text(errors="replace").splitlines()[-3:]
    _say(f"trained in {time.monotonic() - started:.1f} s: " + " | ".join(last))


def _get(url: str, timeout_s: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return bytes(resp.read())


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _fail(f"transformers serve exited with {proc.returncode} at start-up", [log])
        with contextlib.suppress(OSError):
            _get(f"{base}/health", 1)
            return
        time.sleep(0.1)
    _fail(f"transformers serve did not answer within {START_TIMEOUT_S:.0f} s", [log])


def _warm(url: str, model: str, log: Path) -> None:
    body = json.dumps({"model": model, "prompt": "Beautiful is", "max_tokens": 4, "temperature": 0})
    req = urllib.request.Request(
        f"{url}/completions", body.encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=WARM_TIMEOUT_S) as resp:
            answer = json.loads(resp.read())
    except (OSError, ValueError) as exc:
        _fail(f"the first completion failed: {exc}", [log])
    if not answer.get("choices"):
        _fail(f"the first completion had no choices: {answer}", [log])


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    versions = _versions()
    cache = cache_dir(versions)
    if (cache / RUN / f"step-{STEPS}").is_dir():
        _say(f"checkpoints cached in {cache}")
    else:
        _train(cache, tmp)
    root = tmp / "runs"
    (root / RUN).mkdir(parents=True)
    for step in range(EVERY, STEPS, EVERY):
        shutil.copytree(cache / RUN / f"step-{step}", root / RUN / f"step-{step}")
    nxt = tmp / "next" / f"step-{STEPS}"
    shutil.copytree(cache / RUN / f"step-{STEPS}", nxt)

    transformers_cli = Path(sys.executable).parent / "transformers"
    if not transformers_cli.exists():
        _fail(f"{transformers_cli} is missing; run: {INSTALL_HINT}")
    serve = [
        str(transformers_cli),
        "serve",
        "--host",
        "127.0.0.1",
        "--device",
        "cpu",
        "--log-level",
        "warning",
        "--model-timeout",
        "3600",
    ]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp / "serve.log"
    started = time.monotonic()
    serve_env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*serve, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=serve_env
        )
    try:
        _wait_ready(base, proc, log)
        up = time.monotonic() - started
        _warm(f"{base}/v1", str(root / RUN / f"step-{EVERY}"), log)
        _say(
            f"transformers serve on {base} in {up:.1f} s, first completion after "
            f"{time.monotonic() - started:.1f} s"
        )
        yield {
            "PLAYGROUND_TEST_URL": f"{base}/v1",
            "PLAYGROUND_TEST_DIR": str(root),
            "PLAYGROUND_TEST_RUN": RUN,
            "PLAYGROUND_TEST_NEXT": str(nxt),
            "PLAYGROUND_TEST_SERVE_CMD": "\x1f".join(serve),
        }
    finally:
        stop(proc)
