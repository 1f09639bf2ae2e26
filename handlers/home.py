"""The App Home tab."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.render.palette import home_view
from bot.render.triage import glance_lines
from bot.triage.service import fleet_glance
from handlers.registry import Registry


def register(reg: Registry, deps: Deps) -> None:
    async def on_home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        glance = glance_lines(await fleet_glance(deps.triage))
        await client.views_publish(
            user_id=event["user"], view=home_view(deps.settings.backends(), glance)
        )

    reg.event("app_home_opened", on_home_opened)
