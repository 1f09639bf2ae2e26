"""scripts/check_links.py: relative links and #anchors of the README and docs/ resolve."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_links", ROOT / "scripts/check_links.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_links"] = module
    spec.loader.exec_module(module)
    return module


check_links = _load()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/alerts.md").write_text(
        "# Channel alerts\n\n## Which alerts post, and since when\n\n## `alerts:` settings\n\n"
        "## Settings\n\n## Settings\n\n```yaml\n# not: a heading\n```\n",
        encoding="utf-8",
    )
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot/app.py").write_text("", encoding="utf-8")
    return tmp_path


def _problems(repo: Path, text: str) -> list[str]:
    page = repo / "README.md"
    page.write_text(text, encoding="utf-8")
    return list(check_links.check_file(page, repo))


def test_links_that_resolve_pass(repo: Path) -> None:
    text = (
        "# meowbot\n\n## The code\n\n"
        "[alerts](docs/alerts.md), [when](docs/alerts.md#which-alerts-post-and-since-when), "
        "[settings](docs/alerts.md#alerts-settings), [again](docs/alerts.md#settings-1), "
        "[here](#the-code), [app](bot/app.py), [folder](docs/), "
        '[web](https://example.org/x#y), ![chart](docs/alerts.md "a title")\n'
    )
    assert _problems(repo, text) == []


def test_a_broken_link_fails(repo: Path) -> None:
    problems = _problems(repo, "See [the guide](docs/alert.md).\n")
    assert len(problems) == 1
    assert "docs/alert.md" in problems[0] and "no such file" in problems[0]
    assert problems[0].startswith("README.md:1:")


def test_a_broken_anchor_fails(repo: Path) -> None:
    problems = _problems(repo, "# meowbot\n\n[a](docs/alerts.md#since-when) [b](#tests)\n")
    assert len(problems) == 2
    assert "#since-when" in problems[0] and "#tests" in problems[1]


def test_headings_in_code_are_not_anchors(repo: Path) -> None:
    assert _problems(repo, "[x](docs/alerts.md#not-a-heading)\n")


def test_links_in_code_are_not_links(repo: Path) -> None:
    assert _problems(repo, "`[x](nowhere.md)`\n\n```\n[y](nowhere.md)\n```\n") == []


def test_a_link_out_of_the_repository_fails(repo: Path) -> None:
    (repo.parent / "outside.md").write_text("x", encoding="utf-8")
    assert "leaves the repository" in _problems(repo, "[x](../outside.md)\n")[0]


def test_github_anchor_rules() -> None:
    assert check_links.slug("What meowbot's words promise") == "what-meowbots-words-promise"
    assert check_links.slug("Where /regressions reads the fleet's history") == (
        "where-regressions-reads-the-fleets-history"
    )
    assert check_links.slug("`bench/ack.py`: acks") == "benchackpy-acks"
    assert check_links.slug("The [code](x.md) *map*") == "the-code-map"
    assert check_links.anchors("# A\n\n# A\n\nB\n---\n") == {"a", "a-1", "b"}


def test_the_readme_and_docs_resolve(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_links.main([]) == 0, capsys.readouterr().err
