"""The ports the services take: protocols implemented by adapters in bot/backends/."""

from __future__ import annotations

from typing import Protocol


class StateStore(Protocol):
    """Shared state (Redis in production). Keys are namespaced by team id inside the store."""

    name: str

    async def claim(self, team_id: str, kind: str, key: str, ttl_s: int) -> bool:
        """True the first time (team, kind, key) is claimed within ttl_s, False afterwards."""
        ...

    async def ping(self) -> None:
        """Raises when the store cannot be reached."""
        ...

    async def close(self) -> None: ...
