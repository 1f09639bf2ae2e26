"""Registers listeners on the AsyncApp and remembers what it registered.

The manifest test compares this record with manifest.yaml both ways, so a command or event
cannot be added on one side only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.async_app import AsyncApp

Listener = Callable[..., Awaitable[Any]]


@dataclass
class Registered:
    commands: set[str] = field(default_factory=set)
    actions: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    views: set[str] = field(default_factory=set)


class Registry:
    def __init__(self, app: AsyncApp) -> None:
        self.app = app
        self.registered = Registered()

    def command(self, name: str, listener: Listener) -> None:
        self.registered.commands.add(name)
        self.app.command(name)(listener)

    def action(self, action_id: str, listener: Listener) -> None:
        self.registered.actions.add(action_id)
        self.app.action(action_id)(listener)

    def event(self, event_type: str, listener: Listener) -> None:
        self.registered.events.add(event_type)
        self.app.event(event_type)(listener)

    def view(self, callback_id: str, listener: Listener) -> None:
        self.registered.views.add(callback_id)
        self.app.view(callback_id)(listener)
