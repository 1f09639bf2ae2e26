"""Button listeners."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
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
from bot.triage.service import Triage
from handlers.commands import COMMANDS
from handlers.registry import Registry
from handlers.reply import respond_message, show_modal
from handlers.triage import node_health_answer

# What a button does: the triage, the button's value and the presser's name in.
NodeAction = Callable[[Triage, str, str], Awaitable[node_actions.Done]]


def _on_private_answer(body: dict[str, Any]) -> bool:
    """Whether the press came from an answer only the presser sees (not a channel message)."""
    container = body.get("container") or {}
    return bool(container.get("is_ephemeral"))


def register(reg: Registry, deps: Deps) -> None:
    reg.action(OPEN_PALETTE_ACTION, on_open_palette)
    reg.action(DASHBOARD_ACTION, on_link)
    reg.action(DRAIN_ACTION, partial(on_node_press, deps, "drain", _drain))
    reg.action(RESUME_ACTION, partial(on_node_press, deps, "resume", _resume))
    reg.action(RESUME_ANYWAY_ACTION, partial(on_node_press, deps, "resume", _resume_forced))


async def on_open_palette(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
    await ack()
    # views.open must use the trigger within 3 s of the click: nothing slow before it.
    await show_modal(client, body["trigger_id"], palette_modal(COMMANDS))


async def on_link(ack: AsyncAck) -> None:
    # Slack opens the URL itself; the click is still delivered and must be acked.
    await ack()


async def on_node_press(
    deps: Deps,
    verb: str,
    run: NodeAction,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    """A node's Drain, Resume or "Resume anyway" button: `run` does it, as the presser."""
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
    done = await run(deps.triage, value, name)
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


async def _drain(triage: Triage, value: str, user_name: str) -> node_actions.Done:
    node, _, cause = value.partition("|")
    return await node_actions.drain(triage.scheduler, node, cause, user_name)


async def _resume(triage: Triage, value: str, user_name: str) -> node_actions.Done:
    return await node_actions.resume(triage.scheduler, value, user_name, memory=triage.resumes)


async def _resume_forced(triage: Triage, value: str, user_name: str) -> node_actions.Done:
    # The person pressed "Resume anyway" through its confirmation dialog.
    return await node_actions.resume(
        triage.scheduler, value, user_name, force=True, memory=triage.resumes
    )
