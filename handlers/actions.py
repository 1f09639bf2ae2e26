"""Button listeners."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.render.blocks import success
from bot.render.palette import OPEN_PALETTE_ACTION, palette_modal
from bot.render.triage import (
    DASHBOARD_ACTION,
    DRAIN_ACTION,
    RESUME_ACTION,
    RESUME_ANYWAY_ACTION,
    resume_anyway,
)
from bot.triage import actions as node_actions
from handlers.commands import COMMANDS
from handlers.registry import Listener, Registry
from handlers.reply import respond_message, show_modal
from handlers.triage import node_health_answer

NodeAction = Callable[[str, str], Awaitable[node_actions.Done]]


def _on_private_answer(body: dict[str, Any]) -> bool:
    """Whether the press came from an answer only the presser sees (not a channel message)."""
    container = body.get("container") or {}
    return bool(container.get("is_ephemeral"))


def register(reg: Registry, deps: Deps) -> None:
    async def on_open_palette(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        # views.open must use the trigger within 3 s of the click: nothing slow before it.
        await show_modal(client, body["trigger_id"], palette_modal(COMMANDS))

    def node_action(verb: str, run: NodeAction) -> Listener:
        async def on_press(
            ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
        ) -> None:
            await ack()
            user = body.get("user", {})
            if not await deps.authz.allowed(str(user.get("id", "")), client):
                await respond(
                    response_type="ephemeral",
                    replace_original=False,
                    text=deps.authz.refusal(f"{verb} nodes"),
                )
                return
            value = str(body["actions"][0].get("value", ""))
            name = str(user.get("username") or user.get("name") or user.get("id"))
            done = await run(value, name)
            if done.can_force:
                msg = resume_anyway(done.sentence, value, RESUME_ANYWAY_ACTION, value)
                await respond_message(respond, msg, replace_original=False)
                return
            if done.changed and _on_private_answer(body):
                # The private /node-health answer the button sat on is redrawn as the node now
                # stands (Resume where Drain was), the sentence of what was done above it.
                fresh = await node_health_answer(deps.triage, value.partition("|")[0])
                await respond(
                    response_type="ephemeral",
                    replace_original=True,
                    text=f"{done.sentence}\n{fresh.text}",
                    blocks=[*success(done.sentence).blocks, *fresh.blocks],
                )
                return
            await respond(response_type="ephemeral", replace_original=False, text=done.sentence)

        return on_press

    async def drain(value: str, user_name: str) -> node_actions.Done:
        node, _, cause = value.partition("|")
        return await node_actions.drain(deps.triage.scheduler, node, cause, user_name)

    async def resume(value: str, user_name: str) -> node_actions.Done:
        triage = deps.triage
        return await node_actions.resume(triage.scheduler, value, user_name, memory=triage.resumes)

    async def resume_forced(value: str, user_name: str) -> node_actions.Done:
        # The person pressed "Resume anyway" through its confirmation dialog.
        triage = deps.triage
        return await node_actions.resume(
            triage.scheduler, value, user_name, force=True, memory=triage.resumes
        )

    async def on_link(ack: AsyncAck) -> None:
        # Slack opens the URL itself; the click is still delivered and must be acked.
        await ack()

    reg.action(OPEN_PALETTE_ACTION, on_open_palette)
    reg.action(DASHBOARD_ACTION, on_link)
    reg.action(DRAIN_ACTION, node_action("drain", drain))
    reg.action(RESUME_ACTION, node_action("resume", resume))
    reg.action(RESUME_ANYWAY_ACTION, node_action("resume", resume_forced))
