"""The Kubernetes adapter against a real kube-apiserver 1.20.2 and etcd (scripts/testsvc/kube.py).

No kubelet and no controllers run: nodes are made through the API with GPU Feature
Discovery's labels and a Ready condition, pods are bound with `spec.nodeName` and set Running
through the status subresource, and an evicted pod stays Terminating (it is deleted with grace
0 afterwards). One API server for the whole module; each test uses nodes of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from bot.backends import kubernetes_nodes as kn
from bot.backends.both_schedulers import BothSchedulers
from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.kubernetes_jobs import UserRule
from bot.backends.slurm import SlurmRest
from bot.doctor.kubernetes_part import kubernetes_lines
from bot.doctor.report import Line, Status
from bot.errors import BackendError
from bot.models import JobState
from tests.conftest import need_service
from tests.kube_api import KubeApi, wait_ready

REASON = "meowbot: xid79 gpu3 by @ana"
RBAC = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "rbac.yaml"
USER = "meowbot-test"


@pytest.fixture(scope="module")
def api() -> KubeApi:
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    return KubeApi.from_env()


@pytest.fixture
async def kube(api: KubeApi) -> AsyncIterator[KubernetesScheduler]:
    adapter = KubernetesScheduler(
        kubeconfig=os.environ["MEOWBOT_TEST_KUBECONFIG"], user_rule=UserRule("namespace", "u-")
    )
    yield adapter
    await adapter.close()


def _node(api: KubeApi, name: str) -> dict[str, Any]:
    got: dict[str, Any] = api.get(f"/api/v1/nodes/{name}")
    return got


def _own_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in node["spec"].get("taints") or [] if t["key"] == kn.KEY]


# ---------------------------------------------------------------- nodes


async def test_gpu_nodes_read_with_their_state(api: KubeApi, kube: KubernetesScheduler) -> None:
    api.node("kn-ready", rack="r07")
    api.node("kn-notready", ready=False)
    api.node("kn-cordoned", unschedulable=True)
    nodes = await kube.nodes()
    assert {"kn-ready", "kn-notready", "kn-cordoned"} <= set(nodes)
    assert nodes["kn-ready"].state == "idle" and not nodes["kn-ready"].out_of_service
    # The not-ready taint the admission plugin added is not read as someone's drain reason.
    assert nodes["kn-ready"].reason is None
    assert nodes["kn-notready"].down
    assert nodes["kn-cordoned"].draining and nodes["kn-cordoned"].reason == "cordoned"
    assert not nodes["kn-cordoned"].reason_is_ours
    before = kube.calls
    one = await kube.nodes(["kn-ready"])
    assert list(one) == ["kn-ready"] and kube.calls == before + 1
    raw = _node(api, "kn-ready")
    assert kn.gpu_count(raw) == 8
    assert kn.label(raw, kn.RACK_LABELS) == "r07"
    assert await kube.nodes(["no-such-node"]) == {}


async def test_listing_is_paged_and_selected(api: KubeApi) -> None:
    for i in range(5):
        api.node(f"kn-page-{i}", labels={"meowbot.io/pool": "paged"})
    adapter = KubernetesScheduler(
        kubeconfig=os.environ["MEOWBOT_TEST_KUBECONFIG"],
        node_selector="meowbot.io/pool=paged",
        page_size=2,
    )
    try:
        nodes = await adapter.nodes()
        assert set(nodes) == {f"kn-page-{i}" for i in range(5)}
        assert adapter.calls == 3  # pages of 2, 2 and 1 through `continue`
    finally:
        await adapter.close()


# ---------------------------------------------------------------- drain and resume


async def test_drain_after_jobs_then_resume_takes_back_only_meowbots(
    api: KubeApi, kube: KubernetesScheduler
) -> None:
    api.node("kn-drain")
    await kube.drain("kn-drain", REASON)
    raw = _node(api, "kn-drain")
    assert raw["spec"]["unschedulable"] is True
    assert _own_taints(raw) == [{"key": kn.KEY, "value": "xid79-gpu3", "effect": "NoSchedule"}]
    mark = json.loads(raw["metadata"]["annotations"][kn.KEY])
    assert mark["reason"] == REASON and mark["by"] == "ana" and mark["cordoned"] is True
    node = (await kube.nodes(["kn-drain"]))["kn-drain"]
    assert node.draining and node.reason == REASON and node.reason_is_ours
    assert node.reason_set_by == "ana" and node.reason_changed_at is not None
    # The same drain again changes nothing.
    rv = raw["metadata"]["resourceVersion"]
    await kube.drain("kn-drain", REASON)
    assert _node(api, "kn-drain")["metadata"]["resourceVersion"] == rv

    await kube.resume("kn-drain")
    raw = _node(api, "kn-drain")
    assert not raw["spec"].get("unschedulable")
    assert _own_taints(raw) == []
    assert kn.KEY not in (raw["metadata"].get("annotations") or {})
    assert not (await kube.nodes(["kn-drain"]))["kn-drain"].out_of_service


async def test_an_operators_taint_and_cordon_are_left_alone(
    api: KubeApi, kube: KubernetesScheduler
) -> None:
    theirs = {"key": "nvidia.com/gpu-health", "value": "xid48", "effect": "NoSchedule"}
    api.node("kn-operator", unschedulable=True, taints=[theirs])
    before = (await kube.nodes(["kn-operator"]))["kn-operator"]
    assert before.draining and not before.reason_is_ours
    assert before.reason == "taints: nvidia.com/gpu-health=xid48:NoSchedule"

    await kube.drain("kn-operator", REASON)
    raw = _node(api, "kn-operator")
    assert theirs in raw["spec"]["taints"] and len(_own_taints(raw)) == 1
    assert json.loads(raw["metadata"]["annotations"][kn.KEY])["cordoned"] is False
    shown = (await kube.nodes(["kn-operator"]))["kn-operator"]
    assert shown.reason_is_ours and "also taints: nvidia.com/gpu-health" in (shown.reason or "")

    await kube.resume("kn-operator")
    raw = _node(api, "kn-operator")
    assert raw["spec"]["unschedulable"] is True  # the operator's cordon stays
    assert theirs in raw["spec"]["taints"] and _own_taints(raw) == []


async def test_a_drain_patch_from_a_stale_read_is_refused_not_applied(
    api: KubeApi, kube: KubernetesScheduler
) -> None:
    """The resourceVersion `test` is what keeps an operator's change made between meowbot's
    read and its write: the server refuses the stale patch (the adapter reads again)."""
    api.node("kn-race")
    stale = _node(api, "kn-race")
    theirs = {"key": "nvidia.com/gpu-health", "value": "xid48", "effect": "NoSchedule"}
    api.merge("/api/v1/nodes/kn-race", {"spec": {"taints": [theirs]}})
    patch = kn.drain_patch(stale, REASON, datetime.now(UTC))
    with pytest.raises(ApiException) as caught:
        await kube._call(
            "PATCH",
            "/api/v1/nodes/kn-race",
            "cordon and taint node kn-race",
            body=patch,
            content_type="application/json-patch+json",
        )
    # A failed `test` is a 422 like any invalid patch; the adapter tells them apart by
    # reading the node again.
    assert caught.value.status == 422, caught.value
    assert _own_taints(_node(api, "kn-race")) == []
    # Through the adapter: an operator's taint lands between its read and its write (made
    # here by the patch builder on its first call); the refused write is read again and
    # retried, and the operator's taint stays.
    other = {"key": "example.com/maintenance", "value": "psu", "effect": "NoSchedule"}
    built: list[int] = []

    def racing(node: dict[str, Any]) -> list[dict[str, Any]] | None:
        if not built:
            api.merge("/api/v1/nodes/kn-race", {"spec": {"taints": [theirs, other]}})
        built.append(1)
        return kn.drain_patch(node, REASON, datetime.now(UTC))

    assert await kube.patch_node("kn-race", racing, "cordon and taint node kn-race")
    assert len(built) == 2
    after = _node(api, "kn-race")
    assert theirs in after["spec"]["taints"] and other in after["spec"]["taints"]
    assert len(_own_taints(after)) == 1 and after["spec"]["unschedulable"] is True


async def test_drain_now_evicts_gpu_pods_and_names_what_a_budget_keeps(
    api: KubeApi, kube: KubernetesScheduler
) -> None:
    api.node("kn-evict")
    api.namespace("u-bo")
    api.pod("u-bo", "train-0", "kn-evict")
    api.pod("u-bo", "serve-0", "kn-evict", labels={"app": "serve"})
    api.pod("u-bo", "sidecar-0", "kn-evict", gpus=0)
    api.create(
        "/apis/policy/v1beta1/namespaces/u-bo/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "serve"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "serve"}}},
        },
    )
    try:
        with pytest.raises(BackendError) as caught:
            await kube.drain("kn-evict", REASON, now=True)
        text = caught.value.user_text()
        assert "u-bo/serve-0 (a PodDisruptionBudget allows no disruption now)" in text
        assert "1 of its GPU pods would not go" in text and "train-0" not in text
        pods = {p: api.get(f"/api/v1/namespaces/u-bo/pods/{p}") for p in ("train-0", "serve-0")}
        assert pods["train-0"]["metadata"].get("deletionTimestamp")  # evicted (no kubelet)
        assert not pods["serve-0"]["metadata"].get("deletionTimestamp")
        sidecar = api.get("/api/v1/namespaces/u-bo/pods/sidecar-0")
        assert not sidecar["metadata"].get("deletionTimestamp")  # no GPU: left running
        assert _node(api, "kn-evict")["spec"]["unschedulable"] is True
    finally:
        for pod in ("train-0", "serve-0", "sidecar-0"):
            api.delete(f"/api/v1/namespaces/u-bo/pods/{pod}")


# ---------------------------------------------------------------- jobs


@pytest.fixture(scope="module")
def owners(api: KubeApi) -> dict[str, Any]:
    """A JobSet owning a Job owning pods on two nodes, a PyTorchJob owning its pods, a pod
    owned by a kind meowbot cannot read, and a bare pod.

    The JobSet and the PyTorchJob are named by ownerReferences only: this API server cannot
    serve custom resources (1.20's vendored reflect2 crashes under Go 1.19 when it encodes
    one), so their GET answers 404, and the chain ends at them as it does where meowbot may
    not read a kind. The Job between is a real batch/v1 Job, read to climb to its JobSet."""
    for node in ("kn-job-a", "kn-job-b", "kn-job-c"):
        api.node(node)
    api.namespace("u-ana")
    api.namespace("u-cy")
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "llm",
        "uid": "00000000-0000-0000-0000-00000000000a",
        "controller": True,
    }
    job = api.batch_job("u-ana", "llm-workers-0", [jobset])
    api.pod("u-ana", "llm-0", "kn-job-a", owner=job)
    api.pod("u-ana", "llm-1", "kn-job-b", owner=job)
    torch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert", "uid": "00000000-0000-0000-0000-00000000000b"},
    }
    api.pod("u-cy", "bert-master-0", "kn-job-c", owner=torch, gpus=4)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "uid": "00000000-0000-0000-0000-000000000001"},
    }
    api.pod("u-cy", "widget-0", "kn-job-c", owner=widget, gpus=2, running=False)
    api.pod("u-cy", "notebook", "kn-job-c", gpus=1)
    return {"job": job}


async def test_pods_and_their_owner_chains_become_jobs(
    owners: dict[str, Any], kube: KubernetesScheduler
) -> None:
    jobs = {j.job_id: j for j in await kube.jobs()}
    llm = jobs["u-ana/jobset/llm"]
    assert llm.name == "llm" and llm.user == "ana" and llm.partition == "u-ana"
    assert llm.nodes == ("kn-job-a", "kn-job-b") and llm.gpus_per_node == 8
    assert llm.state is JobState.RUNNING
    bert = jobs["u-cy/pytorchjob/bert"]
    assert bert.user == "cy" and bert.nodes == ("kn-job-c",) and bert.gpus_per_node == 4
    # An owner the API cannot give (no such kind here) is the job itself.
    assert jobs["u-cy/widget/w"].state is JobState.PENDING
    assert jobs["u-cy/pod/notebook"].gpus_per_node == 1

    mine = await kube.jobs(user="ana")
    assert [j.job_id for j in mine] == ["u-ana/jobset/llm"]
    on_c = {j.job_id for j in await kube.jobs_on("kn-job-c")}
    assert on_c == {"u-cy/pytorchjob/bert", "u-cy/widget/w", "u-cy/pod/notebook"}
    found = await kube.job("u-ana/jobset/llm")
    assert found is not None and found.nodes == llm.nodes
    assert await kube.job("u-ana/jobset/nope") is None
    assert await kube.job("12345") is None


async def test_the_user_can_come_from_a_pod_label(api: KubeApi, owners: dict[str, Any]) -> None:
    api.merge("/api/v1/namespaces/u-ana/pods/llm-0", {"metadata": {"labels": {"team": "dee"}}})
    adapter = KubernetesScheduler(
        kubeconfig=os.environ["MEOWBOT_TEST_KUBECONFIG"], user_rule=UserRule.parse("label:team")
    )
    try:
        mine = await adapter.jobs(user="dee")
        assert [(j.job_id, j.user) for j in mine] == [("u-ana/jobset/llm", "dee")]
    finally:
        await adapter.close()


# ---------------------------------------------------------------- RBAC


def _bind(api: KubeApi, role: str) -> None:
    api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{USER}")
    api.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": USER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        },
    )


@pytest.fixture
def roles(api: KubeApi) -> Iterator[None]:
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc["kind"] == "ClusterRole":
            api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{doc['metadata']['name']}")
            api.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", doc)
    yield
    api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{USER}")


async def _until(check: Any, timeout_s: float = 10) -> Any:
    """RBAC changes reach the authorizer through its cache: try until it has them."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await check()
        except BackendError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_the_smallest_role_works_and_less_is_refused_in_a_sentence(
    api: KubeApi, roles: None, owners: dict[str, Any]
) -> None:
    api.node("kn-rbac")
    adapter = KubernetesScheduler(
        kubeconfig=os.environ["MEOWBOT_TEST_KUBECONFIG_USER"], user_rule=UserRule("namespace", "u-")
    )
    try:
        with pytest.raises(BackendError) as caught:
            await adapter.nodes()
        assert caught.value.user_text().startswith("Kubernetes refused to list nodes: ")
        assert f'User "{USER}" cannot list resource "nodes"' in caught.value.user_text()
        assert "deploy/kubernetes/rbac.yaml" in caught.value.user_text()

        _bind(api, "meowbot-readonly")
        assert "kn-rbac" in await _until(adapter.nodes)
        with pytest.raises(BackendError) as caught:
            await adapter.drain("kn-rbac", REASON)
        assert caught.value.user_text().startswith(
            "Kubernetes refused to cordon and taint node kn-rbac: "
        )
        assert "cannot patch resource" in caught.value.user_text()
        assert not _node(api, "kn-rbac")["spec"].get("unschedulable")

        _bind(api, "meowbot")

        async def drain() -> None:
            await adapter.drain("kn-rbac", REASON, now=True)

        await _until(drain)
        assert _node(api, "kn-rbac")["spec"]["unschedulable"] is True
        await adapter.resume("kn-rbac")
        assert not _node(api, "kn-rbac")["spec"].get("unschedulable")
        jobs = {j.job_id for j in await adapter.jobs()}
        assert {"u-ana/jobset/llm", "u-cy/pytorchjob/bert"} <= jobs
    finally:
        await adapter.close()


