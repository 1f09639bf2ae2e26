"""The service behind /job-slow: find the job, read what it shows, diagnose (see stragglers.py).

Two steps, so that the bot can answer bad input privately before it posts anything: `find_job`
checks the id against the scheduler (quick), `slow_job` reads the metrics and diagnoses. Each
reads with a fixed number of queries whatever the job's size: the step times, compute times
and collective waits (one each, empty where the job exports none), the pace over 48 h (two),
the health checks over the job's nodes, and every hardware proxy (always: a synchronous job's
step times are equal on every rank and cannot name the node).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.errors import BackendError
from bot.models import Fault, Job, JobState
from bot.mrkdwn import code
from bot.triage.checks import CHECK_OF, VERSIONS, enabled_checks, requests_for, run_checks
from bot.triage.job_ids import ONE_ID, BadJobId, check_job_id
from bot.triage.ports import Metrics
from bot.triage.resumes import apply_resume_memory
from bot.triage.service import NO_METRICS, Triage, UserError
from bot.triage.stragglers import (
    COMPUTE,
    PROXIES_MODE,
    STEP,
    Comparison,
    Diagnosis,
    NodeEvidence,
    PacePoint,
    RankSignals,
    StragglerConfig,
    compare,
    diagnose,
    evidence_requests,
    job_versions,
)
from bot.triage.table import Table

HISTORY = timedelta(hours=48)
DAY = timedelta(hours=24)
PACE_STEP_S = 60  # a minute: stalls of a minute show; 2,880 points over 48 h

# What the chart's per-node panel shows, by the measure that judged the job.
_LABELS = {
    COMPUTE: "compute time per node (s)",
    STEP: "step time per node (s)",
    PROXIES_MODE: "slowest proxy (job median / node's lowest GPU or port)",
}


@dataclass(frozen=True)
class SlowJobReport:
    diagnosis: Diagnosis
    owner_note: str | None  # "alice's job", when the viewer is someone else
    pace: list[PacePoint]  # the last 48 h
    yesterday: list[PacePoint]  # the same 24 h earlier, moved forward a day to overlay
    lagging_label: str  # what `diagnosis.per_node` measures
    not_run: dict[str, list[str]]
    at: datetime
    out_of_service: frozenset[str] = frozenset()  # stragglers drained or down already


def parse_job_id(text: str) -> str | UserError:
    """The one job id `text` names (Slurm's number or Kubernetes' namespace/kind/name), or a
    sentence saying why it is none: nothing else reaches a scheduler or a query."""
    words = text.split()
    shown = code(text.strip()[:40] or "nothing")
    try:
        if len(words) != 1:
            raise BadJobId(ONE_ID)
        return check_job_id(words[0])
    except BadJobId as exc:
        return UserError(f"{shown} is not a job id: {exc}")


async def find_job(triage: Triage, text: str, cfg: StragglerConfig) -> Job | UserError:
    """The running job `text` names, or a sentence saying why not."""
    job_id = parse_job_id(text)
    if isinstance(job_id, UserError):
        return job_id
    if triage.scheduler is None:
        return UserError(
            "No scheduler is configured (set SLURM_REST_URL or KUBECONFIG): I need it for the "
            "job's nodes."
        )
    try:
        job = await triage.scheduler.job(job_id)
    except BackendError as exc:
        return UserError(f"I could not look the job up: {exc.user_text()}")
    if job is None:
        return UserError(
            f"{triage.scheduler.name} knows no job {job_id} (finished jobs are forgotten "
            "after a while)."
        )
    if job.state is not JobState.RUNNING:
        ended = f" at {job.end:%Y-%m-%d %H:%M} UTC" if job.end else ""
        return UserError(
            f"Job {job_id} ({job.name}) {_STATE_WORDS[job.state]}{ended}: /job-slow looks at "
            "running jobs."
        )
    if triage.metrics is None:
        # Said before anything is posted: a "looking at…" would have nothing to look at.
        return UserError(
            f"Job {job_id} ({job.name}) runs on {len(job.nodes):,} "
            f"{'node' if len(job.nodes) == 1 else 'nodes'}, but I cannot tell why it is slow: "
            f"{NO_METRICS} (its step times and its nodes' hardware are read from metrics)."
        )
    if len(job.nodes) > cfg.max_nodes:
        return UserError(
            f"Job {job_id} runs on {len(job.nodes):,} nodes, more than the {cfg.max_nodes:,} "
            "I read at once (`job_slow.max_nodes`)."
        )
    return job


# "is failed since" is no English: each state as a sentence says it.
_STATE_WORDS = {
    JobState.PENDING: "is still pending",
    JobState.RUNNING: "is running",
    JobState.COMPLETED: "completed",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "was cancelled",
    JobState.TIMEOUT: "timed out",
}


def _window(points: Sequence[PacePoint], start: datetime, end: datetime) -> list[PacePoint]:
    return [p for p in points if start <= p.at <= end]


async def slow_job(
    triage: Triage,
    job: Job,
    cfg: StragglerConfig,
    *,
    viewer: str | None = None,
    now: datetime | None = None,
) -> SlowJobReport | UserError:
    """Read the job's step times, pace, health and proxies; diagnose."""
    metrics = triage.metrics
    if metrics is None:
        return UserError(f"I could not read job {job.job_id}'s metrics: {NO_METRICS}.")
    health = triage.config
    checks = enabled_checks(health)
    at = now or datetime.now(UTC)
    try:
        steps, compute, wait, pace, health_table, proxies = await asyncio.gather(
            metrics.step_times(job.job_id, cfg, at=at),
            metrics.step_times(job.job_id, cfg, at=at, metric=cfg.compute_metric),
            metrics.step_times(job.job_id, cfg, at=at, metric=cfg.wait_metric),
            metrics.pace(job.job_id, cfg, start=at - HISTORY, end=at, step_s=PACE_STEP_S),
            metrics.read(
                requests_for(checks, health), nodes=job.nodes, window_s=health.window_s, at=at
            ),
            metrics.read(evidence_requests(cfg), nodes=job.nodes, window_s=cfg.average_s, at=at),
        )
        comparison, yesterday = await _compare(triage, metrics, job, pace, cfg, at)
        # The same findings as /node-health of the node: an old Xid of a node meowbot resumed
        # is history here too.
        checked = await triage.cpu.run(run_checks, health_table, health, checks)
        run = await apply_resume_memory(metrics, triage.resumes, checked, health.window_s)
    except BackendError as exc:
        return UserError(f"I could not read job {job.job_id}'s metrics: {exc.user_text()}")
    # The statistics over every rank and node: CPU work, off the event loop.
    diagnosis = await triage.cpu.run(
        _diagnosis,
        job,
        RankSignals(steps, compute, wait),
        (health_table, proxies, run.faults),
        cfg,
        comparison,
        _window(pace, at - timedelta(hours=2), at),
    )
    label = _LABELS[diagnosis.mode]
    owner = None if viewer is None or viewer == job.user else f"{job.user}'s job"
    return SlowJobReport(
        diagnosis=diagnosis,
        owner_note=owner,
        pace=pace,
        yesterday=yesterday,
        lagging_label=label,
        not_run=run.not_run,
        at=at,
        out_of_service=await _out_of_service(triage, [s.node for s in diagnosis.stragglers]),
    )


