"""Domain models shared by every part of meowbot.

Every model is a frozen pydantic v2 model: services pass them around and renderers read them, and
nobody should be able to change a fault or a verdict after a check produced it. Time is always a
timezone-aware datetime in UTC (a naive datetime is rejected, not guessed at), and quantities carry
their unit in their name.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


def _require_utc(value: datetime) -> datetime:
    """Reject naive datetimes and normalise aware ones to UTC.

    A naive datetime is ambiguous (local time of which machine?), and mixing the two kinds raises
    at comparison time far from where the bad value came in; failing at the model boundary names
    the field instead.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("datetime must be timezone-aware (UTC), got a naive datetime")
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_require_utc)]
"""A timezone-aware datetime, stored in UTC."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _OrderedStrEnum(StrEnum):
    """A string enum ordered by declaration, not alphabetically.

    StrEnum members compare as strings ("critical" < "info"), which is wrong for severities and
    verdicts; these compare by the order in which the members are declared.
    """

    @property
    def rank(self) -> int:
        return list(type(self)).index(self)

    def _rank_of(self, other: object) -> int | None:
        if isinstance(other, type(self)):
            return other.rank
        return None

    def __lt__(self, other: object) -> bool:
        rank = self._rank_of(other)
        if rank is None:
            return NotImplemented
        return self.rank < rank

    def __le__(self, other: object) -> bool:
        rank = self._rank_of(other)
        if rank is None:
            return NotImplemented
        return self.rank <= rank

    def __gt__(self, other: object) -> bool:
        rank = self._rank_of(other)
        if rank is None:
            return NotImplemented
        return self.rank > rank

    def __ge__(self, other: object) -> bool:
        rank = self._rank_of(other)
        if rank is None:
            return NotImplemented
        return self.rank >= rank


class Severity(_OrderedStrEnum):
    """How bad a fault is; ordered info < warning < critical."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class VerdictLevel(_OrderedStrEnum):
    """What a node is fit for; ordered healthy < degraded < drain < rma."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    DRAIN = "drain"
    RMA = "rma"


class Action(StrEnum):
    """What an operator should do about a fault."""

    NONE = "none"
    WATCH = "watch"
    REBOOT = "reboot"
    RESET_GPU = "reset_gpu"
    DRAIN = "drain"
    RMA = "rma"
    REQUEUE = "requeue"


class FaultKind(StrEnum):
    """Every kind of fault or slowdown cause that the checks name and the simulator injects.

    The first group is hardware and software health; the last group are causes of a slow
    synchronous job that are not a broken node, listed in ``JOB_LEVEL_KINDS``.
    """

    XID = "xid"
    ECC_DBE = "ecc_dbe"
    ROW_REMAP_FAILURE = "row_remap_failure"
    ROW_REMAP_PENDING = "row_remap_pending"
    THROTTLE_POWER = "throttle_power"
    THROTTLE_HW_SLOWDOWN = "throttle_hw_slowdown"
    THROTTLE_SW_THERMAL = "throttle_sw_thermal"
    THROTTLE_HW_THERMAL = "throttle_hw_thermal"
    POWER_BRAKE = "power_brake"
    HIGH_TEMPERATURE = "high_temperature"
    NVLINK_CRC = "nvlink_crc"
    NVLINK_REPLAY = "nvlink_replay"
    PCIE_REPLAY = "pcie_replay"
    PCIE_DOWNTRAINED = "pcie_downtrained"
    IB_LINK_DOWN = "ib_link_down"
    IB_FLAPPING = "ib_flapping"
    IB_SYMBOL_ERRORS = "ib_symbol_errors"
    NIC_ERRORS = "nic_errors"
    UNEXPECTED_REBOOT = "unexpected_reboot"
    GPU_MISSING = "gpu_missing"
    DRIVER_DRIFT = "driver_drift"
    KERNEL_DRIFT = "kernel_drift"
    FIRMWARE_DRIFT = "firmware_drift"
    # What DCGM's own health watches report failing (newer dcgm-exporters): the only evidence
    # of what no other family shows (a corrupt InfoROM, a PMU or MCU fault, the driver).
    DCGM_HEALTH = "dcgm_health"
    # Straggler causes that live on one node but are not hardware faults as such.
    LOW_SM_CLOCK = "low_sm_clock"
    CPU_CONTENTION = "cpu_contention"
    NUMA_MISPLACEMENT = "numa_misplacement"
    # Straggler causes of the job itself: no node is to blame.
    PIPELINE_IMBALANCE = "pipeline_imbalance"
    GC_STALLS = "gc_stalls"
    JOB_SLOWDOWN = "job_slowdown"


JOB_LEVEL_KINDS: frozenset[FaultKind] = frozenset(
    {FaultKind.PIPELINE_IMBALANCE, FaultKind.GC_STALLS, FaultKind.JOB_SLOWDOWN}
)
"""Causes that belong to a job, not to a node: a node must never be drained for them."""

VERSION_DRIFT_KINDS: frozenset[FaultKind] = frozenset(
    {FaultKind.DRIVER_DRIFT, FaultKind.KERNEL_DRIFT, FaultKind.FIRMWARE_DRIFT}
)


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"


class Gpu(_Frozen):
    """One GPU of a node, with where it sits on the host (NUMA domain, affine NIC)."""

    index: int = Field(ge=0)
    uuid: str
    model_name: str
    pci_bus_id: str
    numa_node: int = Field(ge=0)
    nic: str
    """Name of the NIC on the same PCIe switch (GPUDirect RDMA partner), e.g. ``mlx5_3``."""


class Nic(_Frozen):
    """One InfiniBand HCA port of a node."""

    name: str
    """HCA name as node_exporter's ``device`` label has it, e.g. ``mlx5_0``."""
    netdev: str
    """The IPoIB network interface of that HCA, e.g. ``ib0``."""
    numa_node: int = Field(ge=0)
    port: int = 1


