"""The buttons of the DM a job's owner gets when their job's node is drained: "Stop these
messages" and, once stopped, "Turn them back on". Anyone may press them, for themselves only."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.deps import Deps
from bot.render.job_notice import (
    JOB_NOTICE_RESUME_ACTION,
    JOB_NOTICE_STOP_ACTION,
    render_resumed,
    render_stopped,
)
from handlers.registry import Listener, Registry
from handlers.reply import respond_message


def register(reg: Registry, deps: Deps) -> None:
    def choose(out: bool) -> Listener:
        async def on_press(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            await ack()
            user = str((body.get("user") or {}).get("id") or "")
            ledger = deps.job_notices
            if ledger is None or not user:
                text = "meowbot does not tell job owners here; nothing to change."
                await respond(response_type="ephemeral", replace_original=False, text=text)
                return
            await ledger.set_opted_out(user, out)
            # Read back: the answer says what the ledger holds, not what was asked of it.
            if await ledger.opted_out(user) != out:
                text = "That did not take: your messages are as they were. Try again."
                await respond(response_type="ephemeral", replace_original=False, text=text)
                return
            msg = render_stopped() if out else render_resumed()
            await respond_message(respond, msg, replace_original=False)

        return on_press

    reg.action(JOB_NOTICE_STOP_ACTION, choose(True))
    reg.action(JOB_NOTICE_RESUME_ACTION, choose(False))
