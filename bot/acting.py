"""Who the work under way is for: the Slack user whose press, command or message started it.

Set once for each listener (handlers/registry.py) and read where words depend on the reader
being that person, deep in a call chain that has no reason to carry it: the DM about a drain
tells its owner "you drained" when they pressed Drain themselves (bot/triage/owners.py). A
context variable, so each request (an asyncio task) sees its own; work started outside a
request (the alerts' auto-drain, a retry loop) sees "" (nobody).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_ACTOR: ContextVar[str] = ContextVar("meowbot_acting_user", default="")


def acting_user() -> str:
    """The Slack id of the person the current work is for; "" when none."""
    return _ACTOR.get()


@contextmanager
def acting_as(user_id: str) -> Iterator[None]:
    token = _ACTOR.set(user_id)
    try:
        yield
    finally:
        _ACTOR.reset(token)


def user_of(body: dict[str, Any]) -> str:
    """Who sent a Slack request: a press or a form (`user.id`), a slash command (`user_id`),
    an event (`event.user`); "" when it names nobody."""
    user = body.get("user")
    if isinstance(user, dict) and user.get("id"):
        return str(user["id"])
    if body.get("user_id"):
        return str(body["user_id"])
    event = body.get("event")
    if isinstance(event, dict) and isinstance(event.get("user"), str):
        return str(event["user"])
    return ""
