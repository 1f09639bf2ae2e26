"""A plain admin client of the test kube-apiserver (scripts/testsvc/kube.py), for setting up
what the tests and bench/kube.py read: nodes with GPU labels, pods bound to them, owners.

Synchronous and standard library: set-up is a few dozen calls, and keeping it apart from the
adapter under test means the adapter never sets up what it then reads.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

READY_WAIT_S = 600.0  # a cold build of kube-apiserver takes about 3.5 minutes on two cores


class KubeError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


def wait_ready(status_file: str, timeout_s: float = READY_WAIT_S) -> None:
    """Waits for the background start of testsvc/kube.py (its build when not cached)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = Path(status_file).read_text().strip()
        if text == "ready":
            return
        if text.startswith("failed"):
            raise RuntimeError(f"the test kube-apiserver did not start: {text}")
        time.sleep(0.5)
    raise RuntimeError(f"the test kube-apiserver was not ready within {timeout_s:.0f} s")


class KubeApi:
    def __init__(self, url: str, ca: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca)

    @classmethod
    def from_env(cls) -> KubeApi:
        return cls(
            os.environ["MEOWBOT_TEST_KUBE_URL"],
            os.environ["MEOWBOT_TEST_KUBE_CA"],
            os.environ["MEOWBOT_TEST_KUBE_TOKEN"],
        )

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type},
        )
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ctx) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise KubeError(exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def create(self, path: str, body: Any) -> Any:
        """POST, or the existing object when it is there already (a re-run of a module)."""
        try:
            return self.call("POST", path, body)
        except KubeError as exc:
            if exc.status != 409:
                raise
            name = body["metadata"]["name"]
            return self.get(f"{path}/{name}")

    def merge(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body, "application/merge-patch+json")

    def delete(self, path: str) -> None:
        try:
            self.call("DELETE", path, {"gracePeriodSeconds": 0})
        except KubeError as exc:
            if exc.status != 404:
                raise

    # -- what the tests make

    def node(
        self,
        name: str,
        *,
        product: str = "NVIDIA-H100-80GB-HBM3",
        gpus: int = 8,
        rack: str = "r01",
        ready: bool = True,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        unschedulable: bool = False,
    ) -> Any:
        """A Node with GPU Feature Discovery's labels and a Ready condition (no kubelet)."""
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/gpu.count": str(gpus),
                    "topology.kubernetes.io/rack": rack,
                    **(labels or {}),
                },
            },
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
        }
        self.create("/api/v1/nodes", body)
        status = {
            "status": {
                "capacity": {"nvidia.com/gpu": str(gpus)},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        }
        return self.merge(f"/api/v1/nodes/{name}/status", status)

    def namespace(self, name: str) -> None:
        self.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )

    def pod(
        self,
        ns: str,
        name: str,
        node: str,
        *,
        gpus: int = 8,
        owner: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        running: bool = True,
    ) -> Any:
        """A pod bound to `node` (it stays Pending without a kubelet; `running` sets its
        phase through the status subresource, as a kubelet would)."""
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
        meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
        if owner is not None:
            meta["ownerReferences"] = [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ]
        self.create(
            f"/api/v1/namespaces/{ns}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "main", "image": "train:1", "resources": resources}],
                },
            },
        )
        if running:
            return self.merge(
                f"/api/v1/namespaces/{ns}/pods/{name}/status",
                {"status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}},
            )
        return self.get(f"/api/v1/namespaces/{ns}/pods/{name}")

    def batch_job(self, ns: str, name: str, owner_refs: list[dict[str, Any]] | None = None) -> Any:
        """A batch/v1 Job (no controller runs it: its pods are made with `pod(owner=...)`),
        returned with its apiVersion and kind, which the API server leaves out of a create's
        answer, so it can stand as their owner."""
        meta: dict[str, Any] = {"name": name}
        if owner_refs:
            meta["ownerReferences"] = owner_refs
        job = self.create(
            f"/apis/batch/v1/namespaces/{ns}/jobs",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": meta,
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "train:1"}],
                        }
                    }
                },
            },
        )
        job["apiVersion"], job["kind"] = "batch/v1", "Job"
        return job
