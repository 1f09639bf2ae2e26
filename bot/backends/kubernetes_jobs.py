"""Kubernetes pods as meowbot's jobs: pure, no I/O.

A training job on Kubernetes is not one object: a PyTorchJob owns its pods, an MPIJob owns a
launcher Job and worker pods, a JobSet owns Jobs that own pods, a plain Job owns pods. The job
is the top of each pod's chain of controlling `ownerReferences` (whatever its kind, so a
custom resource meowbot never heard of works too); the adapter reads the owners the pods name
(each once per answer) and this module groups the pods under their top owner.

The job id is `namespace/kind/name` (`team-a/pytorchjob/llm-7b`), the partition its namespace,
and its user comes from the configured rule (`UserRule`): the namespace (less a prefix, for
sites with one namespace per person) or a pod label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.models import Job, JobState

GPU_RESOURCE = "nvidia.com/gpu"
# A pod that has ended holds no GPU and is not a job on its node any more.
ENDED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Owner:
    """One link of an owner chain: what an ownerReference names."""

    namespace: str
    api_version: str
    kind: str
    name: str

    @property
    def job_id(self) -> str:
        return f"{self.namespace}/{self.kind.lower()}/{self.name}"


@dataclass(frozen=True)
class UserRule:
    """Whose a job is: `namespace` (less `prefix`: `u-ana` is ana) or `label:<key>`."""

    source: str = "namespace"
    prefix: str = ""

    @classmethod
    def parse(cls, text: str, prefix: str = "") -> UserRule:
        text = text.strip() or "namespace"
        if text != "namespace" and not (text.startswith("label:") and len(text) > 6):
            raise ValueError(
                f"kubernetes.user_from {text!r} is neither `namespace` nor `label:<key>`."
            )
        return cls(text, prefix)

    @property
    def label(self) -> str | None:
        return self.source.removeprefix("label:") if self.source.startswith("label:") else None

    def user_of(self, pod: Mapping[str, Any]) -> str:
        meta = pod.get("metadata") or {}
        if self.label is not None:
            return str((meta.get("labels") or {}).get(self.label) or "")
        return str(meta.get("namespace") or "").removeprefix(self.prefix)

    def namespace_of(self, user: str) -> str | None:
        """The namespace to list for one user's jobs, None when the rule is a label."""
        return None if self.label is not None else self.prefix + user

    def selector_for(self, user: str) -> str | None:
        return f"{self.label}={user}" if self.label is not None else None


def controller_of(obj: Mapping[str, Any]) -> Owner | None:
    """The object's controlling owner (the first owner when none says `controller`)."""
    meta = obj.get("metadata") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
    ref = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if ref is None or not ref.get("kind") or not ref.get("name"):
        return None
    return Owner(
        namespace=str(meta.get("namespace") or ""),
        api_version=str(ref.get("apiVersion") or ""),
        kind=str(ref["kind"]),
        name=str(ref["name"]),
    )


def pod_owner(pod: Mapping[str, Any]) -> Owner:
    """The pod's first link: its controller, or the pod itself when nothing owns it."""
    meta = pod.get("metadata") or {}
    return controller_of(pod) or Owner(
        str(meta.get("namespace") or ""), "v1", "Pod", str(meta.get("name") or "")
    )


def top_owner(first: Owner, parent: Callable[[Owner], Owner | None], limit: int = 8) -> Owner:
    """The top of the chain from `first`, climbing through `parent` (what the owner read from
    the API says owns it; None at the top or where it could not be read)."""
    seen = {first}
    current = first
    for _ in range(limit):
        up = parent(current)
        if up is None or up in seen:
            break
        seen.add(up)
        current = up
    return current


def gpus_requested(pod: Mapping[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = (container or {}).get("resources") or {}
        wanted = (res.get("limits") or {}).get(GPU_RESOURCE)
        text = str(wanted or (res.get("requests") or {}).get(GPU_RESOURCE) or "")
        total += int(text) if text.isdigit() else 0
    return total


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def is_live(pod: Mapping[str, Any]) -> bool:
    """Bound to a node, not ended, not on its way out."""
    meta = pod.get("metadata") or {}
    return (
        bool((pod.get("spec") or {}).get("nodeName"))
        and (pod.get("status") or {}).get("phase") not in ENDED_PHASES
        and not meta.get("deletionTimestamp")
    )


def jobs_of(
    pods: Iterable[Mapping[str, Any]], top: Mapping[Owner, Owner], rule: UserRule
) -> list[Job]:
    """The jobs the live pods make up, each under the top of its pods' owner chain (`top`
    maps each pod's first owner to it; a first owner missing from it is its own top)."""
    groups: dict[Owner, list[Mapping[str, Any]]] = {}
    for pod in pods:
        if not is_live(pod):
            continue
        first = pod_owner(pod)
        groups.setdefault(top.get(first, first), []).append(pod)
    jobs: list[Job] = []
    for owner, members in groups.items():
        per_node: dict[str, int] = {}
        for pod in members:
            node = str(pod["spec"]["nodeName"])
            per_node[node] = per_node.get(node, 0) + gpus_requested(pod)
        running = any((p.get("status") or {}).get("phase") == "Running" for p in members)
        starts = [
            _time((p.get("status") or {}).get("startTime"))
            or _time((p.get("metadata") or {}).get("creationTimestamp"))
            for p in members
        ]
        known = [s for s in starts if s is not None]
        jobs.append(
            Job(
                job_id=owner.job_id,
                name=owner.name,
                user=next((u for p in members if (u := rule.user_of(p))), ""),
                state=JobState.RUNNING if running else JobState.PENDING,
                nodes=tuple(sorted(per_node)),
                start=min(known) if known else datetime.now(UTC),
                partition=owner.namespace,
                gpus_per_node=max(per_node.values(), default=0),
            )
        )
    return sorted(jobs, key=lambda j: j.job_id)


def parse_job_id(job_id: str) -> tuple[str, str, str] | None:
    """(namespace, kind lower case, name) of a `namespace/kind/name` id, None otherwise."""
    parts = job_id.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1].lower(), parts[2]
