"""Buttons on alert messages: acknowledge, silence (and its custom-duration modal), drain,
confirm a drain past the blast-radius limit, resume. Runbook is a link: only acked."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts import acts
from bot.alerts.runtime import Alerting
from bot.deps import Deps
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
from handlers.registry import Listener, Registry
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
    async def tell(respond: AsyncRespond, text: str) -> None:
        await respond(response_type="ephemeral", replace_original=False, text=text)

    async def thread(client: AsyncWebClient, alerting: Alerting, out: acts.Outcome) -> None:
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

    async def may_act(
        body: dict[str, Any], client: AsyncWebClient, respond: AsyncRespond, verb: str
    ) -> bool:
        if await deps.authz.allowed(_actor(body).user_id, client):
            return True
        await tell(respond, deps.authz.refusal(verb))
        return False

    def alerting_or_none() -> Alerting | None:
        return deps.alerting

    async def on_ack(
        ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        alerting = alerting_or_none()
        if alerting is None:
            return await tell(respond, "Alerts are off here (no REDIS_URL).")
        gid = split_value(_value(body))[0].id
        out = await acts.acknowledge(alerting.store, gid, _actor(body), datetime.now(UTC))
        await thread(client, alerting, out)
        await tell(respond, out.sentence)

    async def on_silence(
        ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        alerting = alerting_or_none()
        if alerting is None or not await may_act(body, client, respond, "silence alerts"):
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
            return await tell(respond, "That silence carries no duration; nothing was changed.")
        await silence(alerting, client, lambda text: tell(respond, text), body, gid, duration_s)

    async def silence(
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
        await thread(client, alerting, out)
        await say(out.sentence)

    async def on_silence_modal(
        ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        state = view.get("state", {}).get("values", {})
        raw = str(state.get("duration", {}).get("hours", {}).get("value") or "").strip()
        try:
            hours = float(raw)
        except ValueError:
            hours = -1.0
        if not 0 < hours * 3600 <= MAX_SILENCE_S:
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
        alerting = alerting_or_none()
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

        await silence(alerting, client, say, body, gid, hours * 3600)

    async def on_drain(
        ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        alerting = alerting_or_none()
        if alerting is None or not await may_act(body, client, respond, "drain nodes"):
            return
        key, node = split_value(_value(body))
        gid = key.id
        await alerting.triage.inventory.load()
        fleet = len(alerting.triage.inventory.names())
        out = await acts.drain(
            alerting.store,
            alerting.triage.scheduler,
            alerting.cfg,
            gid,
            node,
            _actor(body),
            datetime.now(UTC),
            fleet,
        )
        await thread(client, alerting, out)
        if out.confirm_id is not None and out.group is not None:
            msg = confirm_drain_message(out.confirm_id, node, _actor(body).user_name)
            await post_message(client, out.group.channel, msg, thread_ts=out.group.ts)
        await tell(respond, out.sentence)

    async def on_confirm_drain(
        ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        alerting = alerting_or_none()
        if alerting is None or not await may_act(body, client, respond, "confirm drains"):
            return
        fleet = len(alerting.triage.inventory.names())
        out = await acts.confirm_drain(
            alerting.store,
            alerting.triage.scheduler,
            alerting.cfg,
            _value(body),
            _actor(body),
            datetime.now(UTC),
            fleet,
        )
        await thread(client, alerting, out)
        await tell(respond, out.sentence)

    def on_resume_with(force: bool) -> Listener:
        async def on_resume(
            ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
        ) -> None:
            await ack()
            alerting = alerting_or_none()
            if alerting is None or not await may_act(body, client, respond, "resume nodes"):
                return
            value = _value(body)
            key, node = split_value(value)
            triage = alerting.triage
            out = await acts.resume(
                alerting.store,
                triage.scheduler,
                key.id,
                node,
                _actor(body),
                force=force,
                memory=triage.resumes,
            )
            await thread(client, alerting, out)
            if out.can_force:
                # Someone else's reason: the person may confirm over it ("Resume anyway").
                msg = resume_anyway(out.sentence, node, ALERT_RESUME_ANYWAY_ACTION, value)
                await respond_message(respond, msg, replace_original=False)
                return
            await tell(respond, out.sentence)

        return on_resume

    async def on_link(ack: AsyncAck) -> None:
        await ack()

    reg.action(ALERT_ACK_ACTION, on_ack)
    reg.action(ALERT_SILENCE_ACTION, on_silence)
    reg.action(ALERT_DRAIN_ACTION, on_drain)
    reg.action(ALERT_CONFIRM_DRAIN_ACTION, on_confirm_drain)
    reg.action(ALERT_RESUME_ACTION, on_resume_with(force=False))
    reg.action(ALERT_RESUME_ANYWAY_ACTION, on_resume_with(force=True))
    reg.action(ALERT_RUNBOOK_ACTION, on_link)
    reg.view(SILENCE_MODAL, on_silence_modal)


def _silence_modal(gid: str) -> dict[str, Any]:
    modal = Modal(
        "Silence alert", callback_id=SILENCE_MODAL, submit="Silence", private_metadata=gid
    )
    modal.text_input("Silence for how many hours?", "hours", placeholder="2", block_id="duration")
    return modal.build()
