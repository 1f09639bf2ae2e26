"""Button listeners."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.render.palette import OPEN_PALETTE_ACTION, palette_modal
from handlers.registry import Registry


def register(reg: Registry, deps: Deps) -> None:
    async def on_open_palette(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        # views.open must use the trigger within 3 s of the click: nothing slow before it.
        async with deps.inflight.track():
            await client.views_open(trigger_id=body["trigger_id"], view=palette_modal())

    reg.action(OPEN_PALETTE_ACTION, on_open_palette)
