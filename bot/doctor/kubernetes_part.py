"""The doctor's Kubernetes lines: for each verb meowbot's ClusterRole grants, whether these
credentials have it (a SelfSubjectAccessReview each: nothing is changed to find out), and the
nodes the node selector finds."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bot.backends import kubernetes_nodes as kn
from bot.backends.kubernetes import KubernetesScheduler
from bot.doctor.report import Line, Status
from bot.errors import BackendError

PART = "Kubernetes"

NEEDED: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("", "nodes", ("get", "list", "patch"), "drain and resume (cordon, taint) are refused"),
    ("", "pods", ("list",), "no job is found on a node"),
    ("", "pods/eviction", ("create",), "a drain cannot evict its pods"),
    ("batch", "jobs", ("get", "list"), "no batch Job owns a pod"),
    ("jobset.x-k8s.io", "jobsets", ("get", "list"), "JobSets are not named"),
    ("kubeflow.org", "pytorchjobs", ("get", "list"), "PyTorchJobs are not named"),
    ("kubeflow.org", "mpijobs", ("get", "list"), "MPIJobs are not named"),
    ("kubeflow.org", "tfjobs", ("get", "list"), "TFJobs are not named"),
    ("apps", "replicasets", ("get", "list"), "Deployments' pods are not named"),
    ("apps", "statefulsets", ("get", "list"), "StatefulSets are not named"),
    ("apps", "deployments", ("get", "list"), "Deployments are not named"),
)
"""deploy/kubernetes/rbac.yaml's `meowbot` ClusterRole, a verb a line, with what is lost
without it (tests/unit/test_doctor.py holds the two equal)."""

FIX = "bind the meowbot ClusterRole of deploy/kubernetes/rbac.yaml to this account"


async def kubernetes_lines(kube: KubernetesScheduler | None) -> list[Line]:
    if kube is None:
        return [
            Line(PART, "API server", Status.OFF, "KUBECONFIG / MEOWBOT_KUBERNETES_IN_CLUSTER unset")
        ]
    lines: list[Line] = []
    try:
        # Every review at once: they are independent reads, 24 round trips one by one.
        allowed = await asyncio.gather(
            *(kube.may(group, resource, v) for group, resource, verbs, _ in NEEDED for v in verbs)
        )
        answers = iter(allowed)
        for group, resource, verbs, without in NEEDED:
            refused = [v for v in verbs if not next(answers)]
            what = f"{resource}" + (f".{group}" if group else "")
            if refused:
                lines.append(
                    Line(PART, what, Status.FAIL, f"may not {', '.join(refused)}: {without}", FIX)
                )
            else:
                lines.append(Line(PART, what, Status.PASS, f"may {', '.join(verbs)}"))
        try:
            nodes = await kube.raw_nodes()
        except BackendError as exc:
            lines.append(Line(PART, "nodes found", Status.FAIL, exc.user_text(), FIX))
        else:
            status = Status.PASS if nodes else Status.WARN
            said = f"{len(nodes)} match the node selector" + (
                f" ({kube.node_selector})" if kube.node_selector else ""
            )
            lines.append(Line(PART, "nodes found", status, said, "check kubernetes.node_selector"))
            if nodes:
                lines.append(gpu_labels_line(nodes))
    except BackendError as exc:
        return [Line(PART, "API server", Status.FAIL, exc.user_text(), "check KUBECONFIG")]
    return [Line(PART, "API server", Status.PASS, "answers"), *lines]


def gpu_labels_line(nodes: Sequence[Mapping[str, Any]]) -> Line:
    """What the nodes say of their GPUs: GPU Feature Discovery's count and product labels, or
    the device plugin's `nvidia.com/gpu` capacity. Test-and-resume's validation Job asks for
    a node's GPUs by that count; a node that says none cannot be tested."""
    kinds: Counter[str] = Counter()
    bare: list[str] = []
    for node in nodes:
        count = kn.gpu_count(node)
        if count == 0:
            bare.append(str((node.get("metadata") or {}).get("name") or "?"))
            continue
        product = kn.label(node, (kn.PRODUCT_LABEL,)) or f"no {kn.PRODUCT_LABEL} label"
        kinds[f"{count} x {product}"] += 1
    seen = "; ".join(f"{n} with {kind}" for kind, n in kinds.most_common(3))
    if len(kinds) > 3:
        seen += f"; {len(kinds) - 3} more kinds"
    if not bare:
        return Line(PART, "GPU labels", Status.PASS, seen)
    some = ", ".join(sorted(bare)[:3]) + (" ..." if len(bare) > 3 else "")
    said = (
        f"{len(bare)} of {len(nodes)} say no GPUs ({kn.COUNT_LABEL} label or "
        f"{kn.GPU_RESOURCE} capacity): {some}; test-and-resume cannot ask for their GPUs"
    )
    if seen:
        said += f". The rest: {seen}"
    fix = (
        "run GPU Feature Discovery and the NVIDIA device plugin on them, or narrow "
        "kubernetes.node_selector (e.g. nvidia.com/gpu.present=true) to the GPU nodes"
    )
    return Line(PART, "GPU labels", Status.WARN, said, fix)