async def test_the_doctor_reads_each_verb_of_the_role_and_changes_nothing(
    api: KubeApi, roles: None
) -> None:
    api.node("kn-doctor")
    adapter = KubernetesScheduler(kubeconfig=os.environ["MEOWBOT_TEST_KUBECONFIG_USER"])

    async def verdicts(patch: bool) -> dict[str, Line]:
        # RBAC reaches the authorizer through its cache: asked until it shows the binding.
        import asyncio
        import time

        deadline = time.monotonic() + 10
        while True:
            got = {line.what: line for line in await kubernetes_lines(adapter)}
            if (got["nodes"].status is Status.PASS) == patch or time.monotonic() > deadline:
                return got
            await asyncio.sleep(0.2)

    try:
        _bind(api, "meowbot-readonly")
        got = await verdicts(patch=False)
        assert got["API server"].status is Status.PASS
        assert got["nodes"].said == "may not patch: drain and resume (cordon, taint) are refused"
        assert got["pods"].said == "may list"
        assert got["pods/eviction"].status is Status.FAIL
        assert got["jobs.batch"].status is Status.FAIL
        _bind(api, "meowbot")
        got = await verdicts(patch=True)
        assert all(line.status is Status.PASS for line in got.values()), got
        assert got["nodes found"].said.endswith("match the node selector")
        assert not _node(api, "kn-doctor")["spec"].get("unschedulable")  # nothing was changed
    finally:
        await adapter.close()


