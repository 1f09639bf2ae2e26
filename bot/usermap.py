"""Slack user -> cluster user: a mapping in MEOWBOT_CONFIG (`users:`), else the local part of
the Slack profile's email (`ana@example.org` -> `ana`), cached for a bounded time."""

from __future__ import annotations

import re
from collections.abc import Mapping

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ticks

CACHE_TTL_S = 3600.0
CLUSTER_USER_RE = re.compile(r"^[a-z_][a-z0-9._-]{0,31}$")


class UserMap:
    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = dict(mapping)
        self._cache: dict[str, tuple[float, str | None]] = {}

    async def cluster_user(self, slack_user: str, client: AsyncWebClient) -> str | None:
        if slack_user in self.mapping:
            return self.mapping[slack_user]
        hit = self._cache.get(slack_user)
        if hit is not None and ticks.since(hit[0]) < CACHE_TTL_S:
            return hit[1]
        try:
            resp = await client.users_info(user=slack_user)
        except SlackApiError:
            return None  # not cached: Slack may answer next time
        email = str((resp.get("user") or {}).get("profile", {}).get("email") or "")
        local = email.partition("@")[0].lower()
        name = local if CLUSTER_USER_RE.fullmatch(local) else None
        self._cache[slack_user] = (ticks.now(), name)
        return name
