"""Who may act (drain, resume, silence): MEOWBOT_ADMINS user ids, group ids or group handles.

Group membership comes from Slack (`usergroups.list`, `usergroups.users.list`), cached with a
bounded lifetime so a removed person loses the right within minutes.
"""

from __future__ import annotations

import time

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

CACHE_TTL_S = 300.0


class Authorizer:
    def __init__(self, admins: tuple[str, ...]) -> None:
        self.users = {a for a in admins if a[:1] in {"U", "W"} and a.isupper()}
        self.group_ids = {a for a in admins if a[:1] == "S" and a.isupper()}
        self.handles = {a.lstrip("@") for a in admins if a not in self.users | self.group_ids}
        self._members: tuple[float, frozenset[str]] | None = None

    @property
    def configured(self) -> bool:
        return bool(self.users or self.group_ids or self.handles)

    async def allowed(self, user_id: str, client: AsyncWebClient) -> bool:
        if user_id in self.users:
            return True
        if not (self.group_ids or self.handles):
            return False
        return user_id in await self._group_members(client)

    async def _group_members(self, client: AsyncWebClient) -> frozenset[str]:
        now = time.monotonic()
        if self._members is not None and now - self._members[0] < CACHE_TTL_S:
            return self._members[1]
        ids = set(self.group_ids)
        try:
            if self.handles:
                groups = await client.usergroups_list()
                for group in groups.get("usergroups") or []:
                    if group.get("handle") in self.handles:
                        ids.add(str(group["id"]))
            members: set[str] = set()
            for gid in sorted(ids):
                resp = await client.usergroups_users_list(usergroup=gid)
                members.update(str(u) for u in resp.get("users") or [])
        except SlackApiError:
            # Fail closed: nobody in a group may act while Slack cannot tell us who is in it.
            return frozenset()
        self._members = (now, frozenset(members))
        return self._members[1]
