"""The doctor's report in App Home, for the admins: the same lines as `meowbot doctor`, a
section a part, with the fix under what is not a pass (bot/doctor/report.py is the core)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.doctor.report import Line, Status, verdict
from bot.mrkdwn import escape

SETUP_ACTION = "meowbot_setup_check"

MARK = {
    Status.PASS: ":white_check_mark:",
    Status.WARN: ":warning:",
    Status.FAIL: ":x:",
    Status.OFF: ":heavy_minus_sign:",
    Status.UNCHECKED: ":grey_question:",
}

CHECKING = (
    ":hourglass_flowing_sand: Checking Slack, Redis, Prometheus, the schedulers, Alertmanager "
    "and the playground against what meowbot needs (a few seconds)…"
)


def setup_lines(lines: Sequence[Line], at: datetime) -> list[str]:
    """One mrkdwn block of lines a part, the verdict first; fixes under warnings and fails."""
    out = [f"*{escape(verdict(lines))}* Checked at {at:%H:%M:%S} UTC."]
    parts: dict[str, list[str]] = {}
    for line in lines:
        text = f"{MARK[line.status]} {escape(line.what)}: {escape(line.said)}"
        if line.fix and line.status in (Status.WARN, Status.FAIL):
            text += f"\n      _fix: {escape(line.fix)}_"
        parts.setdefault(line.part, []).append(text)
    out += [f"*{escape(part)}*\n" + "\n".join(texts) for part, texts in parts.items()]
    return out
