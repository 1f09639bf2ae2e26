"""prometheus-operator's schemas of the ServiceMonitor and the PrometheusRule, as validators the
tests run on deploy/kubernetes/'s objects (tests/validate_crd_objects.mjs).

The npm package @kubernetes-models/prometheus-operator ships them: its 6.0.0 is generated from
prometheus-operator v0.91.0's API types, the same types and validation markers its CRDs are
generated from (the package's changelog), compiled into one JSON Schema validator a kind.
Installed with npm, pinned, once per machine, into a cache folder that outlives the test run
(`${XDG_CACHE_HOME:-~/.cache}/meowbot/npm-prometheus-operator-6.0.0/`, about 3 s and 30 MB
cold) and reused as it is after; testenv exports the folder to the tests. Not a service:
nothing runs, and the tests need no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NAME = "@kubernetes-models/prometheus-operator"
VERSION = "6.0.0"
# Debian's nodejs (18 in bookworm) runs the validators, though the package asks for 22: npm
# says so and installs it all the same.
PACKAGES = {"nodejs": "node", "npm": "npm"}
VAR = "MEOWBOT_TEST_CRD_VALIDATORS"
INSTALL_S = 300.0


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "meowbot" / f"npm-prometheus-operator-{VERSION}"


def installed_version(folder: Path) -> str | None:
    """The version of the package installed under `folder`, None when there is none."""
    manifest = folder / "node_modules" / NAME / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return str(version)


def ensure() -> dict[str, str]:
    """The folder, installed when it is not yet: into a folder beside it, renamed into place
    once npm is done, so that a run cut short or another run at the same time never leaves a
    half-installed folder that looks whole."""
    folder = cache_dir()
    if installed_version(folder) != VERSION:
        folder.parent.mkdir(parents=True, exist_ok=True)
        part = Path(tempfile.mkdtemp(prefix=f"{folder.name}.part-", dir=folder.parent))
        spec = f"{NAME}@{VERSION}"
        print(f"testenv: installing {spec} with npm into {folder}", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(part), spec],
                capture_output=True,
                text=True,
                timeout=INSTALL_S,
                check=False,
            )
            if done.returncode != 0 or installed_version(part) != VERSION:
                tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
                sys.exit(f"testenv: npm could not install {spec}:\n{tail}")
            part.chmod(0o755)  # mkdtemp's 0700 otherwise
            try:
                part.rename(folder)
            except OSError:  # installed meanwhile by another run; anything else is replaced
                if installed_version(folder) != VERSION:
                    shutil.rmtree(folder)
                    part.rename(folder)
        finally:
            shutil.rmtree(part, ignore_errors=True)
    return {VAR: str(folder)}


if __name__ == "__main__":
    print(ensure()[VAR])
