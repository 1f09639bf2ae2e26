"""The regression finder's entry point: reads through the port, then judges. No I/O of its own.

This file is the COMMAND branch's stand-in with the agreed signature: it reads the history so
the command runs end to end, and answers with what it read and no findings. The CORE branch's
service.py (which runs `analyse`) replaces it whole when the branches meet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from bot.regressions.models import RegressionReport
from bot.regressions.ports import FleetHistory

Progress = Callable[[str], Awaitable[None]]


async def find_regressions(
    history: FleetHistory,
    components: Sequence[str],
    *,
    start: datetime,
    end: datetime,
    progress: Progress | None = None,
    confounders: Sequence[str] = (),
) -> RegressionReport:
    if progress is not None:
        await progress(f"reading each node's {', '.join(components)} over the window")
    read = list(dict.fromkeys([*components, *confounders]))
    spans = await history.versions(read, start=start, end=end)
    if progress is not None:
        await progress("reading every job's pace over the window")
    paces = await history.job_paces(start=start, end=end)
    return RegressionReport(
        start=start,
        end=end,
        component=components[0] if len(components) == 1 else None,
        findings=(),
        jobs_read=len(paces),
        nodes_read=len({s.node for s in spans}),
    )
