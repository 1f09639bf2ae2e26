"""The image's build stage runs `pip install .` over exactly what the Dockerfile copies in: a
normal, not editable, install. Here the same files are copied out of the checkout, built into
a wheel, installed into a fresh venv, and the installed bot is run from a folder outside the
checkout, so that nothing can be read from the source tree: every module is there (the same
files as the checkout's), each imports, and `meowbot --help`, `prometheus-rules` and `doctor`
work with no configuration.

What differs from the image, and why: no network, so the wheel is built with this venv's
setuptools (`--no-build-isolation`) and the fresh venv borrows this venv's dependencies (a
.pth file naming its site-packages, whose own .pth files, this checkout's editable install
among them, Python then does not read) instead of downloading them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import yaml

from tests.deploy_files import DOCKERFILE, REPO, dockerfile_stages

PACKAGES = ("bot", "handlers")
# The environment a fresh install starts from: none of the test services' settings.
DROP = ("SLACK_", "PROMETHEUS_", "SLURM_", "ALERTMANAGER_", "MEOWBOT_", "REDIS_", "PLAYGROUND_")


def build_context(into: Path) -> None:
    """What the build stage's COPY lines take from the checkout (less **/__pycache__, as
    .dockerignore says)."""
    _, stages = dockerfile_stages(DOCKERFILE.read_text())
    for args in stages[0].all("COPY"):
        *sources, dest = shlex.split(args)
        assert not any(s.startswith("--") for s in sources), args
        for source in sources:
            target = into / dest / source if dest.endswith("/") else into / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            if (REPO / source).is_dir():
                ignore = shutil.ignore_patterns("__pycache__")
                shutil.copytree(REPO / source, target, ignore=ignore)
            else:
                shutil.copy2(REPO / source, target)


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_installed_wheel_runs_the_bot_from_outside_the_checkout(tmp_path: Path) -> None:
    context, dist, venv, away = (tmp_path / n for n in ("context", "dist", "venv", "away"))
    for folder in (context, dist, away):
        folder.mkdir()
    build_context(context)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheel = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(context)]
    subprocess.run(wheel, check=True, capture_output=True, timeout=300)
    [built] = dist.glob("meowbot-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(built)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(DROP) and k not in ("PYTHONPATH", "KUBECONFIG")
    }
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], away, env
    )
    site = Path(purelib.stdout.strip())
    (site / "zz_meowbot_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    # Every module of the checkout is installed, and only those.
    installed = {str(p.relative_to(site)) for pkg in PACKAGES for p in (site / pkg).rglob("*.py")}
    source = {str(p.relative_to(REPO)) for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    assert installed == source, (sorted(source - installed), sorted(installed - source))

    # ... and each imports from the install, not from the checkout.
    every = (
        "import importlib, json, pkgutil, bot, handlers\n"
        "names = [m.name for p in (bot, handlers) for m in pkgutil.walk_packages(p.__path__,"
        " p.__name__ + '.') if not m.name.endswith('.__main__')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(json.dumps([bot.__file__, handlers.__file__, len(names)]))\n"
    )
    imported = run([str(python), "-c", every], away, env)
    assert imported.returncode == 0, imported.stderr
    bot_file, handlers_file, count = json.loads(imported.stdout)
    assert Path(bot_file).is_relative_to(site) and Path(handlers_file).is_relative_to(site)
    assert count == len(installed) - len(PACKAGES) - 1  # less the __init__s and bot/__main__

    meowbot = str(venv / "bin" / "meowbot")
    helped = run([meowbot, "--help"], away, env)
    assert helped.returncode == 0, helped.stderr
    assert all(verb in helped.stdout for verb in ("run", "doctor", "prometheus-rules"))

    rules = run([meowbot, "prometheus-rules"], away, env)
    assert rules.returncode == 0, rules.stderr
    assert yaml.safe_load(rules.stdout)["groups"]

    # docs/doctor.md: 0 unless something failed; with nothing configured nothing can.
    doctor = run([meowbot, "doctor", "--json"], away, env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["ok"] is True
    assert {"Slack", "Redis", "Prometheus"} <= {c["part"] for c in report["checks"]}
    assert not [c for c in report["checks"] if c["status"] == "fail"]
    # ... and 2 for a wrong setting, said in one line.
    wrong = run([meowbot, "doctor", "--json"], away, {**env, "PORT": "http"})
    assert wrong.returncode == 2 and "PORT must be" in wrong.stderr
