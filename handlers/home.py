"""The App Home tab."""

from __future__ import annotations

import asyncio
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.errors import BackendError
from bot.render.palette import home_view
from bot.render.triage import glance_lines, jobs_lines
from bot.triage.service import fleet_glance, user_jobs
from handlers.commands import COMMANDS
from handlers.registry import Registry
from handlers.reply import publish_home


async def _to_test(deps: Deps, user: str, client: AsyncWebClient) -> list[tuple[str, str]]:
    """The nodes meowbot drained, as the scheduler holds them, for a person who may test
    them, where testing is set up; nothing otherwise (or when the scheduler cannot answer)."""
    v = deps.validation
    if v is None or not await deps.authz.allowed(user, client):
        return []
    try:
        nodes = await v.scheduler.nodes()
    except BackendError:
        return []
    return sorted(
        (name, n.reason or "") for name, n in nodes.items() if n.out_of_service and n.reason_is_ours
    )


def register(reg: Registry, deps: Deps) -> None:
    async def on_home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event["user"])
        glance, mine, to_test = await asyncio.gather(
            fleet_glance(deps.triage),
            user_jobs(deps.triage, await deps.users.cluster_user(user, client)),
            _to_test(deps, user, client),
        )
        offer = deps.validation.offer if deps.validation is not None else None
        view = home_view(
            COMMANDS,
            deps.settings.backends(),
            glance_lines(glance),
            jobs_lines(mine),
            to_test=to_test,
            test=offer,
        )
        await publish_home(client, user, view)

    reg.event("app_home_opened", on_home_opened)
