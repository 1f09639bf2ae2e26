#!/usr/bin/env python3
"""The largest modules of bot/ and handlers/, in lines, as ARCHITECTURE.md's Sizes table shows
them: measured here rather than written by hand, so the map stays true.

Usage: scripts/sizes.py            print the table
       scripts/sizes.py --write    rewrite the table in ARCHITECTURE.md
       scripts/sizes.py --check    fail when the table is not what --write would write
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "ARCHITECTURE.md"
BEGIN = "<!-- sizes: written by scripts/sizes.py --write -->"
END = "<!-- sizes: end -->"
TOP = 10
ROUND = 50  # lines: a small edit leaves the table as it is


def sizes(root: Path = ROOT) -> list[tuple[str, int]]:
    """Every module of bot/ and handlers/ with its line count, largest first."""
    found = [
        (path.relative_to(root).as_posix(), len(path.read_text().splitlines()))
        for package in ("bot", "handlers")
        for path in (root / package).rglob("*.py")
    ]
    return sorted(found, key=lambda item: (-item[1], item[0]))


def table(found: list[tuple[str, int]]) -> str:
    """The largest `TOP` modules, rounded to `ROUND` lines, and the count of all of them."""
    rows = [f"| `{name}` | {round(lines / ROUND) * ROUND:,} |" for name, lines in found[:TOP]]
    total = sum(lines for _, lines in found)
    total_row = f"| all {len(found)} modules | {round(total / 1000) * 1000:,} |"
    return "\n".join(["| module | lines (about) |", "|---|---|", *rows, total_row])


def current(doc: str) -> str | None:
    if BEGIN not in doc or END not in doc:
        return None
    return doc.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def main(argv: list[str]) -> int:
    want = table(sizes())
    doc = DOC.read_text()
    if "--write" in argv:
        if current(doc) is None:
            sys.exit(f"{DOC.name} has no {BEGIN} ... {END} block")
        head, rest = doc.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{want}\n{END}{rest.split(END, 1)[1]}")
        return 0
    if "--check" in argv:
        if current(doc) != want:
            print(f"{DOC.name}'s sizes are out of date: run scripts/sizes.py --write")
            return 1
        print(f"{DOC.name}'s sizes are current.")
        return 0
    print(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
