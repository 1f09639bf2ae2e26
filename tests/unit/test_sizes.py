"""ARCHITECTURE.md's Sizes table is measured, and the check fails when it is not current."""

from __future__ import annotations

from pathlib import Path

from scripts.sizes import BEGIN, END, current, sizes, table


def test_the_table_is_the_largest_modules_rounded(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "handlers").mkdir()
    (tmp_path / "bot" / "big.py").write_text("x = 1\n" * 1234)
    (tmp_path / "handlers" / "small.py").write_text("y = 2\n" * 10)
    found = sizes(tmp_path)
    assert found == [("bot/big.py", 1234), ("handlers/small.py", 10)]
    text = table(found)
    assert "| `bot/big.py` | 1,250 |" in text and "| all 2 modules | 1,000 |" in text


def test_the_block_is_read_between_its_markers() -> None:
    doc = f"# Sizes\n\n{BEGIN}\n| a | 1 |\n{END}\nafter\n"
    assert current(doc) == "| a | 1 |"
    assert current("no table here") is None
