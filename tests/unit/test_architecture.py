"""ARCHITECTURE.md stays true: every file or folder it names exists, and the functions it says
a file holds are there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
PATH = re.compile(r"`((?:bot|handlers|tests|scripts|bench)/[\w./-]*)(?:: (\w+))?`")


def test_every_path_it_names_exists_and_holds_what_it_says() -> None:
    named = PATH.findall(PAGE)
    assert len(named) > 20
    for path, function in named:
        assert (ROOT / path).exists(), path
        if function:
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^(?:async )?def {function}\b|^class {function}\b", source, re.M), (
                f"{path}: {function}"
            )
