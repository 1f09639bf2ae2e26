"""The shared domain models: aware UTC time, frozen values, ordered enums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from bot.models import (
    JOB_LEVEL_KINDS,
    Action,
    Checkpoint,
    Evidence,
    Fault,
    FaultKind,
    Gpu,
    Highlight,
    Job,
    JobState,
    Severity,
    StragglerReport,
    Verdict,
    VerdictLevel,
)

AWARE = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def fault(**overrides: object) -> Fault:
    fields: dict[str, object] = {
        "kind": FaultKind.XID,
        "node": "gpu-0001",
        "gpu": 3,
        "since": AWARE,
        "evidence": (
            Evidence(
                series="DCGM_FI_DEV_XID_ERRORS",
                labels={"Hostname": "gpu-0001", "gpu": "3"},
                value=79,
                note="fallen off the bus",
            ),
        ),
        "severity": Severity.CRITICAL,
        "action": Action.DRAIN,
        "summary": "Xid 79 on GPU 3",
    }
    fields.update(overrides)
    return Fault.model_validate(fields)


def test_naive_datetime_is_rejected() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        fault(since=datetime(2026, 3, 10, 12, 0))
    with pytest.raises(ValidationError, match="timezone-aware"):
        Checkpoint(run="r", step=1, model_id="r/step-1", created=datetime(2026, 1, 1))


def test_aware_datetime_is_stored_in_utc() -> None:
    berlin = timezone(timedelta(hours=1))
    f = fault(since=datetime(2026, 3, 10, 13, 0, tzinfo=berlin))
    assert f.since == AWARE and f.since.utcoffset() == timedelta(0)


def test_models_are_frozen_and_strict() -> None:
    f = fault()
    with pytest.raises(ValidationError):
        setattr(f, "node", "gpu-0002")  # noqa: B010 - frozen: the assignment must fail
    with pytest.raises(ValidationError):
        fault(colour="red")
    with pytest.raises(ValidationError):
        fault(kind="not_a_kind")
    assert fault(kind="ecc_dbe").kind is FaultKind.ECC_DBE
    with pytest.raises(ValidationError):
        Gpu(index=-1, uuid="u", model_name="m", pci_bus_id="p", numa_node=0, nic="mlx5_0")


def test_severity_and_verdict_are_ordered_by_meaning() -> None:
    assert Severity.INFO < Severity.WARNING < Severity.CRITICAL
    assert max([Severity.WARNING, Severity.CRITICAL, Severity.INFO]) is Severity.CRITICAL
    assert VerdictLevel.HEALTHY < VerdictLevel.DEGRADED < VerdictLevel.DRAIN < VerdictLevel.RMA
    assert sorted(VerdictLevel, reverse=True)[0] is VerdictLevel.RMA
    assert Severity.CRITICAL >= Severity.CRITICAL
    assert Severity.CRITICAL.value == "critical"  # serialises as its name


def test_verdict_and_fault_round_trip_through_json() -> None:
    f = fault()
    assert Fault.model_validate_json(f.model_dump_json()) == f
    v = Verdict(
        node="gpu-0001",
        level=VerdictLevel.DRAIN,
        reasons=("Xid 79 on GPU 3",),
        drain_reason="meowbot: xid79 gpu3",
    )
    assert Verdict.model_validate_json(v.model_dump_json()) == v


def test_job_end_cannot_precede_start() -> None:
    job = {
        "job_id": "4100001",
        "name": "llama",
        "user": "alice",
        "state": JobState.RUNNING,
        "nodes": ("gpu-0001", "gpu-0002"),
        "start": AWARE,
        "partition": "gpu",
        "gpus_per_node": 8,
    }
    assert Job.model_validate(job).end is None
    with pytest.raises(ValidationError, match="before its start"):
        Job.model_validate({**job, "end": AWARE - timedelta(seconds=1)})


def test_highlight_and_straggler_report() -> None:
    h = Highlight(
        team="T1",
        channel="C1",
        ts="1700000000.000100",
        author="U1",
        reactors=frozenset({"U2", "U3"}),
        first_tagged_at=AWARE,
        excerpt="we beat the baseline",
        permalink="https://example.slack.com/archives/C1/p1700000000000100",
    )
    assert h.thread_ts is None and "U2" in h.reactors
    report = StragglerReport(
        job_id="4100001", stragglers=("gpu-0311",), causes={"gpu-0311": FaultKind.CPU_CONTENTION}
    )
    assert report.causes["gpu-0311"] is FaultKind.CPU_CONTENTION
    with pytest.raises(ValidationError, match="not stragglers"):
        StragglerReport(job_id="1", stragglers=(), causes={"gpu-0001": FaultKind.XID})


def test_job_level_kinds_are_not_node_faults() -> None:
    assert {FaultKind.GC_STALLS, FaultKind.PIPELINE_IMBALANCE, FaultKind.JOB_SLOWDOWN} == set(
        JOB_LEVEL_KINDS
    )
    assert FaultKind.XID not in JOB_LEVEL_KINDS
