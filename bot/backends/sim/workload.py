"""Slurm-like jobs and in-training runs of the simulated fleet.

Jobs take contiguous blocks of nodes (as a topology-aware scheduler would), most of them long
synchronous training jobs that export a per-rank step time; some are young requeues whose
previous run of the same name ended shortly before on the same nodes, so that "compare with
yesterday" has to fall back to the previous run. A few nodes sit idle between jobs.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from bot.models import Checkpoint, Job, JobState, TrainingRun

TRAINING_NAMES = (
    "llama3-70b-pretrain",
    "llama3-8b-sft",
    "moe-8x22b-pretrain",
    "vit-22b",
    "mamba2-2.7b",
    "dit-xl-video",
    "gpt-neox-20b",
    "rlhf-ppo-34b",
    "whisper-large-ft",
    "t5-xxl-ul2",
)
OTHER_NAMES = ("eval-harness", "dataprep-tokenize", "embed-index")
USERS = (
    "alice",
    "bob",
    "chandra",
    "dmitri",
    "eunji",
    "farid",
    "greta",
    "hiro",
    "ines",
    "jamal",
    "kofi",
    "lena",
)
PARTITION = "gpu"
FIRST_JOB_ID = 4_100_001
STEP_JITTER = 0.015
"""Ordinary jitter of a rank's compute time, +-1.5 %: noise that must never be called a
straggler."""
REPORT_JITTER = 0.002
"""A synchronous job's ranks end each iteration together: their reported iteration times differ
only by timer noise, +-0.2 %."""
COMM_SHARE = 0.25
"""Of a healthy iteration, the share spent in the collective (all-reduce, all-gather, send/recv)
once every rank has arrived."""

_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_WEIGHTS = (5, 5, 7, 9, 10, 9, 7, 5, 3, 2, 1.5, 1, 0.7)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job and what the simulator needs to make its metrics."""

    job: Job
    nodes: tuple[int, ...]
    start_s: float
    end_s: float
    """``math.inf`` while the job runs."""
    base_step_s: float
    pipeline_stages: int
    exports_step_time: bool
    tokens_per_step: int
    checkpoint_every_steps: int
    exports_compute_time: bool = False
    """Also exports each rank's compute time and collective wait (a profiling-minded exporter)."""
    synchronous: bool = True
    """Ranks wait for each other every iteration; False for independent workers (no collective),
    whose ranks each report their own pace."""

    def running(self, t_s: float) -> bool:
        return self.start_s <= t_s < self.end_s

    def stage_of(self, position: int) -> int:
        """Pipeline stage of the node at ``position`` in the job: stages take contiguous nodes."""
        return position * self.pipeline_stages // len(self.nodes)


def _dt(t_s: float) -> datetime:
    return datetime.fromtimestamp(t_s, UTC)


def _minute(t_s: float) -> float:
    return float(math.floor(t_s / 60.0) * 60)


def make_spec(
    *,
    name: str,
    user: str,
    nodes: tuple[int, ...],
    node_names: tuple[str, ...],
    start_s: float,
    end_s: float,
    state: JobState,
    gpus_per_node: int,
    base_step_s: float,
    pipeline_stages: int,
    exports_step_time: bool,
    prev_job_id: str | None = None,
    job_id: str = "0",
    exports_compute_time: bool = False,
    synchronous: bool = True,
) -> JobSpec:
    job = Job(
        job_id=job_id,
        name=name,
        user=user,
        state=state,
        nodes=tuple(node_names[i] for i in nodes),
        start=_dt(start_s),
        end=None if math.isinf(end_s) else _dt(end_s),
        partition=PARTITION,
        gpus_per_node=gpus_per_node,
        prev_job_id=prev_job_id,
    )
    every = max(50, round(1800.0 / base_step_s / 50.0) * 50)  # about one checkpoint every 30 min
    return JobSpec(
        job=job,
        nodes=nodes,
        start_s=start_s,
        end_s=end_s,
        base_step_s=base_step_s,
        pipeline_stages=max(1, min(pipeline_stages, len(nodes))),
        exports_step_time=exports_step_time,
        tokens_per_step=len(nodes) * gpus_per_node * 16_384,
        checkpoint_every_steps=every,
        exports_compute_time=exports_compute_time and exports_step_time,
        synchronous=synchronous,
    )


