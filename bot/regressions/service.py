"""/regressions' service: read the fleet's history through the port, then find the effects.

The reads are a few bounded queries whatever the fleet size (bot/regressions/ports.py);
the statistics are the pure, synchronous `analyse` (bot/regressions/analysis.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from bot.regressions.analysis import FinderConfig, analyse
from bot.regressions.models import RegressionReport
from bot.regressions.ports import FleetHistory
from bot.words import count

Progress = Callable[[str], Awaitable[None]]
Compute = Callable[..., Awaitable[RegressionReport]]
"""Runs `analyse` off the event loop (bot/offload.py: Offload.run): its bootstrap over jobs is
CPU work that must not hold back the acks of everything behind it."""


async def _quiet(_: str) -> None:
    return None


async def find_regressions(
    history: FleetHistory,
    components: Sequence[str],
    *,
    start: datetime,
    end: datetime,
    progress: Progress | None = None,
    confounders: Sequence[str] = (),
    cfg: FinderConfig | None = None,
    compute: Compute | None = None,
) -> RegressionReport:
    """The rollouts of `components` between `start` and `end` and their effects, worst first.
    `confounders` are further components (every configured one, say) read only to tell what
    else changed on the same nodes at the same time."""
    say = progress or _quiet
    read = list(dict.fromkeys([*components, *confounders]))
    await say(f"Reading every node's {', '.join(read)} history...")
    spans = await history.versions(read, start=start, end=end)
    nodes = len({s.node for s in spans})
    await say(
        f"Read the software of {count(nodes, 'node')}; reading every job's pace and its "
        "nodes' compute time..."
    )
    paces, computes = await asyncio.gather(
        history.job_paces(start=start, end=end), history.node_compute(start=start, end=end)
    )
    await say(f"Comparing {count(len(paces), 'job')} before and after each rollout...")
    if compute is None:
        return analyse(spans, paces, components, start, end, cfg, computes)
    return await compute(analyse, spans, paces, components, start, end, cfg, computes)
