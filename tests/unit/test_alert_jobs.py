"""The job an alert event's nodes run, from the scheduler: which job a node names, one read a
batch, and a scheduler out of reach or silent costing the job fact only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts import runtime
from bot.alerts.config import AlertsConfig
from bot.alerts.correlate import facts_from_labels
from bot.alerts.models import Alert, AlertSource, AlertStatus
from bot.alerts.node_jobs import job_per_node
from bot.backends.alert_store import RedisAlertStore
from bot.backends.sim import SimFleet
from bot.backends.sim.metrics import SimInventory, SimMetrics
from bot.backends.sim.scheduler import SimScheduler
from bot.backends.slack_poster import SlackPoster
from bot.backends.slurm import SlurmRest
from bot.models import Job, JobState, Severity
from bot.ports import Scheduler
from bot.render.alerts import BlockKitAlertMessages
from bot.triage.service import Triage

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(job_id: str, *nodes: str, state: JobState = JobState.RUNNING) -> Job:
    return Job(
        job_id=job_id,
        name="train",
        user="bob",
        state=state,
        nodes=nodes,
        start=T0,
        partition="gpu",
        gpus_per_node=8,
    )


def alert(node: str, *, status: AlertStatus = AlertStatus.FIRING, **labels: str) -> Alert:
    return Alert(
        fingerprint=f"fp-{node}",
        source=AlertSource.ALERTMANAGER,
        status=status,
        cause="xid79",
        node=node,
        severity=Severity.CRITICAL,
        summary="GPU fell off the bus",
        labels=labels,
        facts=facts_from_labels(labels),
        starts_at=T0,
    )


def test_a_node_of_several_jobs_names_the_one_most_alerting_nodes_run() -> None:
    big = job("4100123", "n1", "n2", "n3", "n4")
    # n1 and n2 also run a job of their own; n5 runs only one; a pending job is on no node.
    jobs = [
        big,
        job("17", "n1"),
        job("18", "n2"),
        job("19", "n5"),
        job("20", state=JobState.PENDING),
    ]
    assert job_per_node(jobs, ["n1", "n2", "n3", "n5", "n9"]) == {
        "n1": "4100123",
        "n2": "4100123",
        "n3": "4100123",
        "n5": "19",
    }
    # As many alerting nodes each: the bigger job, then the lower id (as numbers).
    assert job_per_node([job("5", "n1"), job("6", "n1", "n7")], ["n1"]) == {"n1": "6"}
    assert job_per_node([job("1000", "n1"), job("999", "n1")], ["n1"]) == {"n1": "999"}


def alerting(scheduler: Scheduler | None, fleet: SimFleet) -> runtime.Alerting:
    # The store and poster are never reached: running_jobs reads the scheduler only.
    triage = Triage(SimMetrics(fleet), SimInventory(fleet), scheduler)
    return runtime.Alerting(
        RedisAlertStore(aioredis.Redis()),
        SlackPoster(AsyncWebClient()),
        AlertsConfig(),
        triage,
        BlockKitAlertMessages(),
        inventory=triage.inventory,
        scheduler=triage.scheduler,
        cpu=triage.cpu,
    )


async def test_each_alerting_node_gets_the_job_the_scheduler_runs_there() -> None:
    fleet = SimFleet(8, seed=3)
    names = list(SimInventory(fleet).names())
    fleet.add_job(names[:3], job_id="9300001")
    a = alerting(SimScheduler(fleet), fleet)
    alerts = [
        *(alert(n) for n in names[:3]),
        alert(names[3], job_id="77"),  # its label names the job: not asked for
        alert(names[4], status=AlertStatus.RESOLVED),  # over: the job there now is not its
    ]
    jobs = await a.running_jobs(alerts)
    assert {n: jobs[n] for n in names[:3]} == dict.fromkeys(names[:3], "9300001")
    assert names[3] not in jobs and names[4] not in jobs
    facts = a.describer(jobs)(names[0])
    assert facts["job"] == "9300001" and facts["rack"]  # the inventory's facts stay
    assert "job" not in a.describer(jobs)(names[4])


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A port that takes connections and never answers."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def test_slurm_out_of_reach_or_silent_costs_the_job_fact_only(
    silent_port: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = SimFleet(4, seed=3)
    node = SimInventory(fleet).names()[0]
    monkeypatch.setattr(runtime, "JOBS_TIMEOUT_S", 0.3)
    for url in ("http://127.0.0.1:1", f"http://127.0.0.1:{silent_port}"):
        slurm = SlurmRest(url, token="t", user="meowbot", timeout_s=30)
        caplog.clear()
        try:
            started = asyncio.get_running_loop().time()
            assert await alerting(slurm, fleet).running_jobs([alert(node)]) == {}
            assert asyncio.get_running_loop().time() - started < 5
        finally:
            await slurm.close()
        said = [r for r in caplog.records if "running jobs unknown" in r.getMessage()]
        assert len(said) == 1
