"""Modal submissions: the App Home palette runs its command through the one command table."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.render.palette import PALETTE_CALLBACK, parse_palette
from bot.slack_message import SlackMessage
from handlers import commands
from handlers.registry import Registry
from handlers.reply import Asker, post_message


def register(reg: Registry, deps: Deps) -> None:
    async def on_palette(
        ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        parsed = parse_palette(view, commands.BY_NAME)
        if isinstance(parsed, dict):
            # Field errors keep the modal open with the problem shown beside the input.
            await ack(response_action="errors", errors=parsed)
            return
        name, text = parsed
        # A modal has no channel: the answer goes to the person's DM with the bot.
        user_id = str(body["user"]["id"])
        acked = False

        async def private(message: SlackMessage) -> None:
            await post_message(client, user_id, message)

        async def open_view(new_view: dict[str, Any]) -> dict[str, Any]:
            # The palette turns into the command's form: a submission's answer may replace its
            # modal, and a second modal could not open while this one closes.
            nonlocal acked
            await ack(response_action="update", view=new_view)
            acked = True
            return {"id": view.get("id")}  # an updated view keeps its id; its hash is new

        if not commands.opens_a_form(deps, name, text):
            await ack()
            acked = True
        team = str((body.get("team") or {}).get("id") or body["user"].get("team_id") or "")
        asker = Asker(
            user_id=user_id, channel=user_id, team=team, private=private, open_view=open_view
        )
        try:
            await commands.dispatch(deps, client, name, text, asker)
        finally:
            if not acked:  # the form was not needed after all (no playground configured)
                await ack()

    reg.view(PALETTE_CALLBACK, on_palette)
