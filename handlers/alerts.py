"""Buttons on alert messages: acknowledge, silence (and its custom-duration modal), drain,
confirm a drain past the blast-radius limit, resume. Runbook is a link: only acked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts import acts
from bot.alerts.models import AlertGroup
from bot.alerts.runtime import Alerting
from bot.authz import Authorizer
from bot.deps import Deps
from bot.errors import BackendError
from bot.render import Modal
from bot.render.alerts import (
    ALERT_ACK_ACTION,
    ALERT_CONFIRM_DRAIN_ACTION,
    ALERT_DRAIN_ACTION,
    ALERT_RESUME_ACTION,
    ALERT_RESUME_ANYWAY_ACTION,
    ALERT_RUNBOOK_ACTION,
    ALERT_SILENCE_ACTION,
    confirm_drain_message,
    split_value,
)
from bot.render.triage import resume_anyway
from bot.render.validation import offer_test
from handlers.registry import Registry
from handlers.reply import (
    post_ephemeral_line,
    post_line,
    post_message,
    respond_message,
    show_modal,
)

log = logging.getLogger(__name__)

SILENCE_MODAL = "meowbot_alert_silence_custom"
MAX_SILENCE_S = 14 * 86400


def _actor(body: dict[str, Any]) -> acts.Actor:
    user = body.get("user", {})
    uid = str(user.get("id", ""))
    return acts.Actor(uid, str(user.get("username") or user.get("name") or uid))


def _value(body: dict[str, Any]) -> str:
    action = (body.get("actions") or [{}])[0]
    return str(action.get("value") or (action.get("selected_option") or {}).get("value") or "")


def register(reg: Registry, deps: Deps) -> None:
    reg.action(ALERT_ACK_ACTION, partial(on_ack, deps))
    reg.action(ALERT_SILENCE_ACTION, partial(on_silence, deps))
    reg.action(ALERT_DRAIN_ACTION, partial(on_drain, deps))
    reg.action(ALERT_CONFIRM_DRAIN_ACTION, partial(on_confirm_drain, deps))
    reg.action(ALERT_RESUME_ACTION, partial(on_resume, deps, False))
    reg.action(ALERT_RESUME_ANYWAY_ACTION, partial(on_resume, deps, True))
    reg.action(ALERT_RUNBOOK_ACTION, on_link)
    reg.view(SILENCE_MODAL, partial(on_silence_modal, deps))


async def _tell(respond: AsyncRespond, text: str) -> None:
    await respond(response_type="ephemeral", replace_original=False, text=text)


async def _thread(client: AsyncWebClient, alerting: Alerting, out: acts.Outcome) -> None:
    """The outcome's line in the alert's thread, and its message marked for a redraw."""
    group = out.group
    if out.thread_line and group is not None and group.ts:
        try:
            await post_line(client, group.channel, out.thread_line, thread_ts=group.ts)
        except SlackApiError as exc:  # the audit stream has it anyway
            log.warning("audit reply failed", extra={"error": exc.response.get("error")})
    if group is not None:
        # Re-rendered even when only the scheduler changed (a drain, a resume): its
        # buttons follow the nodes' state.
        await alerting.store.mark_dirty(group.key.id)
    alerting.wake.set()  # the group's message shows the change


async def _may_act(
    authz: Authorizer,
    body: dict[str, Any],
    client: AsyncWebClient,
    respond: AsyncRespond,
    verb: str,
) -> bool:
    if await authz.allowed(_actor(body).user_id, client):
        return True
    await _tell(respond, authz.refusal(verb))
    return False


async def on_ack(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    alerting = deps.alerting
    if alerting is None:
        return await _tell(respond, "Alerts are off here (no REDIS_URL).")
    gid = split_value(_value(body))[0].id
    out = await acts.acknowledge(alerting.store, gid, _actor(body), datetime.now(UTC))
    await _thread(client, alerting, out)
    await _tell(respond, out.sentence)


async def on_silence(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    alerting = deps.alerting
    if alerting is None or not await _may_act(deps.authz, body, client, respond, "silence alerts"):
        return
    key, extra = split_value(_value(body))
    gid = key.id
    if extra == "custom":
        # views.open must use the trigger within 3 s: nothing slow before it.
        await show_modal(client, body["trigger_id"], _silence_modal(gid))
        return
    try:
        duration_s = float(extra)
    except ValueError:
        return await _tell(respond, "That silence carries no duration; nothing was changed.")
    await _silence(alerting, client, partial(_tell, respond), body, gid, duration_s)


async def _silence(
    alerting: Alerting,
    client: AsyncWebClient,
    say: Callable[[str], Awaitable[None]],
    body: dict[str, Any],
    gid: str,
    duration_s: float,
) -> None:
    out = await acts.silence(
        alerting.store, alerting.silencer, gid, _actor(body), duration_s, datetime.now(UTC)
    )
    await _thread(client, alerting, out)
    await say(out.sentence)


def _modal_hours(view: dict[str, Any]) -> float | None:
    """The custom silence's hours as typed, or None unless within the limit."""
    state = view.get("state", {}).get("values", {})
    raw = str(state.get("duration", {}).get("hours", {}).get("value") or "").strip()
    try:
        hours = float(raw)
    except ValueError:
        return None
    return hours if 0 < hours * 3600 <= MAX_SILENCE_S else None


