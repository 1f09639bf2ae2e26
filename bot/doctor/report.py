"""The doctor's report: one line a thing checked, pass / warn / fail with the fix, rendered for
a terminal or as JSON, and the exit code a script reads. No I/O here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    OFF = "off"  # not configured: nothing to check, said so
    UNCHECKED = "unchecked"  # configured, but the doctor does not check this part


MARK = {
    Status.PASS: "ok  ",
    Status.WARN: "warn",
    Status.FAIL: "FAIL",
    Status.OFF: "off ",
    Status.UNCHECKED: "  ? ",
}


@dataclass(frozen=True)
class Line:
    part: str  # "Slack", "Redis", "Prometheus", ...
    what: str  # what was checked, a few words
    status: Status
    said: str  # what was found
    fix: str = ""  # what to do, where the status is not a pass

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items()}


def exit_code(lines: Sequence[Line]) -> int:
    """1 when anything failed: a deployment script stops there. Warnings pass."""
    return 1 if any(line.status is Status.FAIL for line in lines) else 0


def verdict(lines: Sequence[Line]) -> str:
    fails = sum(1 for line in lines if line.status is Status.FAIL)
    warns = sum(1 for line in lines if line.status is Status.WARN)
    if fails:
        return f"{fails} to fix before meowbot can do its work, {warns} to look at."
    if warns:
        return f"meowbot can run; {warns} to look at."
    return "meowbot has what it needs."


def render_text(lines: Sequence[Line]) -> str:
    out: list[str] = []
    part = ""
    for line in lines:
        if line.part != part:
            part = line.part
            out.append(f"{part}")
        out.append(f"  {MARK[line.status]}  {line.what}: {line.said}")
        if line.fix and line.status in (Status.WARN, Status.FAIL):
            out.append(f"        fix: {line.fix}")
    out.append("")
    out.append(verdict(lines))
    return "\n".join(out)


def render_json(lines: Sequence[Line]) -> str:
    return json.dumps(
        {
            "ok": exit_code(lines) == 0,
            "verdict": verdict(lines),
            "checks": [line.as_dict() for line in lines],
        },
        indent=2,
    )
