"""A job's pace around the moment it switched cohort, as the chart draws it. No I/O.

Jobs cross a rollout at different times (their nodes upgrade over a day or a week), so their
paces are drawn on one axis of hours from each job's own switch, and relative to the job's own
pace before it (a 70B and a 7B job differ by seconds a step; a 2 % change must show on both).
"""

from __future__ import annotations

import statistics
from datetime import datetime

from bot.regressions.models import AlignedPace, JobPace

HOURS_AROUND = 48.0
MAX_POINTS = 200
"""Points kept a job: a PNG of a hundred jobs stays small and quick to draw."""


def align(pace: JobPace, switched_at: datetime, hours: float = HOURS_AROUND) -> AlignedPace | None:
    """`pace` within `hours` of `switched_at`, over its median before it; None without pace
    on both sides (nothing to compare with)."""
    window = [
        ((s.at - switched_at).total_seconds() / 3600, s.seconds)
        for s in pace.samples
        if abs((s.at - switched_at).total_seconds()) <= hours * 3600 and s.seconds > 0
    ]
    before = [v for h, v in window if h < 0]
    if not before or not any(h >= 0 for h, _ in window):
        return None
    level = statistics.median(before)
    step = max(1, -(-len(window) // MAX_POINTS))
    points = tuple((round(h, 3), v / level) for h, v in window[::step])
    return AlignedPace(job_id=pace.job_id, switched_at=switched_at, points=points)
