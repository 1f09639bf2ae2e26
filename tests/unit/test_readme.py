"""The README and the Makefile as a new user meets them in a fresh clone."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_relative_link_stays_inside_the_repository() -> None:
    links = re.findall(r"\]\(([^)#][^)]*)\)", README)
    for target in links:
        if re.match(r"[a-z]+://", target):
            continue
        path = (ROOT / target).resolve()
        assert path.is_relative_to(ROOT), f"{target} leaves the repository"
        assert path.exists(), f"{target} does not exist in the repository"


def test_in_page_links_name_a_heading() -> None:
    anchors = {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", README, re.M)
    }
    for anchor in re.findall(r"\]\(#([^)]+)\)", README):
        assert anchor in anchors


def test_no_history_of_how_it_was_built() -> None:
    # The issues live in the tracker, not in a clone: a reader cannot follow "issue #4".
    assert not re.search(r"issue\s*#\d", README, re.I)
    assert "not built yet" not in README


def test_documents_what_a_user_can_set_and_run() -> None:
    assert "demo-checkpoints --serve" in README
    assert "dashboard_url" in README


def _dry_run(target: str, venv: Path) -> str:
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target", ["run", "shell"])
def test_make_run_installs_the_bot_only(target: str, tmp_path: Path) -> None:
    plan = _dry_run(target, tmp_path / "venv")
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert any(line.rstrip().endswith("-e .") for line in installs), plan
    assert "torch" not in plan and "[test" not in plan and "playground-test" not in plan


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target", ["test", "lint", "unit"])
def test_make_test_installs_everything(target: str, tmp_path: Path) -> None:
    plan = _dry_run(target, tmp_path / "venv")
    assert "torch==" in plan and ".[test,playground-test]" in plan


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_demo_checkpoints_default_folder_is_ignored() -> None:
    args = _parser().parse_args(["demo-checkpoints"])
    probe = f"{args.out}/tiny-zen/step-100/model.safetensors"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", probe], check=False
    )
    assert done.returncode == 0, f"{args.out}/ is not in .gitignore"


def test_benchmarks_give_figures_not_the_story_of_earlier_versions() -> None:
    for phrase in ("a first version", "An earlier run found", "once made a", "Before the bench"):
        assert phrase not in README
