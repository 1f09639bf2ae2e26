"""The doctor's Kubernetes lines: for each verb meowbot's ClusterRole grants, whether these
credentials have it (a SelfSubjectAccessReview each: nothing is changed to find out), and the
nodes the node selector finds."""

from __future__ import annotations

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
"""deploy/kubernetes-rbac.yaml's `meowbot` ClusterRole, a verb a line, with what is lost
without it (tests/unit/test_doctor.py holds the two equal)."""

FIX = "bind the meowbot ClusterRole of deploy/kubernetes-rbac.yaml to this account"


async def kubernetes_lines(kube: KubernetesScheduler | None) -> list[Line]:
    if kube is None:
        return [
            Line(PART, "API server", Status.OFF, "KUBECONFIG / MEOWBOT_KUBERNETES_IN_CLUSTER unset")
        ]
    lines: list[Line] = []
    try:
        for group, resource, verbs, without in NEEDED:
            refused = [v for v in verbs if not await kube.may(group, resource, v)]
            what = f"{resource}" + (f".{group}" if group else "")
            if refused:
                lines.append(
                    Line(PART, what, Status.FAIL, f"may not {', '.join(refused)}: {without}", FIX)
                )
            else:
                lines.append(Line(PART, what, Status.PASS, f"may {', '.join(verbs)}"))
        try:
            nodes = await kube.nodes()
        except BackendError as exc:
            lines.append(Line(PART, "nodes found", Status.FAIL, exc.user_text(), FIX))
        else:
            status = Status.PASS if nodes else Status.WARN
            said = f"{len(nodes)} match the node selector" + (
                f" ({kube.node_selector})" if kube.node_selector else ""
            )
            lines.append(Line(PART, "nodes found", status, said, "check kubernetes.node_selector"))
    except BackendError as exc:
        return [Line(PART, "API server", Status.FAIL, exc.user_text(), "check KUBECONFIG")]
    return [Line(PART, "API server", Status.PASS, "answers"), *lines]
