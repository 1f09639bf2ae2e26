#!/usr/bin/env python3
"""Commit messages as git's tools show them: a subject of at most 72 characters, then a blank
line before any body. Checked for the commits after SINCE (the rule holds from there on; the
history before it is left as it was). Standard library and git only.

Usage: scripts/check_commits.py [REV_RANGE]   (default: SINCE..HEAD)
"""

from __future__ import annotations

import subprocess
import sys

SINCE = "b17ba8d"
MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with one commit message (empty: nothing)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    found = []
    if not subject.strip():
        found.append("empty subject")
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject of {len(subject)} characters (at most {MAX_SUBJECT})")
    if len(lines) > 1 and lines[1].strip():
        found.append("no blank line after the subject")
    return found


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def main(argv: list[str]) -> int:
    if argv:
        rev_range = argv[0]
    else:
        known = (
            subprocess.run(
                ["git", "cat-file", "-e", f"{SINCE}^{{commit}}"], capture_output=True
            ).returncode
            == 0
        )
        # A shallow clone without SINCE: its newest commit still follows the rule.
        rev_range = f"{SINCE}..HEAD" if known else "HEAD^!"
    log = _git("log", "--format=%h%x00%B%x01", rev_range)
    bad = 0
    for record in filter(str.strip, log.split("\x01")):
        sha, _, message = record.strip("\n").partition("\x00")
        for problem in problems(message):
            print(f"{sha}: {problem}: {message.splitlines()[0][:80]!r}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
