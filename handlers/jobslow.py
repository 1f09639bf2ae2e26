"""/job-slow: check privately, post "looking at…", then edit it into the answer.

Bad input (no such job, a finished one, a malformed id) is answered privately before anything
is posted, so it changes nothing. A real job gets a message in the channel that is edited as
the answer forms; the detail and the chart go to its thread. Where the bot may not post (not
in the channel), the whole answer comes privately instead, and says why there is no chart.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps, JobSlowService
from bot.models import Job
from bot.offload import Offload
from bot.render.blocks import error as error_message
from bot.render.charts import DEFAULT_JITTER, DEFAULT_SPREAD, NodeValue, job_chart
from bot.render.jobslow import (
    PICK_ACTION,
    render_answer,
    render_detail,
    render_error_in_place,
    render_pick,
    render_progress,
)
from bot.slack_message import SlackMessage
from bot.triage.jobs import SlowJobReport, find_job, slow_job
from bot.triage.service import UserError, user_jobs
from bot.triage.stragglers import StragglerConfig
from handlers.registry import Registry
from handlers.reply import (
    Asker,
    Chart,
    Posted,
    Private,
    post_message,
    post_progress,
    respond_message,
    update_message,
    upload_chart,
)


def chart_png(
    report: SlowJobReport, jitter: float = DEFAULT_JITTER, spread: float = DEFAULT_SPREAD
) -> bytes:
    """The chart of the answer: with the baseline its text compares with, `jitter` (the share
    within which a pace is called the same) drawn as a band around it, and `spread` (how far
    from the median a node is still no straggler) around the nodes' median."""
    d = report.diagnosis
    c = d.comparison
    return job_chart(
        title=f"job {d.job.job_id} {d.job.name}",
        pace=[(p.at, p.slowest) for p in report.pace],
        yesterday=[(p.at, p.slowest) for p in report.yesterday],
        since=d.comparison.since if d.comparison else None,
        metric_label=report.lagging_label,
        per_node=[NodeValue(n, d.per_node[n]) for n in d.job.nodes if n in d.per_node],
        stragglers={s.node for s in d.stragglers},
        median=d.median_s or None,
        baseline=(c.baseline, c.before_s) if c is not None else None,
        jitter=jitter,
        spread=spread,
    )


async def run(
    service: JobSlowService,
    client: AsyncWebClient,
    *,
    text: str,
    user_id: str,
    channel: str,
    private: Private,
    thread_ts: str | None = None,
) -> None:
    """Answers `/job-slow text` for `user_id` (whose cluster user the service's user map
    knows): the jobs to pick from, or the answer in `channel`, its chart drawn on the pool."""
    triage, users, cpu = service.triage, service.users, service.cpu
    cfg = triage.stragglers
    viewer = await users.cluster_user(user_id, client)
    if not text.strip():
        await private(render_pick(await user_jobs(triage, viewer)))
        return
    job = await find_job(triage, text, cfg)
    if isinstance(job, UserError):
        await private(error_message(job.sentence))
        return
    posted = await post_progress(
        client, channel, render_progress(job), private, thread_ts=thread_ts
    )
    report = await slow_job(triage, job, cfg, viewer=viewer)
    if posted is None:
        for message in _answers(job, report):
            await private(message)
        return
    await _answer_in_place(client, cpu, cfg, posted, job, report, thread_ts)


def _answers(job: Job, report: SlowJobReport | UserError) -> list[SlackMessage]:
    """The answer and its detail, or why there is none."""
    if isinstance(report, UserError):
        return [render_error_in_place(job, report.sentence)]
    return [render_answer(report), render_detail(report)]


async def _answer_in_place(
    client: AsyncWebClient,
    cpu: Offload,
    cfg: StragglerConfig,
    posted: Posted,
    job: Job,
    report: SlowJobReport | UserError,
    thread_ts: str | None,
) -> None:
    """The "looking at…" message edited into the answer; its detail and chart in the thread."""
    channel, ts = posted.channel, posted.ts
    if isinstance(report, UserError):
        await update_message(client, channel, ts, render_error_in_place(job, report.sentence))
        return
    await update_message(client, channel, ts, render_answer(report))
    await post_message(client, channel, render_detail(report), thread_ts=thread_ts or ts)
    if not report.pace and len(report.diagnosis.per_node) < 2:
        return  # nothing over time and no nodes to compare: a chart would be blank
    chart = Chart(
        functools.partial(chart_png, report, cfg.slower_threshold, cfg.min_excess),
        # A Kubernetes id is namespace/kind/name: no slashes in a file's name.
        filename=f"job-{job.job_id.replace('/', '-')}.png",
        title=f"Job {job.job_id}: step time over 48 h and per node",
    )
    await upload_chart(client, cpu, channel, thread_ts or ts, chart)


async def command(service: JobSlowService, client: AsyncWebClient, text: str, asker: Asker) -> None:
    """`/job-slow [job-id]` asked in the asker's channel."""
    await run(
        service,
        client,
        text=text,
        user_id=asker.user_id,
        channel=asker.channel,
        private=asker.private,
        thread_ts=asker.thread_ts,
    )


def register(reg: Registry, deps: Deps) -> None:
    reg.action(PICK_ACTION, partial(on_pick, deps.job_slow))


async def on_pick(
    service: JobSlowService,
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    await ack()
    job_id = str(body["actions"][0].get("value", ""))
    channel = str((body.get("channel") or {}).get("id") or body["user"]["id"])

    async def private(message: SlackMessage) -> None:
        await respond_message(respond, message, replace_original=False)

    await run(
        service,
        client,
        text=job_id,
        user_id=body["user"]["id"],
        channel=channel,
        private=private,
    )
