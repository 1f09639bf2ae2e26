"""Every answer reads right: Slack's mrkdwn only, plurals that agree, numbers as people write
them, fault kinds and NVIDIA's buckets in words, the words people type as filters."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.models import FaultKind, JobState
from bot.render.triage import render_faults, render_node
from bot.triage import service
from bot.triage.checks import CHECKS, HealthConfig
from bot.triage.kinds import WORDS, words
from bot.triage.service import FaultsReport, NodeReport, Triage, UserError
from bot.triage.stragglers import StragglerConfig
from bot.triage.targets import parse_kinds
from bot.triage.window import in_the_last, span
from bot.triage.xid import BUCKET_WORDS, IGNORE, XID_CATALOG, advice
from bot.words import count, number, plural
from handlers.commands import BY_NAME
from tests.unit.test_triage import every_kind_fleet, triage_for

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RAW_BUCKET = re.compile(r"\b[A-Z]{3,}_[A-Z0-9_]+\b")  # RESET_GPU, WORKFLOW_XID_48


def texts(message: object) -> str:
    return json.dumps(message.to_dict(), ensure_ascii=False)  # type: ignore[attr-defined]


def test_plurals_and_numbers() -> None:
    assert count(1, "fault") == "1 fault"
    assert count(2, "group") == "2 groups"
    assert count(1, "double-bit ECC error") == "1 double-bit ECC error"
    assert count(15084, "NVLink CRC flit error") == "15,084 NVLink CRC flit errors"
    assert count(1.0, "token") == "1 token"
    assert count(0, "node") == "0 nodes"
    assert plural(3, "switch") == "switches" and plural(2, "reply") == "replies"
    assert plural(2, "day") == "days"
    assert number(1530.4) == "1,530" and number(2.5) == "2.5" and "e" not in number(0.00012)


def test_windows_in_days_past_a_day() -> None:
    assert span(7 * 86400) == "7 days"
    assert in_the_last(7 * 86400) == "in the last 7 days"
    assert span(86400) == "24 h" and span(3 * 3600) == "3 h" and span(90 * 60) == "90 min"


def test_every_kind_has_words_and_the_filter_takes_the_words_people_use() -> None:
    assert set(WORDS) == set(FaultKind)
    assert words(FaultKind.THROTTLE_SW_THERMAL) == "software thermal slowdown"
    thermal = {
        FaultKind.HIGH_TEMPERATURE,
        FaultKind.THROTTLE_SW_THERMAL,
        FaultKind.THROTTLE_HW_THERMAL,
    }
    for word in ("temperature", "temp", "hot", "Thermal"):
        assert parse_kinds(word) == thermal
    assert parse_kinds("ecc") and FaultKind.ECC_DBE in (parse_kinds("ecc") or ())
    assert parse_kinds("nvlink") == {FaultKind.NVLINK_CRC, FaultKind.NVLINK_REPLAY}
    ib = parse_kinds("ib") or frozenset()
    assert FaultKind.IB_LINK_DOWN in ib and ib <= (parse_kinds("network") or frozenset())
    assert FaultKind.NIC_ERRORS in (parse_kinds("network") or ())
    assert parse_kinds("driver") == {FaultKind.DRIVER_DRIFT}
    assert parse_kinds("kernel") == {FaultKind.KERNEL_DRIFT}
    assert parse_kinds("ib-link-down") == {FaultKind.IB_LINK_DOWN}
    assert parse_kinds("gpu-0001") is None


def test_xid_buckets_in_words() -> None:
    for info in XID_CATALOG.values():
        said = advice(info.immediate, info.investigatory)
        assert not RAW_BUCKET.search(said), said
        if info.investigatory != IGNORE:
            assert "if it recurs" in said
    assert set(BUCKET_WORDS) >= {x.immediate for x in XID_CATALOG.values()} - {IGNORE}
    assert advice("RESET_GPU", "WORKFLOW_XID_48") == (
        "reset the GPU now; if it recurs, check the GPU's row remapping, then reset it"
    )


async def test_hw_faults_reads_as_words() -> None:
    fleet = every_kind_fleet()
    fleet.inject(FaultKind.ECC_DBE, "gpu-0127", 1, NOW - timedelta(minutes=30), count=1)
    report = await service.hw_faults(triage_for(fleet), "--since 7d")
    assert isinstance(report, FaultsReport)
    text = texts(render_faults(report))
    assert "**" not in text
    assert not re.search(r"\b1 (faults|groups|nodes|errors|double-bit ECC errors)\b", text)
    assert "last 7 days" in text and "168 h" not in text
    assert "(state " not in text and "is down" in text
    assert not RAW_BUCKET.search(text.replace("DCGM_", "")), text
    assert "*hardware thermal slowdown* (`throttle_hw_thermal`)" in text
    assert "1 double-bit ECC error:" in text


async def test_one_fault_in_one_group_is_singular() -> None:
    fleet = SimFleet(16, seed=3, now=NOW, fault_rate=0.0)
    fleet.inject(FaultKind.NVLINK_CRC, "gpu-0005", 2, NOW - timedelta(minutes=30))
    report = await service.hw_faults(triage_for(fleet), "gpu-0005")
    assert isinstance(report, FaultsReport)
    text = texts(render_faults(report))
    assert "*1 fault* in *1 group*" in text
    assert re.search(r"\d NVLink CRC flit errors in the last 24 h", text), text


async def test_node_health_fields_are_slack_bold_once() -> None:
    fleet = every_kind_fleet()
    report = await service.node_health(triage_for(fleet), "gpu-0002")
    assert isinstance(report, NodeReport)
    text = texts(render_node(report))
    assert "**" not in text
    for label in ("Topology", "Versions", "GPUs"):
        assert f"*{label}*\\n" in text


async def test_hw_faults_help_lists_every_kind_and_option() -> None:
    text = texts(BY_NAME["/hw-faults"].help())
    for check in CHECKS:
        for kind in check.kinds:
            assert f"`{kind.value}`" in text
    for option in ("--since", "hostlist", "`temperature`", "`ib`", "`network`", "`driver`"):
        assert option in text


async def test_an_unknown_word_points_at_the_kinds() -> None:
    fleet = SimFleet(16, seed=3, now=NOW, fault_rate=0.0)
    found = await service.hw_faults(triage_for(fleet), "temprature")
    assert isinstance(found, UserError) and "/hw-faults help" in found.sentence
    hot = await service.hw_faults(triage_for(fleet), "temperature")
    assert isinstance(hot, FaultsReport)


def test_a_live_simulated_fleet_reads_at_the_real_time() -> None:
    # The fleet is built on the hour; a reading 40 minutes later is of that later minute.
    fleet = SimFleet(8, seed=0, now=datetime.now(UTC) - timedelta(minutes=40), fault_rate=0.0)
    live = SimMetrics(fleet, live=True)
    assert live.clock() >= datetime.now(UTC) - timedelta(minutes=1)
    assert SimMetrics(fleet).clock() == fleet.now
    cfg = HealthConfig()
    table = live.read_now([], nodes=None, window_s=cfg.window_s)
    assert table.at > fleet.now + timedelta(minutes=30)
    assert SimInventory(fleet).names()


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (JobState.FAILED, "failed at"),
        (JobState.COMPLETED, "completed at"),
        (JobState.CANCELLED, "was cancelled at"),
        (JobState.TIMEOUT, "timed out at"),
    ],
)
async def test_an_ended_job_is_said_in_english(state: JobState, said: str) -> None:
    from bot.triage import jobs

    job = type("J", (), {"state": state, "end": NOW, "name": "llm", "nodes": ("a",)})()

    class Sched:
        name = "Slurm"

        async def job(self, job_id: str) -> object:
            return job

    triage = Triage(None, None, Sched(), HealthConfig())  # type: ignore[arg-type]
    found = await jobs.find_job(triage, "42", StragglerConfig())
    assert isinstance(found, UserError)
    assert said in found.sentence and " is failed" not in found.sentence


def test_evidence_and_small_numbers_have_no_exponent() -> None:
    assert number(1.7e9, separators=False) == "1700000000"
    assert number(0.00012) == "0.00012" and number(2.0935) == "2.09"
    assert number(1530.4) == "1,530" and number(float("nan")) == "nan"
    for x in (1e-5, 3.3e-4, 12345678.9, 1.53e3, 0.5):
        assert "e" not in number(x) and "e" not in number(x, separators=False)


def test_app_home_jobs_say_one_node() -> None:
    from bot.models import Job
    from bot.render.triage import jobs_lines
    from bot.triage.service import UserJobs

    job = Job(
        job_id="42",
        name="llm",
        user="ana",
        state=JobState.RUNNING,
        nodes=("gpu-0001",),
        start=NOW,
        partition="gpu",
        gpus_per_node=8,
    )
    (line,) = jobs_lines(UserJobs("ana", [job], None))
    assert "on 1 node " in line and "1 nodes" not in line
