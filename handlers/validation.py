"""Testing a drained node before it goes back into service: `/node-health <node> test` and
the "Test and resume" button start it, one message in the channel follows it step by step
with a Cancel button, and the person who asked is told the end in its thread."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from functools import partial
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps, ValidationService
from bot.errors import BackendError
from bot.mrkdwn import code
from bot.render.blocks import Message
from bot.render.blocks import error as error_message
from bot.render.validation import CANCEL_TEST_ACTION, TEST_ACTION, render_run
from bot.validation import policy
from bot.validation.ports import RunRecord
from bot.validation.run import outcomes
from bot.validation.service import (
    Validation,
    count_failure,
    counts_against,
    refusal,
    time_limit_s,
    validate,
)
from handlers.registry import Registry
from handlers.reply import Private, post_message, respond_message, update_message

log = logging.getLogger(__name__)

RECORD_MARGIN_S = 3600
"""How long a run's record outlives its job's time limit: a bot down that long finds it still."""


def register(reg: Registry, deps: Deps) -> None:
    if deps.validation is None:
        return
    reg.action(TEST_ACTION, partial(on_test, deps.validation))
    reg.action(CANCEL_TEST_ACTION, partial(on_cancel, deps.validation))


async def start(
    v: ValidationService,
    client: AsyncWebClient,
    node: str,
    *,
    user_id: str,
    channel: str,
    private: Private,
    thread_ts: str | None = None,
) -> None:
    """Checks that `node` may be tested by this person now, then tests it in the background;
    every refusal is one private sentence and changes nothing."""
    if not await v.authz.allowed(user_id, client):
        await private(error_message(v.authz.refusal("test nodes")))
        return
    await _begin(
        v, client, node, by=f"<@{user_id}>", channel=channel, private=private, thread_ts=thread_ts
    )


async def _begin(
    v: ValidationService,
    client: AsyncWebClient,
    node: str,
    *,
    by: str,
    channel: str,
    private: Private,
    thread_ts: str | None = None,
) -> None:
    """Tests `node` in the background if it may be tested now (`by` asked, as Slack shows
    them); otherwise says why in one sentence and changes nothing."""
    try:
        held = (await v.scheduler.nodes([node])).get(node)
    except ValueError:  # not a node name the scheduler could hold: quotes, `;`, spaces
        held = None
    except BackendError as exc:
        await private(error_message(f"I could not read {code(node[:60])}: {exc.user_text()}"))
        return
    refused = refusal(held, node)
    if refused is not None:
        await private(error_message(refused.sentence))
        return
    if await v.ledger.running() >= v.cfg.max_at_once:
        await private(
            error_message(
                f"{v.cfg.max_at_once} nodes are being tested already, the most at once here; "
                "ask again when one ends."
            )
        )
        return
    run_id = f"{node}-{int(time.time())}"
    ttl = time_limit_s(v.cfg) + 600
    other = await v.ledger.hold(node, run_id, ttl)
    if other is not None:
        await private(error_message(f"{code(node)} is being tested already."))
        return
    first = Validation(node, run_id, outcomes(v.cfg.steps, {}))
    try:
        posted = await post_message(
            client, channel, render_run(first, by=by, scheduler=v.tester.name), thread_ts=thread_ts
        )
    except SlackApiError as exc:
        await v.ledger.release(node, run_id)
        err = exc.response.get("error", "unknown")
        await private(error_message(f"I cannot post in this channel ({err}): nothing tested."))
        return
    _spawn(v, _watch(v, client, node, run_id, by=by, channel=posted.channel, ts=posted.ts))


def _spawn(v: ValidationService, work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.create_task(work)
    v.tasks.add(task)
    task.add_done_callback(v.tasks.discard)


async def _watch(
    v: ValidationService,
    client: AsyncWebClient,
    node: str,
    run_id: str,
    *,
    by: str,
    channel: str,
    ts: str,
    job_id: str | None = None,
) -> None:
    """Follows the run to its end in its message. The run is recorded with its job once it
    has one, and its lease kept fresh every poll: a replica that stops (or restarts) leaves
    it to be taken up (`taking_up`)."""
    name = v.tester.name
    recorded = job_id is not None

    async def progress(run: Validation) -> None:
        nonlocal recorded
        if not recorded and run.job_id is not None:
            record = RunRecord(node, run_id, run.job_id, channel, ts, by)
            await v.ledger.record(record, time_limit_s(v.cfg) + RECORD_MARGIN_S)
            recorded = True
        try:
            await update_message(client, channel, ts, render_run(run, by=by, scheduler=name))
        except SlackApiError as exc:  # the run goes on; the end is posted anew
            log.warning("validation progress not shown: %s", exc.response.get("error"))

    async def between_polls() -> str | None:
        await v.ledger.lease(run_id, v.lease_s)
        return await v.ledger.cancelled_by(run_id)

    await v.ledger.lease(run_id, v.lease_s)
    # Cancelled (the bot stopping), the run stays recorded and its node held: taken up later.
    run = await validate(
        v.tester,
        v.scheduler,
        node,
        v.cfg,
        run_id=run_id,
        progress=progress,
        cancelled=between_polls,
        poll_s=v.poll_s,
        job_id=job_id,
    )
    if v.history is not None and counts_against(run):
        try:
            run.offender = await count_failure(v.history, v.repeat, node, datetime.now(UTC))
        except BackendError as exc:  # the run's end is still said; the count is lost
            log.warning("failed validation not counted: %s", exc)
    await v.ledger.release(node, run_id)
    await v.ledger.forget(run_id)
    end = render_run(run, by=by, scheduler=name)
    await progress(run)
    # The person who asked is told the end, in the run's thread.
    told = f"{by} {end.text}"
    await post_message(client, channel, Message(told).section(told).build(), thread_ts=ts)


async def taking_up(v: ValidationService, client: AsyncWebClient, stopping: asyncio.Event) -> None:
    """Takes up the runs whose watcher stopped (its lease ran out): a restarted bot, or
    another replica, follows them to their end in the same message."""
    while not stopping.is_set():
        try:
            for rec in await v.ledger.records():
                if await v.ledger.lease(rec.run_id, v.lease_s, take=True):
                    log.info("taking up the validation of %s", rec.node)
                    watch = _watch(
                        v,
                        client,
                        rec.node,
                        rec.run_id,
                        by=rec.by,
                        channel=rec.channel,
                        ts=rec.ts,
                        job_id=rec.job_id,
                    )
                    _spawn(v, watch)
        except Exception:  # Redis away a moment: the next turn tries again
            log.exception("validations in flight could not be read")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), v.lease_s)


async def on_repair(v: ValidationService, client: AsyncWebClient, stopping: asyncio.Event) -> None:
    """`validation.on_repair`: tests each node meowbot drained for a fault once the scheduler
    says it booted since (bot/validation/policy.py), in the alert channel. Every replica looks;
    the node's claim in Redis lets one run it."""
    assert v.channel is not None
    channel = v.channel

    async def logged(message: Any) -> None:
        log.info("a repaired node was not tested: %s", getattr(message, "text", message))

    while not stopping.is_set():
        try:
            nodes = [n for n in (await v.scheduler.nodes()).values() if policy.watched(n)]
            await v.ledger.forget_boots({n.name for n in nodes})
            for node in nodes:
                mark, first = node.boot_mark, None
                if mark is not None and node.reason is not None:
                    first = await v.ledger.first_boot(node.name, node.reason, mark)
                if policy.repaired(node, first) and await v.ledger.running() < v.cfg.max_at_once:
                    await _begin(
                        v, client, node.name, by=policy.why(node), channel=channel, private=logged
                    )
        except Exception:  # the scheduler or Redis away a moment: the next turn tries again
            log.exception("repaired nodes could not be read")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), v.cfg.repair_check_s)


async def on_test(
    v: ValidationService,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    user = body.get("user", {})

    async def private(message: Any) -> None:
        await respond_message(respond, message, replace_original=False)

    channel = str((body.get("channel") or {}).get("id") or user.get("id", ""))
    # Pressed in a thread (an alert's, after a drain): the run's message goes there too.
    thread_ts = (body.get("message") or {}).get("thread_ts")
    await start(
        v,
        client,
        str(body["actions"][0].get("value", "")),
        user_id=str(user.get("id", "")),
        channel=channel,
        private=private,
        thread_ts=str(thread_ts) if thread_ts else None,
    )


async def on_cancel(
    v: ValidationService,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    user = body.get("user", {})
    if not await v.authz.allowed(str(user.get("id", "")), client):
        await respond(
            response_type="ephemeral", replace_original=False, text=v.authz.refusal("cancel tests")
        )
        return
    run_id = str(body["actions"][0].get("value", ""))
    name = str(user.get("username") or user.get("name") or user.get("id"))
    await v.ledger.cancel(run_id, name)
    await respond(
        response_type="ephemeral",
        replace_original=False,
        text="Cancelling: the job is stopped within seconds and the node stays drained.",
    )
