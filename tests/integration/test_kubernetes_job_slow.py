"""/job-slow and /regressions of a Kubernetes job: its nodes from the real kube-apiserver, its
step times and its nodes' hardware from the real Prometheus the simulated fleet feeds.

A PyTorchJob's pods are bound (`spec.nodeName`) to the nodes of one of the scenario's jobs
(prom_scenario.CAUSE_JOBS: a power brake on one node, four clean ones, half of them on the
newer dcgm-exporter's `hostname`), and the exporter writes that job's series a second time
under the Kubernetes id, `job_id="team-k/pytorchjob/llm-7b"` (sim_exporter's `--aliases`,
keeping the scenario id for the other tests), as a training exporter on Kubernetes labels
them. The job is asked for by that id, as `/job-slow team-k/pytorchjob/llm-7b` asks.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.kubernetes_jobs import UserRule
from bot.backends.prometheus import PrometheusInventory, PrometheusMetrics
from bot.backends.prometheus_history import MIN_STEP_S, PrometheusFleetHistory
from bot.models import FaultKind, Job, JobState
from bot.render.jobslow import render_answer
from bot.triage.checks import HealthConfig
from bot.triage.jobs import SlowJobReport, find_job, slow_job
from bot.triage.service import Triage, UserError
from bot.triage.stragglers import StragglerConfig
from tests.conftest import need_service
from tests.integration import prom_scenario as scenario
from tests.kube_api import KubeApi, wait_ready

HEALTH = HealthConfig(window_s=scenario.WINDOW_S)
CFG = StragglerConfig()
RANKS_PER_NODE = 8
SERIES_WAIT_S = 30.0
NAMESPACE = "team-k"
JOB_ID = f"{NAMESPACE}/pytorchjob/llm-7b"
PLANNED = scenario.CAUSE_JOBS[3]
STRAGGLER = "gpu-0019"


def _write_aliases(path: str, change: dict[str, list[str] | None]) -> None:
    """The aliases file with `change` applied (None drops an entry); what other tests wrote
    (Slurm's ids) stays. Replaced whole, so the exporter never reads half a file."""
    try:
        with open(path, encoding="utf-8") as f:
            aliases = json.load(f)
    except (OSError, ValueError):
        aliases = {}
    for key, ids in change.items():
        if ids is None:
            aliases.pop(key, None)
        else:
            aliases[key] = ids
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(aliases, f)
    os.replace(path + ".tmp", path)


async def _wait_for_series(prom_url: str) -> None:
    metrics = PrometheusMetrics(prom_url, timeout_s=5.0)
    want = len(PLANNED.nodes) * RANKS_PER_NODE
    deadline = time.monotonic() + SERIES_WAIT_S
    seen = 0
    try:
        while time.monotonic() < deadline:
            seen = len(await metrics.step_times(JOB_ID, CFG))
            if seen == want:
                return
            await asyncio.sleep(0.5)
    finally:
        await metrics.close()
    raise AssertionError(f"{seen} of {want} ranks scraped under {JOB_ID} in {SERIES_WAIT_S} s")


@pytest.fixture(scope="module")
def kube_job() -> Iterator[str]:
    """The PyTorchJob's pods on the planned job's nodes, and its series under its id."""
    prom_url = need_service("PROMETHEUS_URL")
    aliases = need_service("MEOWBOT_TEST_JOB_ALIASES")
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    api = KubeApi.from_env()
    api.namespace(NAMESPACE)
    # Named by its pods' ownerReferences only: this API server serves no custom resource
    # (tests/integration/test_kubernetes.py says why), so the owner chain ends at it.
    torch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "llm-7b", "uid": "00000000-0000-0000-0000-0000000000c7"},
    }
    pods = [f"llm-7b-worker-{i}" for i in range(len(PLANNED.nodes))]
    try:
        for pod, node in zip(pods, PLANNED.nodes, strict=True):
            api.node(node)
            api.pod(NAMESPACE, pod, node, owner=torch)
        _write_aliases(aliases, {PLANNED.job_id: [PLANNED.job_id, JOB_ID]})
        asyncio.run(_wait_for_series(prom_url))
        yield prom_url
    finally:
        _write_aliases(aliases, {PLANNED.job_id: None})
        for pod in pods:
            api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")


