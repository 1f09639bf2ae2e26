"""The commit-message check `make lint` runs: git's subject length and the blank line."""

from __future__ import annotations

from scripts.check_commits import problems


def test_a_short_subject_a_blank_line_and_a_why_pass() -> None:
    assert (
        problems("Gather a burst before posting\n\nAlertmanager sends one webhook a group.\n") == []
    )
    assert problems("Remove slurm-*.out from the checkout\n") == []


def test_a_long_subject_or_a_body_without_blank_line_fails() -> None:
    assert problems("x" * 73) == ["subject of 73 characters (at most 72)"]
    assert problems("Fix it\nbecause") == ["no blank line after the subject"]
    assert problems("\n\nbody") == ["empty subject"]
