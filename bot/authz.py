"""Who may act (drain, resume, silence): MEOWBOT_ADMINS user ids, group ids or group handles.

Group membership comes from Slack (`usergroups.list`, `usergroups.users.list`), cached with a
bounded lifetime so a removed person loses the right within minutes.
"""

from __future__ import annotations

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ticks
from bot.mrkdwn import escape, user_mention

CACHE_TTL_S = 300.0
MAX_NAMED = 5  # a refusal names this many admins at most: enough to find one awake


class Authorizer:
    def __init__(self, admins: tuple[str, ...]) -> None:
        self.users = {a for a in admins if a[:1] in {"U", "W"} and a.isupper()}
        self.group_ids = {a for a in admins if a[:1] == "S" and a.isupper()}
        self.handles = {a.lstrip("@") for a in admins if a not in self.users | self.group_ids}
        self._members: tuple[float, frozenset[str]] | None = None

    @property
    def configured(self) -> bool:
        return bool(self.users or self.group_ids or self.handles)

    def refusal(self, verb: str, *, plain: bool = False) -> str:
        """What a person who may not `verb` is told: who may, as mentions they can write to.
        Not the setting's name: the person refused is rarely the one who configures the bot.
        `plain` is for plain-text places (a modal's field error), where mentions show raw."""
        if plain:
            return f"Only the cluster admins may {verb}; nothing was changed."
        named = [user_mention(u) for u in sorted(self.users)]
        # `<!subteam^S…>` shows as the group's @handle; ephemeral answers notify nobody.
        named += [f"<!subteam^{g}>" for g in sorted(self.group_ids)]
        named += [escape(f"@{h}") for h in sorted(self.handles)]
        if not named:
            # Nobody to ask: the one who can mend it is whoever runs the bot, so say where.
            return (
                f":no_entry: Nobody may {verb} from Slack here yet: meowbot has no cluster "
                "admins set up (whoever runs it names them: docs/node-health.md, under Drain and "
                "Resume, says how). Nothing was changed."
            )
        shown = named[:MAX_NAMED]
        more = len(named) - len(shown)
        if more:
            who = ", ".join(shown) + f" or one of {more} more"
        elif len(shown) > 1:
            who = ", ".join(shown[:-1]) + " or " + shown[-1]
        else:
            who = shown[0]
        return f":no_entry: Only the cluster admins may {verb} (ask {who}); nothing was changed."

    async def allowed(self, user_id: str, client: AsyncWebClient) -> bool:
        if user_id in self.users:
            return True
        if not (self.group_ids or self.handles):
            return False
        return user_id in await self._group_members(client)

    async def _group_members(self, client: AsyncWebClient) -> frozenset[str]:
        if self._members is not None and ticks.since(self._members[0]) < CACHE_TTL_S:
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
        self._members = (ticks.now(), frozenset(members))
        return self._members[1]
