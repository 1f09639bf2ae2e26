"""Modal submissions."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot import router
from bot.deps import Deps
from bot.render.blocks import SlackMessage
from bot.render.palette import PALETTE_CALLBACK, parse_palette
from handlers import highlights, jobslow
from handlers.registry import Registry
from handlers.reply import post_message


def register(reg: Registry, deps: Deps) -> None:
    async def on_palette(
        ack: Any, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        parsed = parse_palette(view)
        if isinstance(parsed, dict):
            # Field errors keep the modal open with the problem shown beside the input.
            await ack(response_action="errors", errors=parsed)
            return
        await ack()
        name, text = parsed
        deps.telemetry.commands.labels(command=name).inc()
        # A modal has no channel: the answer goes to the person's DM with the bot.
        user_id = str(body["user"]["id"])
        if name == jobslow.COMMAND and not router.is_help(text):

            async def private(message: SlackMessage) -> None:
                await post_message(client, user_id, message)

            await jobslow.run(
                deps, client, text=text, user_id=user_id, channel=user_id, private=private
            )
            return
        if name == highlights.COMMAND and not router.is_help(text):

            async def to_dm(message: SlackMessage) -> None:
                await post_message(client, user_id, message)

            team = str((body.get("team") or {}).get("id") or body["user"].get("team_id") or "")
            # The answer goes to the DM, so it is filtered for the DM: public highlights only.
            await highlights.run(deps, client, text=text, user_id=user_id, channel=user_id,
                                 team=team, private=to_dm)  # fmt: skip
            return
        await post_message(client, user_id, await router.answer(name, text, deps.triage))

    reg.view(PALETTE_CALLBACK, on_palette)
