"""Job owners on Slack: from a cluster user to a Slack user, and the DM that tells them.

A cluster user is found as meowbot finds the other way round (bot/usermap.py): the `users:`
mapping of MEOWBOT_CONFIG (Slack id -> cluster user, read backwards) first; else the person
whose Slack email is `<cluster user>@<email_domain>` (`users.lookupByEmail`, one call) when
`job_notices: {email_domain: ...}` is set; else the person whose email's local part is the
cluster user, from one `users.list` walk kept for an hour (a workspace of 10,000 people is 50
calls, Tier 2: set the domain there). Answers are cached an hour; a Slack failure is not cached
(Slack may answer next time) and finds nobody: the owner is skipped, never the drain.

A DM Slack fails to take is told apart: for now (5xx, `ratelimited` once slack_sdk's own
waits are spent, `fatal_error`, `internal_error`, a timeout, no connection) is a retryable
`BackendError`, tried again later; anything else Slack says (`user_not_found`,
`cannot_dm_bot`, `user_disabled`, `not_allowed_token_type`, `missing_scope`, ...) will not
change by trying and is not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ticks
from bot.backends.slack_directory import TtlCache
from bot.errors import BackendError
from bot.slack_message import SlackMessage
from bot.triage.notice import JobNotice

log = logging.getLogger(__name__)

CACHE_S = 3600.0
_NOBODY = {"users_not_found", "user_not_found", "invalid_email"}
# Slack's errors that say "not now" rather than "never".
_FOR_NOW = {
    "ratelimited",
    "fatal_error",
    "internal_error",
    "service_unavailable",
    "request_timeout",
}


def _error(exc: SlackApiError) -> str:
    return str(exc.response.get("error", "unknown_error"))


class SlackJobOwners:
    def __init__(
        self,
        client: AsyncWebClient,
        render: Callable[[JobNotice], SlackMessage],
        *,
        mapping: Mapping[str, str] | None = None,
        email_domain: str = "",
    ) -> None:
        self.client = client
        self.render = render
        # Slack id -> cluster user in the config; one cluster user may have several ids
        # (two workspaces' accounts): the first listed is told.
        self._by_cluster_user: dict[str, str] = {}
        for slack_id, cluster_user in (mapping or {}).items():
            self._by_cluster_user.setdefault(cluster_user, slack_id)
        self.email_domain = email_domain.strip().lstrip("@")
        self._found: TtlCache[str | None] = TtlCache(CACHE_S)
        self._index: dict[str, str] = {}
        self._index_at: float | None = None  # never walked yet

    async def slack_user(self, cluster_user: str) -> str | None:
        if cluster_user in self._by_cluster_user:
            return self._by_cluster_user[cluster_user]
        hit, cached = self._found.get(cluster_user)
        if hit:
            return cached
        try:
            found = await (
                self._by_email(cluster_user)
                if self.email_domain
                else self._by_local_part(cluster_user)
            )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            error = _error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
            log.warning(
                "Slack user lookup failed", extra={"cluster_user": cluster_user, "error": error}
            )
            return None
        self._found.put(cluster_user, found)
        return found

    async def _by_email(self, cluster_user: str) -> str | None:
        try:
            resp = await self.client.users_lookupByEmail(
                email=f"{cluster_user}@{self.email_domain}"
            )
        except SlackApiError as exc:
            if _error(exc) in _NOBODY:
                return None
            raise
        user = resp.get("user") or {}
        return None if user.get("deleted") or user.get("is_bot") else str(user["id"])

    async def _by_local_part(self, cluster_user: str) -> str | None:
        if ticks.since(self._index_at) > CACHE_S:
            self._index = await self._walk()
            self._index_at = ticks.now()
        return self._index.get(cluster_user.lower())

    async def _walk(self) -> dict[str, str]:
        index: dict[str, str] = {}
        cursor: str | None = None
        while True:
            resp = await self.client.users_list(limit=200, cursor=cursor)
            for u in resp.get("members") or []:
                email = str((u.get("profile") or {}).get("email") or "")
                if email and not u.get("deleted") and not u.get("is_bot"):
                    index.setdefault(email.partition("@")[0].lower(), str(u["id"]))
            meta: dict[str, Any] = resp.get("response_metadata") or {}
            cursor = meta.get("next_cursor") or None
            if not cursor:
                return index

    async def tell(self, slack_user: str, notice: JobNotice) -> None:
        message = self.render(notice)
        try:
            opened = await self.client.conversations_open(users=slack_user)
            channel = str(opened["channel"]["id"])
            await self.client.chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            error = _error(exc)
            for_now = error in _FOR_NOW or exc.response.status_code >= 500
            raise BackendError("Slack", f"refused the DM ({error}).", retryable=for_now) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise BackendError(
                "Slack", f"cannot be reached ({type(exc).__name__}).", retryable=True
            ) from exc
