"""The Dockerfile builds the bot `make run` runs: a build stage that installs the project (no
test extras, not editable) and a final stage that only takes the install, runs `meowbot run`
as a numeric non-root user, checks /healthz and writes nothing outside /tmp. Docker cannot run
here; tests/integration/test_wheel.py installs what the build stage copies and runs it."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from fnmatch import fnmatch

from tests.deploy_files import DOCKERFILE, REPO, Stage, dockerfile_stages, make_run_argv

ARGS, STAGES = dockerfile_stages(DOCKERFILE.read_text())
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def final() -> Stage:
    return STAGES[-1]


def env_of(stage: Stage) -> dict[str, str]:
    return dict(item.split("=", 1) for args in stage.all("ENV") for item in shlex.split(args))


def test_two_stages_on_one_python_that_pyproject_allows() -> None:
    assert len(STAGES) == 2
    build, run = STAGES
    assert build.name and run.name is None
    # The install is made for the final stage's interpreter.
    assert build.base == run.base
    m = re.fullmatch(r"python:(\d+)\.(\d+)-slim-(\w+)", run.base)
    assert m, run.base
    version = f"{m.group(1)}.{m.group(2)}"
    assert PYPROJECT["project"]["requires-python"] == f">={version}"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == version
    # bookworm: Debian 12, whose slurm-client is Slurm 22.05 (scontrol for its drains).
    assert m.group(3) == "bookworm"


def test_the_build_stage_copies_every_package_pyproject_declares() -> None:
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    top = {  # what setuptools' find takes at the top: a folder with __init__.py that matches
        p.name
        for p in REPO.iterdir()
        if (p / "__init__.py").exists() and any(fnmatch(p.name, pattern) for pattern in include)
    }
    assert top == {"bot", "handlers"}
    copied = [shlex.split(args) for args in STAGES[0].all("COPY")]
    sources = {src for *srcs, _ in copied for src in srcs}
    assert top | {"pyproject.toml", PYPROJECT["project"]["readme"]} <= sources
    for *srcs, dest in copied:
        for src in srcs:
            if src in top:
                assert dest.rstrip("/") in (f"./{src}", src), (src, dest)


def test_the_install_is_the_bot_alone_and_not_editable() -> None:
    runs = "\n".join(run for stage in STAGES for run in stage.all("RUN"))
    [install] = re.findall(r"pip install ([^&;\n]*)", runs)
    *options, target = shlex.split(install)
    assert target == "."  # the project itself: `.[test]` would add the test extras
    assert "--prefix=/install" in options
    assert not {"-e", "--editable"} & set(options)
    for extra in PYPROJECT["project"]["optional-dependencies"]:
        assert not re.search(rf"[\[,]\s*{re.escape(extra)}\s*[\],]", runs), extra
    assert "torch" not in runs and "transformers" not in runs
    # The final stage takes the install only: no source tree, nothing from the context.
    assert final().all("COPY") == ["--from=build /install /usr/local"]


def test_the_final_stage_runs_as_a_numeric_non_root_user() -> None:
    [user] = final().all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0
    assert not gid or (gid.isdigit() and int(gid) != 0)
    # The user is made before it is switched to.
    keywords = [kw for kw, _ in final().instructions]
    made = next(i for i, (kw, a) in enumerate(final().instructions) if f"--uid {uid}" in a)
    assert made < keywords.index("USER")


def test_it_runs_meowbot_run_as_make_run_does() -> None:
    [entry] = final().all("ENTRYPOINT")
    [cmd] = final().all("CMD")
    assert json.loads(entry) + json.loads(cmd) == make_run_argv()


def test_the_healthcheck_asks_healthz_on_the_port() -> None:
    [check] = final().all("HEALTHCHECK")
    assert "CMD " in check and "/healthz" in check
    assert "127.0.0.1" in check and "PORT" in check
    assert env_of(final())["PORT"] == "3000"
    assert final().all("EXPOSE") == ["3000"]


def test_a_read_only_root_filesystem_is_enough() -> None:
    """Kubernetes runs the image with readOnlyRootFilesystem and an emptyDir at /tmp: the
    font cache goes there, and Python writes no bytecode next to the install."""
    env = env_of(final())
    assert env["MPLCONFIGDIR"].startswith("/tmp/")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_apt_and_pip_leave_no_cache() -> None:
    [scontrol] = [r for r in final().all("RUN") if "slurm-client" in r]
    assert "--no-install-recommends" in scontrol
    assert "rm -rf /var/lib/apt/lists/*" in scontrol
    [install] = [r for r in STAGES[0].all("RUN") if "pip install" in r]
    assert "--no-cache-dir" in install