# ---------------------------------------------------------------- Slurm and Kubernetes at once


async def test_a_node_in_both_is_drained_and_resumed_in_both(
    api: KubeApi, kube: KubernetesScheduler
) -> None:
    env = {v: need_service(v) for v in ("SLURM_REST_URL", "SLURM_JWT", "SLURM_USER", "SLURM_CONF")}
    slurm = SlurmRest(
        env["SLURM_REST_URL"],
        token=env["SLURM_JWT"],
        user=env["SLURM_USER"],
        slurm_conf=env["SLURM_CONF"],
        timeout_s=10,
    )
    both = BothSchedulers(slurm, kube)
    node = "gpu-0015"  # a Slurm test node, made a Kubernetes node too
    api.node(node)
    try:
        await both.drain(node, REASON)
        s = (await slurm.nodes([node]))[node]
        k = (await kube.nodes([node]))[node]
        assert s.draining and s.reason == REASON
        assert k.draining and k.reason == REASON
        shown = (await both.nodes([node]))[node]
        assert shown.draining and shown.reason == REASON and shown.reason_is_ours

        # Resumed behind meowbot's back in Slurm only: the difference is shown.
        await slurm.resume(node)
        shown = (await both.nodes([node]))[node]
        assert shown.draining and shown.reason_is_ours
        assert "differs: Slurm in service, Kubernetes drained" in (shown.reason or "")

        await both.resume(node)
        assert not (await slurm.nodes([node]))[node].out_of_service
        assert not (await kube.nodes([node]))[node].out_of_service
        # A node in Kubernetes only goes to Kubernetes alone.
        api.node("kn-only")
        await both.drain("kn-only", REASON)
        assert (await both.nodes(["kn-only"]))["kn-only"].reason == REASON
        await both.resume("kn-only")
    finally:
        with contextlib.suppress(BackendError):
            await slurm.resume(node)
        await slurm.close()