def generate_jobs(
    node_names: tuple[str, ...], gpus_per_node: int, seed: int, now_s: float
) -> list[JobSpec]:
    """Lay jobs over the fleet, deterministically from ``seed``; ids ascend with start time."""
    rng = random.Random(f"meowbot-sim-jobs:{seed}")
    profile_rng = random.Random(f"meowbot-sim-profiled:{seed}")
    n = len(node_names)
    max_size = max(1, n // 4)
    sizes = [s for s in _SIZES if s <= max_size]
    weights = list(_WEIGHTS[: len(sizes)])
    specs: list[JobSpec] = []
    prev_of: dict[int, int] = {}  # index of a running spec -> index of its previous run
    serial: dict[str, int] = {}
    pos = 0
    while pos < n:
        if rng.random() < 0.08:
            gap = min(n - pos, rng.randint(1, 4))
            if rng.random() < 0.5:
                # Idle now, but a short job ran here earlier today.
                end = _minute(now_s - rng.uniform(3600, 30 * 3600))
                specs.append(
                    make_spec(
                        name=f"{rng.choice(OTHER_NAMES)}-{rng.randrange(1000):03d}",
                        user=rng.choice(USERS),
                        nodes=tuple(range(pos, pos + gap)),
                        node_names=node_names,
                        start_s=_minute(end - rng.uniform(1800, 6 * 3600)),
                        end_s=end,
                        state=JobState.COMPLETED,
                        gpus_per_node=gpus_per_node,
                        base_step_s=1.0,
                        pipeline_stages=1,
                        exports_step_time=False,
                    )
                )
            pos += gap
            continue
        size = min(rng.choices(sizes, weights)[0], n - pos)
        nodes = tuple(range(pos, pos + size))
        pos += size
        training = rng.random() < 0.85
        if training:
            base = rng.choice(TRAINING_NAMES)
            serial[base] = serial.get(base, 0) + 1
            name = f"{base}-{serial[base]:03d}"
        else:
            name = f"{rng.choice(OTHER_NAMES)}-{rng.randrange(1000):03d}"
        stages = 1
        if training and size >= 8:
            stages = rng.choice([p for p in (2, 4, 8) if p <= size // 2])
        base_step = round(rng.uniform(0.8, 3.5), 3)
        # About half of the training exporters also time each rank's compute and wait (drawn
        # from a stream of its own, so that the fleet's jobs stay what they were).
        profiled = training and profile_rng.random() < 0.5
        user = rng.choice(USERS)
        young = training and rng.random() < 0.3
        if young:
            start = _minute(now_s - rng.uniform(3600, 20 * 3600))
            prev_end = _minute(start - rng.uniform(120, 1800))
            prev_start = _minute(prev_end - rng.uniform(86400, 4 * 86400))
            specs.append(
                make_spec(
                    name=name,
                    user=user,
                    nodes=nodes,
                    node_names=node_names,
                    start_s=prev_start,
                    end_s=prev_end,
                    state=rng.choice((JobState.FAILED, JobState.TIMEOUT, JobState.CANCELLED)),
                    gpus_per_node=gpus_per_node,
                    base_step_s=base_step,
                    pipeline_stages=stages,
                    exports_step_time=True,
                )
            )
            prev_of[len(specs)] = len(specs) - 1
        else:
            start = _minute(now_s - rng.uniform(26 * 3600, 10 * 86400))
        specs.append(
            make_spec(
                name=name,
                user=user,
                nodes=nodes,
                node_names=node_names,
                start_s=start,
                end_s=math.inf,
                state=JobState.RUNNING,
                gpus_per_node=gpus_per_node,
                base_step_s=base_step,
                pipeline_stages=stages,
                exports_step_time=training,
                exports_compute_time=profiled,
            )
        )
    # Slurm ids grow with submission: number the jobs by start time.
    order = sorted(range(len(specs)), key=lambda i: (specs[i].start_s, specs[i].nodes[0]))
    ids = {i: str(FIRST_JOB_ID + k) for k, i in enumerate(order)}
    out = []
    for i, spec in enumerate(specs):
        prev = ids[prev_of[i]] if i in prev_of else None
        out.append(
            replace(spec, job=spec.job.model_copy(update={"job_id": ids[i], "prev_job_id": prev}))
        )
    out.sort(key=lambda s: int(s.job.job_id))
    return out


def _loss(step: int, seed_offset: float) -> float:
    # A power-law fall with a little deterministic wobble, as real loss curves look.
    wobble = 0.008 * math.sin(step * 0.0137 + seed_offset)
    decay = float((1.0 + step / 400.0) ** -0.33)
    return round(1.65 + 7.5 * decay + wobble, 4)


def build_run(chain: list[JobSpec], now_s: float) -> TrainingRun:
    """Checkpoints of one run across its job chain (oldest job first).

    A requeued job resumes from the last checkpoint of the one before, so the steps done after
    that checkpoint are lost, as they are in practice.
    """
    last = chain[-1]
    run = last.job.name
    every = last.checkpoint_every_steps
    offset = (sum(map(ord, run)) % 628) / 100.0
    checkpoints: list[Checkpoint] = []
    resume = 0
    for spec in chain:
        end = min(spec.end_s, now_s)
        steps = max(0, int((end - spec.start_s) / spec.base_step_s))
        first = (resume // every + 1) * every
        for step in range(first, resume + steps + 1, every):
            created = spec.start_s + (step - resume) * spec.base_step_s
            checkpoints.append(
                Checkpoint(
                    run=run,
                    step=step,
                    model_id=f"{run}/step-{step}",
                    created=_dt(created),
                    loss=_loss(step, offset),
                    tokens_seen=step * spec.tokens_per_step,
                )
            )
        if checkpoints:
            resume = checkpoints[-1].step
    return TrainingRun(
        name=run,
        job_ids=tuple(s.job.job_id for s in chain),
        checkpoint_every_steps=every,
        checkpoints=tuple(checkpoints),
    )
