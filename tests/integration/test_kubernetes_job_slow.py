"""/job-slow and /regressions of a Kubernetes job: its nodes from the real kube-apiserver, its
step times and its nodes' hardware from the real Prometheus the simulated fleet feeds, and
from a Prometheus of its own holding series labelled as dcgm-exporter on Kubernetes does.

A PyTorchJob's pods are bound (`spec.nodeName`) to the nodes of one of the scenario's jobs
(prom_scenario.CAUSE_JOBS: a power brake on one node, four clean ones, half of them on the
newer dcgm-exporter's `hostname`), and the exporter writes that job's series a second time
under the Kubernetes id, `job_id="team-k/pytorchjob/llm-7b"` (sim_exporter's `--aliases`,
keeping the scenario id for the other tests), as a training exporter on Kubernetes labels
them. The job is asked for by that id, as `/job-slow team-k/pytorchjob/llm-7b` asks.

The last test backfills its own Prometheus with a Kubernetes fleet's labels: dcgm-exporter
in a pod off the host's network (its Hostname is its own pod's name, `instance` that pod's
address, the node only in the scrape's relabelled `node`, the workload's `pod` and
`namespace` beside), and a training exporter scraped by pod (its `instance` a pod address,
`node` from the downward API).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot import metric_names as m
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
from scripts.testsvc.prometheus import BackfilledPrometheus, backfill_openmetrics
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


# ------------------------------------------------- dcgm-exporter's labels on Kubernetes
K8S_NODES = ("gpu-k8s-01", "gpu-k8s-02", "gpu-k8s-03", "gpu-k8s-04", "gpu-k8s-05")
K8S_SLOW = "gpu-k8s-03"  # its GPUs run at a low SM clock
K8S_JOB = f"{NAMESPACE}/pytorchjob/bert"
HISTORY_S = 1800
SAMPLE_S = 15


def _k8s_history(end_s: int) -> Iterator[str]:
    """Half an hour of a synchronous job's equal step times and its nodes' GPUs, labelled as
    on Kubernetes."""
    times = range(end_s - HISTORY_S, end_s + 1, SAMPLE_S)
    families: dict[str, list[tuple[str, float]]] = {
        m.DCGM_FI_DEV_SM_CLOCK: [],
        m.DCGM_FI_DEV_GPU_UTIL: [],
        m.DCGM_FI_DEV_POWER_USAGE: [],
        m.TRAINING_STEP_TIME_SECONDS: [],
    }
    for i, node in enumerate(K8S_NODES):
        for gpu in range(RANKS_PER_NODE):
            dcgm = (
                f'{m.LABEL_HOSTNAME}="nvidia-dcgm-exporter-{i}x7k2",'
                f'{m.LABEL_INSTANCE}="10.244.{i}.17:9400",node="{node}",{m.LABEL_GPU}="{gpu}",'
                f'pod="bert-worker-{i}",namespace="{NAMESPACE}",container="main"'
            )
            families[m.DCGM_FI_DEV_SM_CLOCK].append((dcgm, 1410.0 if node == K8S_SLOW else 1980.0))
            families[m.DCGM_FI_DEV_GPU_UTIL].append((dcgm, 100.0))
            families[m.DCGM_FI_DEV_POWER_USAGE].append((dcgm, 690.0))
            rank = (
                f'{CFG.job_label}="{K8S_JOB}",{CFG.node_label}="{node}",'
                f'{CFG.rank_label}="{i * RANKS_PER_NODE + gpu}",'
                f'{m.LABEL_INSTANCE}="10.244.{i}.23:9500",pod="bert-worker-{i}",'
                f'namespace="{NAMESPACE}"'
            )
            families[m.TRAINING_STEP_TIME_SECONDS].append((rank, 1.25))
    for name, series in families.items():
        yield f"# TYPE {name} gauge\n"
        for labels, value in series:
            yield "".join(f"{name}{{{labels}}} {value} {t}\n" for t in times)


@pytest.fixture(scope="module")
def k8s_labels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, datetime]]:
    """A Prometheus of its own over that history, and the job's pods in the API server."""
    need_service("PROMETHEUS_URL")  # the test environment installed Prometheus and promtool
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    api = KubeApi.from_env()
    api.namespace(NAMESPACE)
    torch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "uid": "00000000-0000-0000-0000-0000000000c8"},
    }
    pods = [f"bert-worker-{i}" for i in range(len(K8S_NODES))]
    tmp = Path(tmp_path_factory.mktemp("k8s-labels"))
    # Prometheus keeps what is younger than its retention by the wall clock.
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    text = tmp / "history.om"
    with text.open("w") as out:
        out.writelines(_k8s_history(int(end.timestamp())))
        out.write("# EOF\n")
    data = tmp / "data"
    backfill_openmetrics(text, data)
    try:
        for pod, node in zip(pods, K8S_NODES, strict=True):
            api.node(node)
            api.pod(NAMESPACE, pod, node, owner=torch)
        with BackfilledPrometheus(
            tmp, data, f"count({m.DCGM_FI_DEV_SM_CLOCK})", end.timestamp()
        ) as prom:
            yield prom.url, end
    finally:
        for pod in pods:
            api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")


async def test_a_node_is_found_where_dcgm_exporters_hostname_is_its_pod(
    k8s_labels: tuple[str, datetime], kube: KubernetesScheduler
) -> None:
    url, end = k8s_labels
    metrics = PrometheusMetrics(url, timeout_s=10.0)
    triage = Triage(metrics, PrometheusInventory(metrics), kube, HEALTH, CFG)
    try:
        job = await find_job(triage, K8S_JOB, CFG)
        assert isinstance(job, Job), job
        report = await slow_job(triage, job, CFG, now=end)
    finally:
        await metrics.close()
    assert job.nodes == K8S_NODES
    assert isinstance(report, SlowJobReport), report
    d = report.diagnosis
    # Equal step times on every rank: the hardware names the node, by its node name (not the
    # exporter pod's Hostname nor the pod address in `instance`).
    assert d.mode == "proxies" and d.has_steps
    assert set(d.per_node) == set(K8S_NODES), d.per_node
    assert [s.node for s in d.stragglers] == [K8S_SLOW]
    lag = d.stragglers[0].lag
    assert lag is not None and lag.proxy.label == "SM clock"