async def on_silence_modal(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    view: dict[str, Any],
    client: AsyncWebClient,
) -> None:
    hours = _modal_hours(view)
    if hours is None:
        await ack(
            response_action="errors",
            errors={"duration": "Hours between 0.1 and 336, e.g. 2 or 0.5."},
        )
        return
    if not await deps.authz.allowed(_actor(body).user_id, client):
        # Said in the form: a modal closed without a word reads as a silence that worked.
        refused = deps.authz.refusal("silence alerts", plain=True)
        await ack(response_action="errors", errors={"duration": refused})
        return
    await ack()
    alerting = deps.alerting
    if alerting is None:
        return
    gid = str(view.get("private_metadata", ""))
    group = await alerting.store.group(gid)
    user_id = _actor(body).user_id

    async def say(text: str) -> None:
        # A form has no response_url: the outcome (a refusal too: an Alertmanager alert
        # with no Alertmanager to silence it in) is said beside the alert, to the person.
        if group is not None and group.channel:
            await post_ephemeral_line(client, group.channel, user_id, text)

    await _silence(alerting, client, say, body, gid, hours * 3600)


async def on_drain(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    alerting = deps.alerting
    if alerting is None or not await _may_act(deps.authz, body, client, respond, "drain nodes"):
        return
    key, node = split_value(_value(body))
    await alerting.inventory.load()
    fleet = len(alerting.inventory.names())
    out = await acts.drain(
        alerting.store,
        alerting.scheduler,
        alerting.cfg,
        key.id,
        node,
        _actor(body),
        datetime.now(UTC),
        fleet,
    )
    await _thread(client, alerting, out)
    if out.confirm_id is not None and out.group is not None:
        msg = confirm_drain_message(out.confirm_id, node, _actor(body).user_name)
        await post_message(client, out.group.channel, msg, thread_ts=out.group.ts)
    await _tell(respond, out.sentence)
    await _offer_test(deps, client, out.group, node)


OFFER_WAIT_S = 2.0
"""How long an offer waits for the alert message's place when the drain came first."""


async def _offer_test(
    deps: Deps, client: AsyncWebClient, group: AlertGroup | None, node: str
) -> None:
    """After a drain, where nodes can be tested: "Test and resume" in the alert's thread, for
    when the node is repaired. Offered only if the scheduler, read back, holds the node out
    for meowbot."""
    v = deps.validation
    if v is None or group is None or deps.alerting is None:
        return
    if not group.ts:
        # Pressed the moment the message appeared, before the notifier stored where it is.
        await asyncio.sleep(OFFER_WAIT_S)
        group = await deps.alerting.store.group(group.key.id)
        if group is None or not group.ts:
            return
    try:
        held = (await v.scheduler.nodes([node])).get(node)
    except BackendError:
        return
    if held is None or not held.out_of_service or not held.reason_is_ours:
        return
    try:
        await post_message(client, group.channel, offer_test(node, v.offer), thread_ts=group.ts)
    except SlackApiError as exc:
        log.warning("test offer not posted", extra={"error": exc.response.get("error")})


async def on_confirm_drain(
    deps: Deps,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    alerting = deps.alerting
    if alerting is None or not await _may_act(deps.authz, body, client, respond, "confirm drains"):
        return
    fleet = len(alerting.inventory.names())
    out = await acts.confirm_drain(
        alerting.store,
        alerting.scheduler,
        alerting.cfg,
        _value(body),
        _actor(body),
        datetime.now(UTC),
        fleet,
    )
    await _thread(client, alerting, out)
    await _tell(respond, out.sentence)


async def on_resume(
    deps: Deps,
    force: bool,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    """Resume, or with `force` "Resume anyway" over someone else's reason."""
    await ack()
    alerting = deps.alerting
    if alerting is None or not await _may_act(deps.authz, body, client, respond, "resume nodes"):
        return
    value = _value(body)
    key, node = split_value(value)
    out = await acts.resume(
        alerting.store,
        alerting.scheduler,
        key.id,
        node,
        _actor(body),
        force=force,
        memory=alerting.triage.resumes,
    )
    await _thread(client, alerting, out)
    if out.can_force:
        # Someone else's reason: the person may confirm over it ("Resume anyway").
        msg = resume_anyway(out.sentence, node, ALERT_RESUME_ANYWAY_ACTION, value)
        await respond_message(respond, msg, replace_original=False)
        return
    await _tell(respond, out.sentence)


async def on_link(ack: AsyncAck) -> None:
    await ack()


def _silence_modal(gid: str) -> dict[str, Any]:
    modal = Modal(
        "Silence alert", callback_id=SILENCE_MODAL, submit="Silence", private_metadata=gid
    )
    modal.text_input("Silence for how many hours?", "hours", placeholder="2", block_id="duration")
    return modal.build()
