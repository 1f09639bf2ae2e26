"""/hw-faults why <kind> [node|hostlist] [--since 7d]: what preceded the faults.

Post "looking at…", edit it as the finder reads, then edit it into the answer; the detail
(the alert rule to paste, every candidate's counts) and the chart go to its thread. Bad input
(an unknown kind or node, a malformed hostlist, a window too long) is answered privately in
one sentence before anything is posted. Where the bot may not post, the answer comes privately
instead, without the chart.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import FaultsService
from bot.errors import BackendError
from bot.models import JOB_LEVEL_KINDS, FaultKind
from bot.precursors.ask import MAX_WINDOW_S, MIN_WINDOW_S, WhyAsk, parse_why, say_window
from bot.precursors.models import Event, PrecursorReport
from bot.precursors.ports import PrecursorHistory
from bot.precursors.service import find_precursors
from bot.render.blocks import error as error_message
from bot.render.precursor_chart import precursor_chart
from bot.render.precursors import kind_words, render_answer, render_detail, render_progress
from bot.triage.targets import BadInput
from bot.triage.vocabulary import resolve_names
from handlers.reply import (
    Asker,
    Chart,
    ProgressEdits,
    post_message,
    post_progress,
    update_message,
    upload_chart,
)

log = logging.getLogger(__name__)

NOT_CONFIGURED = (
    "`/hw-faults why` has no history to read here: it needs days of node_exporter and DCGM "
    "metrics in Prometheus. Set PROMETHEUS_URL."
)


def _known(faults: FaultsService, ask: WhyAsk) -> str | None:
    """A sentence when the asked nodes are not the fleet's, else None."""
    if ask.nodes is None:
        return None
    names = faults.triage.known()
    unknown = [n for n in ask.nodes if n not in names]
    if len(unknown) == len(ask.nodes):
        return f"I don't know a node `{unknown[0][:60]}`."
    return None


def kinds(faults: FaultsService, history: PrecursorHistory) -> tuple[str, ...]:
    """What can be asked about: the kinds the history finds over days, and, where the sweep's
    fault history is kept, every node fault kind it records."""
    recorded = (
        ()
        if faults.triage.history is None
        else tuple(k.value for k in FaultKind if k not in JOB_LEVEL_KINDS)
    )
    return tuple(dict.fromkeys((*history.kinds(), *recorded)))


FIRST_RECORD_S = 300.0
"""An occurrence first seen this soon after the history began was there before it: its start
is not known, and it is no event to look back from."""


async def _recorded(faults: FaultsService, ask: WhyAsk, began: datetime | None) -> list[Event]:
    """The fault history's occurrences of the kind: when the sweep first saw each, leaving
    out the faults already there when the history began (else dated to meowbot's start)."""
    if faults.triage.history is None or began is None:
        return []
    occurrences = await faults.triage.history.occurrences(
        None if ask.nodes is None else list(ask.nodes)
    )
    return [
        Event(o.kind.value, o.node, o.first_seen)
        for o in occurrences
        if o.kind == ask.kind
        and not timedelta(0) <= o.first_seen - began < timedelta(seconds=FIRST_RECORD_S)
    ]


async def _began(faults: FaultsService) -> datetime | None:
    if faults.triage.history is None:
        return None
    try:
        return await faults.triage.history.began()
    except BackendError as exc:
        log.warning("fault history unreadable: %s", exc)
        return None


async def command(faults: FaultsService, client: AsyncWebClient, text: str, asker: Asker) -> None:
    """`/hw-faults why ...`: `text` is what follows `why`."""
    history: PrecursorHistory | None = faults.precursors
    if history is None:
        await asker.private(error_message(NOT_CONFIGURED))
        return
    try:
        ask = parse_why(text, kinds(faults, history))
    except BadInput as exc:
        await asker.private(error_message(str(exc)))
        return
    try:
        await faults.triage.inventory.load()
    except BackendError as exc:
        await asker.private(error_message(f"I could not list the nodes: {exc.user_text()}"))
        return
    if ask.nodes is not None:  # `gpu42`, `GPU-0042`: the node they mean, as every command
        ask = replace(ask, nodes=tuple(resolve_names(ask.nodes, faults.triage.known())))
    wrong = _known(faults, ask)
    if wrong is None and ask.kind not in history.kinds() and await _began(faults) is None:
        wrong = (
            f"The fault history holds no `{ask.kind}` faults yet: meowbot records them as the "
            "sweep and /node-health see them, from when it starts. "
            + ", ".join(f"`{k}`" for k in history.kinds())
            + " are read from the metrics' own history."
        )
    if wrong is not None:
        await asker.private(error_message(wrong))
        return
    await run(faults, client, ask, history, asker)


async def run(
    faults: FaultsService,
    client: AsyncWebClient,
    ask: WhyAsk,
    history: PrecursorHistory,
    asker: Asker,
) -> None:
    end = datetime.now(UTC)
    first = render_progress(ask.kind, ask.window_s)
    posted = await post_progress(
        client, asker.channel, first, asker.private, thread_ts=asker.thread_ts
    )
    channel, ts = (posted.channel, posted.ts) if posted is not None else (asker.channel, None)
    progress = (
        ProgressEdits(
            client, channel, ts, lambda step: render_progress(ask.kind, ask.window_s, step)
        )
        if ts is not None
        else None
    )
    start = end - timedelta(seconds=ask.window_s)
    try:
        began = await _began(faults)
        if ask.kind not in history.kinds():
            # Only the sweep's record holds this kind: it sees back to when it began, no
            # further, and the answer's window says so.
            start = max(start, began or end)
        recorded = await _recorded(faults, ask, began)
        report = await find_precursors(
            history,
            ask.kind,
            nodes=ask.nodes,
            fleet=faults.triage.inventory.names(),
            start=start,
            end=end,
            cfg=faults.config,
            progress=progress,
            compute=faults.cpu.run,
            recorded=recorded,
        )
    except BackendError as exc:
        failed = error_message(f"I could not read the history: {exc.user_text()}")
        await (asker.private(failed) if ts is None else update_message(client, channel, ts, failed))
        return
    answer, detail = render_answer(report), render_detail(report)
    if ts is None:
        await asker.private(answer)
        await asker.private(detail)
        return
    await update_message(client, channel, ts, answer)
    await post_message(client, channel, detail, thread_ts=asker.thread_ts or ts)
    if report.leading is not None:
        chart = _chart(report)
        await upload_chart(client, faults.cpu, channel, asker.thread_ts or ts, chart)


def _chart(report: PrecursorReport) -> Chart:
    return Chart(
        functools.partial(precursor_chart, report),
        filename="precursor.png",
        title=f"What preceded the {kind_words(report.kind, 2)}",
    )


def help_lines() -> list[str]:
    return [
        "*What preceded them*: `/hw-faults why unexpected_reboot [node|hostlist] [--since 7d]` "
        "ranks what the nodes showed in the minutes before each fault (network and InfiniBand "
        "throughput and errors, GPU power, temperature and clocks, PCIe replays, CPU and memory "
        "pressure, load) against ordinary minutes, with the threshold, the lead time, the counts "
        "and an alert rule to paste. Kinds: `unexpected_reboot`, `xid`, `ib_link_down`, and the "
        "others above from the sweep's fault history; "
        f"`--since` from {say_window(MIN_WINDOW_S)} to {say_window(MAX_WINDOW_S)}, 7 days when "
        "not given.",
    ]
