"""The pick button: a button that runs one command with its text, as if the person had typed it.

Offered by the plain-words questions (bot/render/ask.py) and by an error's suggestions
(bot/render/triage.py: render_user_error); handlers/ask.py runs what it carries.
"""

from __future__ import annotations

import json

ASK_PICK_ACTION = "meowbot_ask_pick"
MAX_VALUE = 1900  # a button's value is at most 2000 characters


def pick_value(command: str, text: str) -> str:
    """What a button carries to run one reading: the command and its text."""
    return json.dumps({"c": command, "t": text[: MAX_VALUE - len(command) - 20]})


def read_pick(value: str) -> tuple[str, str] | None:
    try:
        data = json.loads(value)
        return str(data["c"]), str(data["t"])
    except (ValueError, KeyError, TypeError):
        return None
