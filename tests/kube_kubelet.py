"""What the test API server lacks for a validation Job: no Job controller, scheduler or kubelet
runs there, so this plays them for one Job, as they would. It makes the Job's pod bound to the
node its affinity names, runs the pod's command here (the script meowbot wrote, with the
stand-in tools on the container's PATH, writing into the shared output folder), and writes
the pod's and the Job's status through their status subresources as it goes. A Job deleted
meanwhile (meowbot's Cancel) has its script stopped with TERM, as a kubelet would."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.kube_api import KubeApi, KubeError

POLL_S = 0.2


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def _exists(api: KubeApi, path: str) -> bool:
    try:
        await asyncio.to_thread(api.get, path)
    except KubeError as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def wait_for_job(api: KubeApi, ns: str, name: str, timeout_s: float = 60) -> dict[str, Any]:
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            job: dict[str, Any] = await asyncio.to_thread(api.get, path)
            return job
        except KubeError as exc:
            if exc.status != 404:
                raise
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"no Job {ns}/{name} within {timeout_s:.0f} s")


async def run_job(api: KubeApi, ns: str, name: str, timeout_s: float = 60) -> int | None:
    """Runs the Job to its end; the script's exit code, None when the Job was deleted."""
    job = await wait_for_job(api, ns, name, timeout_s)
    job_path = f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"
    template = job["spec"]["template"]
    terms = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    node = terms[0]["matchFields"][0]["values"][0]
    pod_name = f"{name}-run"
    pod_path = f"/api/v1/namespaces/{ns}/pods/{pod_name}"
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": ns,
            "labels": {**template["metadata"].get("labels", {}), "job-name": name},
            "ownerReferences": [owner],
        },
        "spec": {**template["spec"], "nodeName": node},
    }
    await asyncio.to_thread(api.create, f"/api/v1/namespaces/{ns}/pods", pod)
    running = {"phase": "Running", "startTime": _now()}
    await asyncio.to_thread(api.merge, f"{pod_path}/status", {"status": running})
    await asyncio.to_thread(
        api.merge, f"{job_path}/status", {"status": {"active": 1, "startTime": _now()}}
    )
    container = template["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    proc = await asyncio.create_subprocess_exec(*container["command"], env=env)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            code = await asyncio.wait_for(proc.wait(), POLL_S)
            break
        except TimeoutError:
            pass
        if not await _exists(api, job_path) or time.monotonic() > deadline:
            proc.terminate()
            await proc.wait()
            phase = {"phase": "Failed"}
            await asyncio.to_thread(api.merge, f"{pod_path}/status", {"status": phase})
            return None
    ok = code == 0
    ended = {"terminated": {"exitCode": code, "reason": "Completed" if ok else "Error"}}
    status = {
        "phase": "Succeeded" if ok else "Failed",
        "containerStatuses": [
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": ended,
            }
        ],
    }
    await asyncio.to_thread(api.merge, f"{pod_path}/status", {"status": status})
    condition = {"type": "Complete" if ok else "Failed", "status": "True"}
    condition["lastTransitionTime"] = _now()
    if not ok:
        condition["reason"] = "BackoffLimitExceeded"
    job_status = {
        "active": None,
        "succeeded" if ok else "failed": 1,
        "conditions": [condition],
        **({"completionTime": _now()} if ok else {}),
    }
    await asyncio.to_thread(api.merge, f"{job_path}/status", {"status": job_status})
    return code
