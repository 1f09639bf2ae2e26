"""What an effect costs a week, in GPU-days, at today's load. No I/O.

Today's load is the GPU time, over the window's last day, of the jobs running on a node that
took the rollout. Steps `effect` slower make the same work take (1 + effect) times as long, so
of the GPU time they ran, effect / (1 + effect) was the slowdown (negative: time saved).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from bot.regressions.effects import Series
from bot.regressions.models import Rollout

DAY = timedelta(days=1)
GPUS_A_NODE = 8
"""When a job does not say how many GPUs it holds."""


def gpu_days_per_week(
    effect: float, rollout: Rollout, jobs: Sequence[Series], end: datetime
) -> float:
    took = set(rollout.nodes)
    since, until = (end - DAY).timestamp(), end.timestamp()
    gpu_seconds = 0.0
    for s in jobs:
        if took.isdisjoint(s.job.nodes):
            continue
        t = s.t[(s.t >= since) & (s.t <= until)]
        if len(t) < 2:
            continue
        # Each sample stands for one step of the read, the last one included.
        ran = float(t[-1] - t[0]) + float(np.median(np.diff(t)))
        gpus = s.job.gpus or GPUS_A_NODE * len(s.job.nodes)
        gpu_seconds += gpus * min(ran, DAY.total_seconds())
    per_day = gpu_seconds / DAY.total_seconds()
    return per_day * 7 * effect / (1 + effect)