@pytest.fixture
async def kube() -> AsyncIterator[KubernetesScheduler]:
    adapter = KubernetesScheduler(
        kubeconfig=need_service("MEOWBOT_TEST_KUBECONFIG"), user_rule=UserRule("namespace")
    )
    yield adapter
    await adapter.close()


async def test_a_kubernetes_job_is_found_by_its_id_and_its_straggler_named(
    kube_job: str, kube: KubernetesScheduler
) -> None:
    metrics = PrometheusMetrics(kube_job, timeout_s=10.0)
    triage = Triage(metrics, PrometheusInventory(metrics), kube, HEALTH, CFG)
    try:
        # As typed: the kind as its manifest spells it.
        job = await find_job(triage, "team-k/PyTorchJob/llm-7b", CFG)
        assert isinstance(job, Job), job
        report = await slow_job(triage, job, CFG, viewer="someone")
    finally:
        await metrics.close()
    # The job and its nodes come from the pods' spec.nodeName in the API server.
    assert job.job_id == JOB_ID and job.name == "llm-7b" and job.user == NAMESPACE
    assert job.nodes == PLANNED.nodes and job.state is JobState.RUNNING
    assert job.gpus_per_node == 8
    assert isinstance(report, SlowJobReport), report
    d = report.diagnosis
    # Every rank's compute time came under the Kubernetes id, and every node's hardware and
    # health by node name (the `hostname` rack among them).
    assert d.mode == "compute time" and d.missing == [] and set(d.per_node) == set(job.nodes)
    assert {s.node: s.cause.kind if s.cause else None for s in d.stragglers} == {
        STRAGGLER: FaultKind.POWER_BRAKE
    }
    assert report.owner_note == f"{NAMESPACE}'s job" and report.not_run == {}
    answer = json.dumps(render_answer(report).blocks)
    assert JOB_ID in answer and STRAGGLER in answer


async def test_an_unknown_kubernetes_job_is_a_sentence(
    kube_job: str, kube: KubernetesScheduler
) -> None:
    metrics = PrometheusMetrics(kube_job, timeout_s=5.0)
    triage = Triage(metrics, PrometheusInventory(metrics), kube, HEALTH, CFG)
    try:
        gone = await find_job(triage, f"{NAMESPACE}/pytorchjob/llm-13b", CFG)
        bad = await find_job(triage, f'{NAMESPACE}/pytorchjob/x"}} or vector(1)', CFG)
    finally:
        await metrics.close()
    assert isinstance(gone, UserError)
    assert gone.sentence.startswith(f"Kubernetes knows no job {NAMESPACE}/pytorchjob/llm-13b")
    assert isinstance(bad, UserError) and "is not a job id" in bad.sentence
    assert metrics.queries == 0  # nothing reached Prometheus


async def test_regressions_reads_the_kubernetes_jobs_pace_with_its_nodes(kube_job: str) -> None:
    """/regressions keys each job's pace by its `job_id` label, whatever the id: nothing in
    the finder reads Slurm's digits, so a Kubernetes job is one more job there."""
    metrics = PrometheusMetrics(kube_job, timeout_s=10.0)
    history = PrometheusFleetHistory(metrics, stragglers=CFG)
    # The history's points stand on multiples of its step (5 minutes at least), and the job's
    # series began seconds ago: the window ends at the next multiple, which Prometheus
    # evaluates with its 5-minute lookback (the last sample), as a read then would see it.
    now = datetime.now(UTC).timestamp()
    end = datetime.fromtimestamp(math.ceil(now / MIN_STEP_S) * MIN_STEP_S, UTC)
    try:
        read = await history.job_paces(start=end - timedelta(hours=1), end=end)
        paces = {p.job_id: p for p in read}
    finally:
        await metrics.close()
    pace = paces[JOB_ID]
    assert pace.nodes == PLANNED.nodes and pace.gpus == len(PLANNED.nodes) * RANKS_PER_NODE
    assert pace.samples and all(s.seconds > 0 for s in pace.samples)
    # The same series as the scenario's own job, under another id.
    twin = paces[PLANNED.job_id]
    assert twin.nodes == pace.nodes
