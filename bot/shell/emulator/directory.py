"""The Web API methods on who is who: api.test, auth.test, users.* and usergroups.*."""

from __future__ import annotations

import copy
import time
from typing import Any

from bot.shell.emulator.errors import SlackError
from bot.shell.emulator.params import required, truthy
from bot.shell.emulator.web_api import MethodTable
from bot.shell.emulator.workspace import TEAM_DOMAIN, Workspace


class DirectoryMethods:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def table(self) -> MethodTable:
        return {
            "api.test": (self.api_test, "none"),
            "auth.test": (self.auth_test, "bot"),
            "users.info": (self.users_info, "bot"),
            "users.list": (self.users_list, "bot"),
            "users.lookupByEmail": (self.users_lookup_by_email, "bot"),
            "usergroups.list": (self.usergroups_list, "bot"),
            "usergroups.users.list": (self.usergroups_users_list, "bot"),
        }

    def api_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"args": args} if args else {}

    def auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": TEAM_DOMAIN,
            "user": "meowbot",
            "team_id": self.ws.team_id,
            "user_id": self.ws.bot_user_id,
            "bot_id": self.ws.bot_id,
            "is_enterprise_install": False,
        }

    # users ---------------------------------------------------------------------------------

    def users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        required(args, "user")
        user = self.ws.users.get(str(args["user"]))
        if user is None:
            raise SlackError("user_not_found")
        return {"user": copy.deepcopy(user)}

    def users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "members": [copy.deepcopy(u) for u in self.ws.users.values()],
            "cache_ts": int(time.time()),
            "response_metadata": {"next_cursor": ""},
        }

    def users_lookup_by_email(self, args: dict[str, Any]) -> dict[str, Any]:
        required(args, "email")
        email = str(args["email"]).lower()
        for user in self.ws.users.values():
            if str(user["profile"].get("email", "")).lower() == email:
                return {"user": copy.deepcopy(user)}
        raise SlackError("users_not_found")

    # user groups ---------------------------------------------------------------------------

    def _render_usergroup(self, group: dict[str, Any], *, include_users: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": group["id"],
            "team_id": self.ws.team_id,
            "is_usergroup": True,
            "name": group["handle"],
            "handle": group["handle"],
            "description": "",
            "date_delete": 0,
            "user_count": len(group["users"]),
        }
        if include_users:
            out["users"] = list(group["users"])
        return out

    def usergroups_list(self, args: dict[str, Any]) -> dict[str, Any]:
        include = truthy(args.get("include_users"))
        groups = self.ws.usergroups.values()
        return {"usergroups": [self._render_usergroup(g, include_users=include) for g in groups]}

    def usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        required(args, "usergroup")
        group = self.ws.usergroups.get(str(args["usergroup"]))
        if group is None:
            raise SlackError("no_such_subteam")
        return {"users": list(group["users"])}
