"""What the questions' core reads through: the thread's memory and, optionally, a model."""

from __future__ import annotations

from typing import Protocol

from bot.ask.understand import Context


class ThreadMemory(Protocol):
    """What each thread asked last, so its follow-ups read against it (kept for a while)."""

    async def recall(self, team: str, channel: str, thread: str) -> Context | None: ...

    async def remember(self, team: str, channel: str, thread: str, context: Context) -> None: ...


class Picker(Protocol):
    """A language model behind an OpenAI-compatible endpoint: one chat answer, whole, within
    `deadline_s`, or BackendError."""

    async def complete(self, system: str, prompt: str, *, deadline_s: float) -> str: ...

    async def close(self) -> None: ...