def _diagnosis(
    job: Job,
    signals: RankSignals,
    reads: tuple[Table, Table, list[Fault]],
    cfg: StragglerConfig,
    comparison: Comparison | None,
    minutes: list[PacePoint],
) -> Diagnosis:
    """The diagnosis from the reads: the health table (its version columns), the proxies and
    the health checks' faults."""
    health_table, proxies, faults = reads
    # Where each drift kind's version is read: its check's per-node version column.
    keys = {kind: (CHECK_OF[kind].needs[0].key, v.label) for kind, v in VERSIONS.items()}
    versions = job_versions(health_table, keys)
    evidence = NodeEvidence.from_reads(proxies, versions, faults, cfg.average_s)
    return diagnose(job, signals, evidence, cfg, comparison=comparison, minutes=minutes)


async def _out_of_service(triage: Triage, nodes: list[str]) -> frozenset[str]:
    """The nodes already drained or down: the answer offers them no Drain (whose press only
    said "already draining") and says the job runs on them until it restarts."""
    if triage.scheduler is None or not nodes:
        return frozenset()
    try:
        states = await triage.scheduler.nodes(nodes)
    except BackendError:
        return frozenset()  # unknown: Drain stays on offer, and a press reads the state anyway
    return frozenset(n for n, state in states.items() if state.out_of_service)


async def _compare(
    triage: Triage,
    metrics: Metrics,
    job: Job,
    pace: list[PacePoint],
    cfg: StragglerConfig,
    at: datetime,
) -> tuple[Comparison | None, list[PacePoint]]:
    """Against the same job a day earlier, or its previous run when it is younger than that."""
    recent = _window(pace, at - DAY, at)
    if job.start <= at - DAY - timedelta(seconds=cfg.average_s):
        half = timedelta(seconds=cfg.average_s)
        before = _window(pace, at - DAY - half, at - DAY + half)
        shifted = [
            PacePoint(p.at + DAY, p.slowest, p.median)
            for p in _window(pace, at - HISTORY, at - DAY)
        ]
        return compare(recent, before, cfg, "24 h earlier"), shifted
    scheduler = triage.scheduler
    previous = await scheduler.previous_run(job) if scheduler is not None else None
    if previous is None or previous.end is None:
        return None, []
    old = await metrics.pace(
        previous.job_id,
        cfg,
        start=previous.end - timedelta(hours=2),
        end=previous.end,
        step_s=PACE_STEP_S * 5,
    )
    return compare(recent, old, cfg, f"its previous run (job {previous.job_id})"), []
