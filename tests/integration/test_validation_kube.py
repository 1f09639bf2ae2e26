"""A drained node's validation on the real test kube-apiserver: the validating taint, the Job
pinned to the node with its tolerations and all its GPUs, and the node put back (meowbot's
taints and cordon gone) on a pass or left drained with the result in its annotation. No
kubelet or Job controller runs here: tests/kube_kubelet.py plays them, running the Job's own
script with stand-ins for `dcgmi` and `all_reduce_perf` that print recorded outputs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.backends import kubernetes_nodes as kn
from bot.backends import kubernetes_validation_spec as spec
from bot.backends.both_schedulers import BothSchedulers
from bot.backends.both_validation import BothTester
from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.kubernetes_validation import KubeTester
from bot.backends.slurm_validation import SlurmTester
from bot.ports import Scheduler
from bot.validation.config import KubernetesValidation, ValidationConfig
from bot.validation.ports import NodeTester
from bot.validation.run import StepState
from bot.validation.service import Validation, validate
from tests import slurm_cluster
from tests.conftest import need_service
from tests.integration.test_validation_slurm import STEPS, _prints, _tool
from tests.kube_api import KubeApi, KubeError, wait_ready
from tests.kube_kubelet import run_job

NS = "meowbot"
REASON = "meowbot: xid79 gpu3 by @ana"
RBAC = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "rbac.yaml"
USER = "meowbot-test"


@pytest.fixture(scope="module")
def api() -> KubeApi:
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    api = KubeApi.from_env()
    with contextlib.suppress(KubeError):
        api.namespace(NS)
    return api


@pytest.fixture
def rbac(api: KubeApi) -> Iterator[str]:
    """deploy/kubernetes/rbac.yaml applied and bound to the test user: its kubeconfig. The
    bindings go after the test: the RBAC tests of test_kubernetes.py start from none."""
    for doc in yaml.safe_load_all(RBAC.read_text()):
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "ClusterRole":
            api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
            api.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", doc)
        elif kind == "Role":
            ns = doc["metadata"]["namespace"]
            api.delete(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}")
            api.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", doc)
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]
    bindings = []
    for kind, base in (
        ("ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
        ("Role", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings"),
    ):
        name = "meowbot" if kind == "ClusterRole" else "meowbot-validation"
        bindings.append(f"{base}/{USER}-{name}")
        api.delete(f"{base}/{USER}-{name}")
        api.create(
            base,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": f"{kind}Binding",
                "metadata": {"name": f"{USER}-{name}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": subject,
            },
        )
    yield os.environ["MEOWBOT_TEST_KUBECONFIG_USER"]
    for path in bindings:
        api.delete(path)


@pytest.fixture
async def kube(rbac: str) -> AsyncIterator[KubernetesScheduler]:
    adapter = KubernetesScheduler(kubeconfig=rbac)
    yield adapter
    await adapter.close()


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return bin_dir


def _node(api: KubeApi, name: str) -> dict[str, Any]:
    got: dict[str, Any] = api.get(f"/api/v1/nodes/{name}")
    return got


def _fresh(api: KubeApi, name: str) -> None:
    """A node of this test alone: made anew, Ready, with 4 GPUs."""
    api.delete(f"/api/v1/nodes/{name}")
    api.node(name, gpus=4, product="NVIDIA-H200")


async def _validate(
    tester: NodeTester,
    scheduler: Scheduler,
    node: str,
    run_id: str,
    *,
    cancel_after_s: float | None = None,
) -> Validation:
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def nobody() -> str | None:
        if cancel_after_s is not None and loop.time() - started > cancel_after_s:
            return "ana"
        return None

    async def progress(_: Validation) -> None:
        return None

    return await validate(
        tester,
        scheduler,
        node,
        ValidationConfig(steps=STEPS),
        run_id=run_id,
        progress=progress,
        cancelled=nobody,
        poll_s=0.3,
    )


def _tester(kube: KubernetesScheduler, tmp: Path, tools: Path) -> KubeTester:
    out = tmp / "out"
    out.mkdir()
    cfg = KubernetesValidation(image="site/validate:1", namespace=NS)
    return KubeTester(kube, str(out), cfg, extra_path=str(tools))


async def test_a_passing_node_runs_its_job_pinned_there_and_comes_back(
    api: KubeApi, kube: KubernetesScheduler, tools: Path, tmp_path: Path
) -> None:
    node, run_id = "kv-pass", "kv-pass-1"
    _fresh(api, node)
    await kube.drain(node, REASON)
    _prints(tools, "dcgm_r2_v3_pass.json", "nccl_all_reduce_h200_8gpu.txt")
    tester = _tester(kube, tmp_path, tools)
    kubelet = asyncio.create_task(run_job(api, NS, spec.job_name(run_id)))
    run = await _validate(tester, kube, node, run_id)
    assert await kubelet == 0
    assert run.error is None and run.passed, (run.error, [o.line for o in run.steps])
    assert [o.state for o in run.steps] == [StepState.PASSED, StepState.PASSED]
    # The Job as meowbot made it: pinned, tolerating the drain, the cordon and the test's
    # taint, and asking for all four GPUs.
    job = api.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{spec.job_name(run_id)}")
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 0
    assert {t["key"] for t in pod["tolerations"]} == {
        kn.KEY,
        spec.VALIDATING,
        "node.kubernetes.io/unschedulable",
    }
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    # Read back: in service, none of meowbot's taints, annotations or cordon left.
    assert run.after is not None and not run.after.out_of_service, run.after
    raw = _node(api, node)
    assert not raw["spec"].get("unschedulable")
    assert not [t for t in raw["spec"].get("taints") or [] if t["key"].startswith("meowbot.io/")]
    assert not [k for k in raw["metadata"].get("annotations") or {} if k.startswith("meowbot.io/")]


async def test_a_failed_diagnostic_stays_drained_with_its_result_on_the_node(
    api: KubeApi, kube: KubernetesScheduler, tools: Path, tmp_path: Path
) -> None:
    node, run_id = "kv-fail", "kv-fail-1"
    _fresh(api, node)
    await kube.drain(node, REASON)
    _prints(tools, "dcgm_r2_v3_fail.json", "nccl_all_reduce_h200_8gpu.txt")
    kubelet = asyncio.create_task(run_job(api, NS, spec.job_name(run_id)))
    run = await _validate(_tester(kube, tmp_path, tools), kube, node, run_id)
    assert await kubelet == 0
    assert not run.passed and run.error is None
    assert run.steps[0].state is StepState.FAILED
    assert run.after is not None and run.after.draining
    assert run.after.reason is not None
    assert run.after.reason.startswith("meowbot: failed validation dcgm:")
    raw = _node(api, node)
    assert raw["spec"]["unschedulable"] is True
    keys = [t["key"] for t in raw["spec"]["taints"]]
    assert kn.KEY in keys and spec.VALIDATING not in keys
    note = json.loads(raw["metadata"]["annotations"][spec.RESULT])
    assert note["run"] == run_id and note["passed"] is False
    assert note["reason"] == run.after.reason


async def test_cancel_deletes_the_job_stops_its_script_and_the_node_stays_drained(
    api: KubeApi, kube: KubernetesScheduler, tools: Path, tmp_path: Path
) -> None:
    node, run_id = "kv-cancel", "kv-cancel-1"
    _fresh(api, node)
    await kube.drain(node, REASON)
    _prints(tools, "dcgm_r2_v3_pass.json", "nccl_all_reduce_h200_8gpu.txt")
    _tool(tools, "dcgmi", "sleep 30")
    kubelet = asyncio.create_task(run_job(api, NS, spec.job_name(run_id)))
    run = await _validate(_tester(kube, tmp_path, tools), kube, node, run_id, cancel_after_s=1.5)
    assert await kubelet is None  # the kubelet saw its Job go and stopped the script
    assert run.cancelled_by == "ana" and not run.passed
    assert run.after is not None and run.after.draining
    assert run.after.reason == "meowbot: validation cancelled by @ana"
    keys = [t["key"] for t in _node(api, node)["spec"]["taints"]]
    assert spec.VALIDATING not in keys


async def test_a_node_in_both_is_tested_once_by_slurm_and_comes_back_in_both(
    api: KubeApi, kube: KubernetesScheduler, tools: Path, tmp_path: Path
) -> None:
    env = slurm_cluster.slurm_env()
    slurm = slurm_cluster.slurm_rest(env)
    node, run_id = "gpu-0016", "gpu-0016-1"
    _fresh(api, node)
    both = BothSchedulers(slurm, kube)
    out = tmp_path / "out"
    out.mkdir()
    tester = BothTester(
        SlurmTester(slurm, str(out), extra_path=str(tools)),
        KubeTester(kube, str(out), None),
    )
    try:
        await both.drain(node, REASON)
        _prints(tools, "dcgm_r2_v3_pass.json", "nccl_all_reduce_h200_8gpu.txt")
        run = await _validate(tester, both, node, run_id)
        assert run.error is None and run.passed, (run.error, [o.line for o in run.steps])
        assert run.job_id is not None and run.job_id.isdigit()  # a Slurm job, not a Job
        jobs = api.get(f"/apis/batch/v1/namespaces/{NS}/jobs")["items"]
        assert spec.job_name(run_id) not in {j["metadata"]["name"] for j in jobs}
        assert run.after is not None and not run.after.out_of_service, run.after
        assert not (await slurm.nodes([node]))[node].out_of_service
        raw = _node(api, node)
        assert not raw["spec"].get("unschedulable")
        assert not [t for t in raw["spec"].get("taints") or [] if t["key"].startswith("meowbot")]
    finally:
        slurm_cluster.cli(env, "scontrol", "update", f"nodename={node}", "state=resume")
        await slurm.close()
