"""/regressions: which rollout slowed training. Post "looking at…", edit it as the finder
reads, then edit it into the answer; the detail and the chart go to its thread.

Bad input (an unknown component, a window too long) is answered privately before anything is
posted. Where the bot may not post, the answer comes privately instead, without the chart.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import RegressionsService
from bot.errors import BackendError
from bot.offload import Offload
from bot.regressions.ask import (
    BUILT_IN,
    MAX_WINDOW,
    MIN_WINDOW,
    AskError,
    RegressionsAsk,
    parse_ask,
    say_window,
)
from bot.regressions.models import RegressionReport
from bot.regressions.ports import FleetHistory
from bot.regressions.service import find_regressions
from bot.render.blocks import error as error_message
from bot.render.regression_chart import regressions_chart
from bot.render.regressions import render_answer, render_detail, render_progress, when
from bot.slack_message import SlackMessage
from handlers.reply import (
    Asker,
    Chart,
    Misread,
    Posted,
    Private,
    ProgressEdits,
    post_message,
    post_progress,
    update_message,
    upload_chart,
)

NOT_CONFIGURED = (
    "/regressions has no fleet history to read here: it needs each node's driver, kernel and "
    "VBIOS and every job's recorded pace from Prometheus. Set PROMETHEUS_URL (with "
    "node_exporter's `node_uname_info`, DCGM and meowbot's pace rules loaded)."
)


def _what(ask: RegressionsAsk) -> str:
    return ", ".join(ask.components) if ask.named else "software"


def chart_png(report: RegressionReport) -> bytes:
    title = f"Rollouts and training pace, {when(report.start)} to {when(report.end)}"
    return regressions_chart(report, title=title)


async def run(
    history: FleetHistory | None,
    components: Sequence[str],
    cpu: Offload,
    client: AsyncWebClient,
    *,
    text: str,
    channel: str,
    private: Private,
    thread_ts: str | None = None,
) -> None:
    """Answers `/regressions text` from the fleet's `history` (None: not configured here),
    `components` those a person may name; the finder and the chart run on `cpu`."""
    if history is None:
        await private(error_message(NOT_CONFIGURED))
        return
    try:
        ask = parse_ask(text, components)
    except AskError as exc:
        raise Misread(str(exc)) from exc
    end = datetime.now(UTC)
    first = render_progress(_what(ask), ask.window)
    posted = await post_progress(client, channel, first, private, thread_ts=thread_ts)
    progress = (
        ProgressEdits(
            client,
            posted.channel,
            posted.ts,
            lambda step: render_progress(_what(ask), ask.window, step),
        )
        if posted is not None
        else None
    )
    try:
        report = await _find(history, components, cpu, ask, end, progress)
    except BackendError as exc:
        failed = error_message(f"I could not read the fleet's history: {exc.user_text()}")
        await (private(failed) if posted is None else _update(client, posted, failed))
        return
    await _answer(cpu, client, report, ask, posted, private, thread_ts)


async def _find(
    history: FleetHistory,
    components: Sequence[str],
    cpu: Offload,
    ask: RegressionsAsk,
    end: datetime,
    progress: ProgressEdits | None,
) -> RegressionReport:
    # The components not asked about are read too: a kernel rollout that came with a new
    # image must be named as confounded, not credited with the image's effect.
    others = [c for c in components if c not in ask.components]
    return await find_regressions(
        history,
        ask.components,
        start=end - ask.window,
        end=end,
        progress=progress,
        confounders=others,
        compute=cpu.run,
    )


async def _update(client: AsyncWebClient, posted: Posted, message: SlackMessage) -> None:
    await update_message(client, posted.channel, posted.ts, message)


async def _answer(
    cpu: Offload,
    client: AsyncWebClient,
    report: RegressionReport,
    ask: RegressionsAsk,
    posted: Posted | None,
    private: Private,
    thread_ts: str | None,
) -> None:
    """The answer in place of "looking at…", its detail and chart in the thread; or, where
    nothing could be posted, the answer and its detail privately."""
    answer, detail = render_answer(report, ask.window), render_detail(report)
    if posted is None:
        await private(answer)
        await private(detail)
        return
    await _update(client, posted, answer)
    await post_message(client, posted.channel, detail, thread_ts=thread_ts or posted.ts)
    if report.findings:
        await upload_chart(client, cpu, posted.channel, thread_ts or posted.ts, _chart(report))


def _chart(report: RegressionReport) -> Chart:
    return Chart(
        functools.partial(chart_png, report),
        filename="regressions.png",
        title="Job paces around the rollout, and the effect per cohort",
    )


def weekly_poster(
    client: AsyncWebClient, channel: str, cpu: Offload
) -> Callable[[RegressionReport], Awaitable[None]]:
    """The weekly post: the answer in `channel`, its detail and chart in the thread; the
    chart drawn on `cpu`, the worker pool."""

    async def post(report: RegressionReport) -> None:
        answer = render_answer(report, report.end - report.start)
        posted = await post_message(client, channel, answer)
        await post_message(client, posted.channel, render_detail(report), thread_ts=posted.ts)
        if report.findings:
            await upload_chart(client, cpu, posted.channel, posted.ts, _chart(report))

    return post


async def command(
    service: RegressionsService, client: AsyncWebClient, text: str, asker: Asker
) -> None:
    """`/regressions [component ...] [--since 7d]` asked in the asker's channel."""
    await run(
        service.history,
        service.components,
        service.cpu,
        client,
        text=text,
        channel=asker.channel,
        private=asker.private,
        thread_ts=asker.thread_ts,
    )


def help_lines() -> list[str]:
    """What the usage lines cannot say: every component a person may name."""
    return [
        f"Components: {', '.join(f'`{c}`' for c in BUILT_IN)} (the GPU VBIOS), and the info "
        "metrics named under `regressions: components:` in the config (an image, NCCL, CUDA)",
        f"`--since` from {say_window(MIN_WINDOW)} to {say_window(MAX_WINDOW)}; "
        "7 days when not given",
    ]
