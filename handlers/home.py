"""The App Home tab."""

from __future__ import annotations

import asyncio
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.render.palette import home_view
from bot.render.triage import glance_lines, jobs_lines
from bot.triage.service import fleet_glance, user_jobs
from handlers.commands import COMMANDS
from handlers.registry import Registry
from handlers.reply import publish_home


def register(reg: Registry, deps: Deps) -> None:
    async def on_home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event["user"])
        glance, mine = await asyncio.gather(
            fleet_glance(deps.triage),
            user_jobs(deps.triage, await deps.users.cluster_user(user, client)),
        )
        view = home_view(COMMANDS, deps.settings.backends(), glance_lines(glance), jobs_lines(mine))
        await publish_home(client, user, view)

    reg.event("app_home_opened", on_home_opened)
