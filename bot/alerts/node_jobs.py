"""The job each alerting node runs, as the scheduler lists it: an event's `job` fact. Pure.

Forty nodes failing inside one job point at that job's workload, not at the hardware; the event
message says so with "shared: job 4100123". A node may run several jobs (a shared node, a small
job beside a big one), and a fact is one value a node, so each node names one of its running
jobs: the one that runs on most of the alerting nodes (then the bigger job, then the lower id).
Nodes of one big job that each also run a small job of their own still share the big job, and
nodes of different jobs differ ("differ: 3 jobs").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from bot.models import Job, JobState


def job_per_node(jobs: Sequence[Job], nodes: Iterable[str]) -> dict[str, str]:
    """Node -> the id of the job it names, for the `nodes` that run a job."""
    wanted = set(nodes)
    here: dict[str, list[Job]] = {}
    reach: Counter[str] = Counter()
    for j in jobs:
        if j.state is not JobState.RUNNING:
            continue
        on = wanted.intersection(j.nodes)
        reach[j.job_id] = len(on)
        for node in on:
            here.setdefault(node, []).append(j)
    return {
        node: min(
            running, key=lambda j: (-reach[j.job_id], -len(j.nodes), _id_order(j.job_id))
        ).job_id
        for node, running in sorted(here.items())
    }


def _id_order(job_id: str) -> tuple[int, str]:
    # Slurm ids are numbers: 999 before 1000; other schedulers' names sort as text.
    return (int(job_id), "") if job_id.isdigit() else (1 << 62, job_id)
