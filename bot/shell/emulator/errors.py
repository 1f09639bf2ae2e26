"""Slack's error answers, raised by the emulated Web API methods and turned into JSON by
the dispatcher (`web_api`)."""

from __future__ import annotations

from typing import Any


class SlackError(Exception):
    """A Slack error answer: ``{"ok": false, "error": error, **extra}``."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


def invalid_arguments(*messages: str) -> SlackError:
    """Slack's ``invalid_arguments``, each message prefixed ``[ERROR]`` as Slack does."""
    return SlackError(
        "invalid_arguments",
        response_metadata={"messages": [f"[ERROR] {m}" for m in messages]},
    )