class Node(_Frozen):
    name: str
    rack: str
    leaf_switch: str
    spine: str
    gpus: tuple[Gpu, ...]
    """The GPUs the node shows now; fewer than ``expected_gpus`` when one fell off the bus."""
    nics: tuple[Nic, ...]
    numa_nodes: int = Field(ge=1)
    driver_version: str
    kernel_version: str
    firmware_version: str
    """GPU VBIOS version."""
    expected_gpus: int = Field(ge=0)


class Job(_Frozen):
    job_id: str
    name: str
    user: str
    state: JobState
    nodes: tuple[str, ...]
    start: UtcDatetime
    end: UtcDatetime | None = None
    partition: str
    gpus_per_node: int = Field(ge=0)
    prev_job_id: str | None = None
    """The previous run of the same job name (a requeue or resubmission), when there is one."""
    requeue: bool | None = None
    """Whether the scheduler requeues the job when its node goes down (Slurm's `requeue`
    flag: `--requeue`, `JobRequeue`); None when the scheduler does not say."""

    @model_validator(mode="after")
    def _end_after_start(self) -> Self:
        if self.end is not None and self.end < self.start:
            raise ValueError("job end is before its start")
        return self


class Evidence(_Frozen):
    """One series and value that shows a fault, as the check saw it."""

    series: str
    labels: dict[str, str]
    value: float
    note: str = ""


class Fault(_Frozen):
    kind: FaultKind
    node: str
    gpu: int | None = None
    since: UtcDatetime
    evidence: tuple[Evidence, ...] = ()
    severity: Severity
    action: Action
    summary: str
    repeat: str | None = None
    """Set on a repeat offender's fault: its history, "3rd Xid 79 on GPU 3 in 30 days: ..."."""


class Verdict(_Frozen):
    node: str
    level: VerdictLevel
    reasons: tuple[str, ...] = ()
    """Most important first."""
    drain_reason: str | None = None
    """The short reason Slurm gets, e.g. ``meowbot: xid79 gpu3``."""


class Checkpoint(_Frozen):
    run: str
    step: int = Field(ge=0)
    model_id: str
    """The id an OpenAI-compatible server lists under ``/v1/models``."""
    created: UtcDatetime | None = None
    """When it was saved, where the server or the folder says."""
    loss: float | None = None
    tokens_seen: int | None = Field(default=None, ge=0)


class TrainingRun(_Frozen):
    """An in-training run: one job name across its requeues, with its checkpoints so far."""

    name: str
    job_ids: tuple[str, ...]
    """Oldest first; the last one is the job running now."""
    checkpoint_every_steps: int = Field(ge=1)
    checkpoints: tuple[Checkpoint, ...]
    """Oldest first."""


class Highlight(_Frozen):
    team: str
    channel: str
    ts: str
    thread_ts: str | None = None
    author: str
    reactors: frozenset[str]
    first_tagged_at: UtcDatetime
    excerpt: str
    permalink: str


class StragglerReport(_Frozen):
    """Minimal on purpose: what /job-slow and the scheduler adapters need."""

    job_id: str
    stragglers: tuple[str, ...]
    causes: dict[str, FaultKind] = Field(default_factory=dict)
    """Cause per straggler node; a node without a known cause is absent."""

    @model_validator(mode="after")
    def _causes_name_stragglers(self) -> Self:
        unknown = set(self.causes) - set(self.stragglers)
        if unknown:
            raise ValueError(f"causes given for nodes that are not stragglers: {sorted(unknown)}")
        return self