# ---------------------------------------------------------------- places from node labels


async def test_rack_and_switch_come_from_node_labels(
    api: KubeApi, kube: KubernetesScheduler
) -> None:
    from bot.backends.kubernetes_inventory import KubernetesPlaces
    from bot.backends.sim.fleet import SimFleet
    from bot.backends.sim.metrics import SimInventory

    api.node("kn-place", rack="r42", labels={"network.topology.kubernetes.io/switch": "leaf-9"})
    fleet = SimFleet(16, seed=1)
    inner = SimInventory(fleet)
    places = KubernetesPlaces(inner, kube)
    await places.load()
    found = places.place("kn-place")
    assert found is not None and (found.rack, found.leaf_switch) == ("r42", "leaf-9")
    assert places.leaf_switch("kn-place") == "leaf-9"
    sim_node = inner.names()[0]
    assert places.place(sim_node) == inner.place(sim_node)  # no labels: the inventory's own
    assert places.names() == inner.names()
    calls = kube.calls
    await places.load()  # within the minute: no call
    assert kube.calls == calls


async def test_the_doctor_says_which_selected_nodes_tell_their_gpus(api: KubeApi) -> None:
    """GPU Feature Discovery's labels, as the API server holds them: a node that says no GPUs
    is named (test-and-resume could not ask for its GPUs), the rest summed by kind."""
    pool = {"meowbot.io/pool": "doctor-gpus"}
    api.node("kn-doctor-gpu", labels=pool)
    api.node("kn-doctor-h200", gpus=4, product="NVIDIA-H200", labels=pool)
    api.node("kn-doctor-cpu", gpus=0, labels=pool)
    adapter = KubernetesScheduler(
        kubeconfig=os.environ["MEOWBOT_TEST_KUBECONFIG"],
        node_selector="meowbot.io/pool=doctor-gpus",
    )
    try:
        got = {line.what: line for line in await kubernetes_lines(adapter)}
    finally:
        await adapter.close()
    assert got["nodes found"].said == "3 match the node selector (meowbot.io/pool=doctor-gpus)"
    line = got["GPU labels"]
    assert line.status is Status.WARN and line.fix
    assert line.said == (
        "1 of 3 say no GPUs (nvidia.com/gpu.count label or nvidia.com/gpu capacity): "
        "kn-doctor-cpu; test-and-resume cannot ask for their GPUs. The rest: "
        "1 with 8 x NVIDIA-H100-80GB-HBM3; 1 with 4 x NVIDIA-H200"
    )
