"""A validation on Kubernetes, pure: the Job that runs the suite on one node, what its status
says, and the node's patches that hold it for the run and let it go. No I/O.

The node stays cordoned and tainted by meowbot's drain while it is tested, so nothing else
lands there; the Job tolerates that drain, the cordon and a `meowbot.io/validating` taint
naming the run (which says, to anyone reading the node, that a test runs), is pinned to the
node by its name (as a DaemonSet's pods are) and asks for every GPU of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.backends import kubernetes_nodes as kn
from bot.models import JobState

VALIDATING = "meowbot.io/validating"
"""The taint of a node under test (its value names the run), and the label of its Job."""
RESULT = "meowbot.io/validation"
"""The annotation a failed validation leaves on the node: which run, which step, why."""
KEEP_FINISHED_S = 86_400
"""How long a finished Job (and its pod's logs) stays for a person to read."""
_NAME_RE = re.compile(r"[^a-z0-9-]+")


def job_name(run_id: str) -> str:
    """A DNS label of at most 63 characters: `meowbot-validate-<node>-<epoch>`."""
    node, _, stamp = run_id.rpartition("-")
    text = _NAME_RE.sub("-", node.lower()).strip("-")[: 63 - len("meowbot-validate--") - len(stamp)]
    return f"meowbot-validate-{text.strip('-')}-{stamp}"


def taint_value(run_id: str) -> str:
    return job_name(run_id).removeprefix("meowbot-")


def job_manifest(
    *,
    node: str,
    run_id: str,
    script: str,
    image: str,
    gpus: int,
    mount_at: str,
    volume: Mapping[str, Any],
    path: str,
    time_limit_s: int,
) -> dict[str, Any]:
    """The Job: one pod, never retried (a second try would hide a flaky node), stopped at the
    time limit, the volume of step files mounted at `mount_at` (the script writes into a
    folder of the run's below it)."""
    resources = {"limits": {kn.GPU_RESOURCE: str(gpus)}} if gpus else {}
    tolerations = [
        {"key": key, "operator": "Exists", "effect": "NoSchedule"}
        for key in (kn.KEY, VALIDATING, "node.kubernetes.io/unschedulable")
    ]
    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    labels = {"app.kubernetes.io/name": "meowbot-validation", VALIDATING: taint_value(run_id)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(run_id), "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": time_limit_s,
            "ttlSecondsAfterFinished": KEEP_FINISHED_S,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [pin]
                            }
                        }
                    },
                    "tolerations": tolerations,
                    "containers": [
                        {
                            "name": "validate",
                            "image": image,
                            "command": ["/bin/bash", "-c", script],
                            "env": [{"name": "PATH", "value": path}],
                            "resources": resources,
                            "volumeMounts": [{"name": "output", "mountPath": mount_at}],
                        }
                    ],
                    "volumes": [{"name": "output", **volume}],
                },
            },
        },
    }


def job_state(job: Mapping[str, Any]) -> JobState:
    """The Job controller's word on it: its Complete or Failed condition, else whether a pod
    of it is active."""
    status = job.get("status") or {}
    for cond in status.get("conditions") or []:
        if not isinstance(cond, Mapping) or cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return JobState.COMPLETED
        if cond.get("type") == "Failed":
            return JobState.TIMEOUT if cond.get("reason") == "DeadlineExceeded" else JobState.FAILED
    return JobState.RUNNING if (status.get("active") or 0) > 0 else JobState.PENDING


def _test_rv(node: Mapping[str, Any]) -> dict[str, Any]:
    rv = (node.get("metadata") or {}).get("resourceVersion")
    return {"op": "test", "path": "/metadata/resourceVersion", "value": rv}


def _pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def hold_patch(node: Mapping[str, Any], run_id: str) -> list[dict[str, Any]] | None:
    """Adds the validating taint for this run (replacing an earlier run's), and clears an
    earlier failure's annotation; None when the node already carries it."""
    taint = {"key": VALIDATING, "value": taint_value(run_id), "effect": "NoSchedule"}
    if taint in kn.taints(node):
        return None
    kept = [t for t in kn.taints(node) if t.get("key") != VALIDATING]
    patch = [_test_rv(node), {"op": "add", "path": "/spec/taints", "value": [*kept, taint]}]
    if RESULT in ((node.get("metadata") or {}).get("annotations") or {}):
        patch.append({"op": "remove", "path": _pointer(RESULT)})
    return patch


def release_patch(
    node: Mapping[str, Any], result: Mapping[str, Any] | None
) -> list[dict[str, Any]] | None:
    """Takes the validating taint off; on a failure writes `result` into the node's
    annotation. None when there is nothing to change."""
    kept = [t for t in kn.taints(node) if t.get("key") != VALIDATING]
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    text = json.dumps(dict(result), separators=(",", ":")) if result is not None else None
    patch = [_test_rv(node)]
    if len(kept) != len(kn.taints(node)):
        patch.append({"op": "add", "path": "/spec/taints", "value": kept})
    if text is not None and annotations.get(RESULT) != text:
        if not annotations:
            patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        patch.append({"op": "add", "path": _pointer(RESULT), "value": text})
    return patch if len(patch) > 1 else None


def result_note(run_id: str, passed: bool, reason: str, at: datetime) -> dict[str, Any]:
    return {"run": run_id, "passed": passed, "reason": reason, "at": at.isoformat()}
