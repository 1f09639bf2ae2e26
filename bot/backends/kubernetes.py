"""The Kubernetes scheduler adapter: GPU nodes, their pods as jobs, drain and resume.

Client: `kubernetes_asyncio`, not the official sync `kubernetes` client. Its calls are
coroutines on aiohttp, the HTTP library the rest of the bot already runs on the event loop, so
a /node-health does not hold a worker thread per call (`asyncio.to_thread` around the sync
client would share the default pool with everything else that uses it, and a slow API server
would fill it). It loads kubeconfigs (token, client certificate, exec plugins) and the
in-cluster service account as the official client does. Answers are read as plain JSON
(`response_types_map` `object`), not as the generated model classes: 4,096 Nodes become dicts
in a fraction of the time, and the pure modules beside this one read them
(bot/backends/kubernetes_nodes.py, bot/backends/kubernetes_jobs.py).

API calls per answer do not grow with the node count: every list is one request per page of
`page_size` objects (5,000 by default, so one page up to 5,000 nodes; `limit`/`continue`
beyond it keeps each answer bounded in memory on the API server), Nodes are narrowed by a
label selector where one is configured (`kubernetes.node_selector`, e.g.
`nvidia.com/gpu.present=true`), pods by the field selector `spec.nodeName` for one node and
by namespace or label for one user's jobs. A watch-fed cache would answer with no call at
all, but it holds every Node in every replica's memory and needs `watch` in the ClusterRole;
a list per answer stays correct after a replica restarts and costs one call. `calls` counts
the requests made (bench/kube.py prints it per answer).

Drain after jobs: cordon plus meowbot's own `meowbot.io/drain:NoSchedule` taint and the
`meowbot.io/drain` annotation (reason, who, when, whether meowbot cordoned), in one JSON patch
guarded by the resourceVersion read (kubernetes_nodes.drain_patch). Drain now: also evicts the
node's GPU pods through the Eviction API (policy/v1beta1, what 1.20 serves; newer servers take
it too), so PodDisruptionBudgets are honoured; a pod a budget keeps (429) is named in the
answer. Resume takes back only meowbot's taint and annotation, and the cordon only where
meowbot cordoned; a confirmed "Resume anyway" also uncordons an operator's cordon (their
taints stay, and the answer read back says so). A refusal (401, 403) is a sentence naming
the call and the ClusterRole in deploy/kubernetes/rbac.yaml, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from bot import drain_reason
from bot.backends import kubernetes_nodes as kn
from bot.backends.kubernetes_jobs import (
    Owner,
    UserRule,
    controller_of,
    gpus_requested,
    is_live,
    jobs_of,
    parse_job_id,
    pod_owner,
    top_owner,
)
from bot.errors import BackendError
from bot.models import Job
from bot.ports import SchedulerNode

log = logging.getLogger(__name__)

NAME = "Kubernetes"
NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
RBAC_FILE = "deploy/kubernetes/rbac.yaml"
PAGE_SIZE = 5000
CONFLICT_RETRIES = 3
# Up to this many owners of one kind are read one by one; more are read with one list.
OWNER_GETS = 4
# What a plural is for the owner kinds a GPU cluster has; any other kind is guessed the way
# Kubernetes names them (lower case, plus "s").
_PLURALS = {
    "Job": "jobs",
    "JobSet": "jobsets",
    "PyTorchJob": "pytorchjobs",
    "MPIJob": "mpijobs",
    "TFJob": "tfjobs",
    "XGBoostJob": "xgboostjobs",
    "PaddleJob": "paddlejobs",
    "TrainJob": "trainjobs",
    "RayJob": "rayjobs",
    "RayCluster": "rayclusters",
    "LeaderWorkerSet": "leaderworkersets",
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
    "Deployment": "deployments",
    "DaemonSet": "daemonsets",
}


def check_node_name(name: str) -> str:
    if not isinstance(name, str) or not NODE_NAME_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a Kubernetes node name (RFC 1123 subdomain).")
    return name


def _message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    text = body.get("message") if isinstance(body, Mapping) else None
    return str(text or exc.reason or f"HTTP {exc.status}")[:300]


class KubernetesScheduler:
    """The `Scheduler` port over the Kubernetes API (a kubeconfig or the pod's service
    account)."""

    name = NAME

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        in_cluster: bool = False,
        user_rule: UserRule | None = None,
        node_selector: str = "",
        page_size: int = PAGE_SIZE,
        timeout_s: float = 10.0,
    ) -> None:
        if not kubeconfig and not in_cluster:
            raise ValueError("Kubernetes needs a kubeconfig (KUBECONFIG) or in-cluster config.")
        self._kubeconfig = kubeconfig
        self._context = context
        self._in_cluster = in_cluster
        self.user_rule = user_rule or UserRule()
        self.node_selector = node_selector
        self.page_size = max(1, page_size)
        self.timeout_s = timeout_s
        self._api: k8s.ApiClient | None = None
        self._api_lock = asyncio.Lock()
        self.calls = 0
        """Requests made to the API server (bench/kube.py reads it per answer)."""

    # -- plumbing

    async def _client(self) -> k8s.ApiClient:
        async with self._api_lock:
            if self._api is None:
                conf = k8s.Configuration()
                try:
                    if self._in_cluster:
                        k8s_config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
                    else:
                        await k8s_config.load_kube_config(
                            config_file=self._kubeconfig,
                            context=self._context,
                            client_configuration=conf,
                            persist_config=False,
                        )
                except (k8s_config.ConfigException, OSError, ValueError) as exc:
                    where = "in-cluster service account" if self._in_cluster else "KUBECONFIG"
                    raise BackendError(
                        NAME, f"cannot be configured from the {where}: {exc}."
                    ) from exc
                self._api = k8s.ApiClient(conf)
            return self._api

    async def _call(
        self,
        method: str,
        path: str,
        doing: str,
        *,
        query: Sequence[tuple[str, str | int]] = (),
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        """One request; its JSON answer. `doing` names the call in a refusal's sentence."""
        api = await self._client()
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        self.calls += 1
        try:
            return await api.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                response_types_map={200: "object", 201: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _request_timeout=self.timeout_s,
            )
        except ApiException as exc:
            if exc.status == 403:
                raise BackendError(
                    NAME,
                    f"refused to {doing}: {_message(exc)}. meowbot's ClusterRole "
                    f"({RBAC_FILE}) grants what it needs.",
                ) from exc
            if exc.status == 401:
                raise BackendError(
                    NAME,
                    "refused the credentials (HTTP 401): check the token or certificate "
                    "in KUBECONFIG, or the service account's token.",
                ) from exc
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            host = api.configuration.host
            raise BackendError(
                NAME,
                f"cannot be reached at {host} to {doing} ({type(exc).__name__}).",
                retryable=True,
            ) from exc

    async def _list(
        self, path: str, doing: str, *, label: str = "", field: str = ""
    ) -> list[dict[str, Any]]:
        """Every item of a list, a page of `page_size` at a time (`limit` and `continue`)."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query: list[tuple[str, str | int]] = [("limit", self.page_size)]
            if label:
                query.append(("labelSelector", label))
            if field:
                query.append(("fieldSelector", field))
            if token:
                query.append(("continue", token))
            try:
                page = await self._call("GET", path, doing, query=query)
            except ApiException as exc:
                raise BackendError(NAME, f"could not {doing}: {_message(exc)}.") from exc
            items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return items

    async def get_object(self, path: str, doing: str) -> dict[str, Any] | None:
        """The object, None when it does not exist."""
        try:
            got = await self._call("GET", path, doing)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise BackendError(NAME, f"could not {doing}: {_message(exc)}.") from exc
        return got if isinstance(got, dict) else None

    async def create_object(self, path: str, body: Mapping[str, Any], doing: str) -> dict[str, Any]:
        try:
            got = await self._call("POST", path, doing, body=dict(body))
        except ApiException as exc:
            raise BackendError(NAME, f"could not {doing}: {_message(exc)}.") from exc
        return got if isinstance(got, dict) else {}

    async def delete_object(self, path: str, doing: str) -> bool:
        """Deletes it, its dependents left to the garbage collector (a Job's pods); False
        when it was gone already."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            await self._call("DELETE", path, doing, body=body)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise BackendError(NAME, f"could not {doing}: {_message(exc)}.") from exc
        return True

    # -- nodes

    async def raw_nodes(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The Node objects: one GET for one name, else the (selected) list."""
        if names is not None and len(names) == 1:
            name = check_node_name(names[0])
            one = await self.get_object(f"/api/v1/nodes/{quote(name)}", f"read node {name}")
            return [one] if one is not None else []
        wanted = {check_node_name(n) for n in names} if names is not None else None
        found = await self._list("/api/v1/nodes", "list nodes", label=self.node_selector)
        if wanted is None:
            return found
        return [n for n in found if (n.get("metadata") or {}).get("name") in wanted]

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SchedulerNode]:
        if names is not None and not names:
            return {}
        out: dict[str, SchedulerNode] = {}
        for raw in await self.raw_nodes(names):
            node = kn.parse_node(raw)
            if node.name:
                out[node.name] = node
        return out

    async def patch_node(
        self,
        name: str,
        build: Callable[[dict[str, Any]], list[dict[str, Any]] | None],
        doing: str,
    ) -> bool:
        """Reads the node and applies `build(node)`'s JSON patch, again when another writer
        changed the node between the read and the write; whether anything changed."""
        refused: str | None = None
        refused_rv: object = None
        for _ in range(CONFLICT_RETRIES):
            node = await self.get_object(f"/api/v1/nodes/{quote(name)}", f"read node {name}")
            if node is None:
                raise BackendError(NAME, f"has no node {name}.")
            rv = (node.get("metadata") or {}).get("resourceVersion")
            if refused is not None and rv == refused_rv:
                # Refused, and nobody wrote in between: the patch itself was wrong.
                raise BackendError(NAME, f"could not {doing}: {refused}.")
            patch = build(node)
            if patch is None:
                return False
            try:
                await self._call(
                    "PATCH",
                    f"/api/v1/nodes/{quote(name)}",
                    doing,
                    body=patch,
                    content_type="application/json-patch+json",
                )
            except ApiException as exc:
                # A failed `test` of the resourceVersion is a 422 ("the server rejected our
                # request"), like any invalid patch: the read above tells them apart.
                if exc.status in {409, 422}:
                    refused, refused_rv = _message(exc), rv
                    continue
                raise BackendError(NAME, f"could not {doing}: {_message(exc)}.") from exc
            return True
        raise BackendError(NAME, f"could not {doing}: the node kept changing under the write.")

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        name = check_node_name(node)
        why = drain_reason.check(reason)
        at = datetime.now(UTC)
        await self.patch_node(
            name, lambda raw: kn.drain_patch(raw, why, at), f"cordon and taint node {name}"
        )
        if now:
            refused = await self.evict_gpu_pods(name)
            if refused:
                more = f" and {len(refused) - 5} more" if len(refused) > 5 else ""
                listed = ", ".join(refused[:5]) + more
                raise BackendError(
                    NAME,
                    f"cordoned and tainted {name}, but {len(refused)} of its GPU pods would "
                    f"not go: {listed}. They stay until their budget allows it.",
                )

    async def resume(self, node: str, *, force: bool = False) -> None:
        name = check_node_name(node)
        await self.patch_node(
            name,
            lambda raw: kn.resume_patch(raw, force=force),
            f"uncordon and untaint node {name}",
        )

    # -- pods and evictions

    async def pods_on(self, node: str) -> list[dict[str, Any]]:
        name = check_node_name(node)
        return await self._list(
            "/api/v1/pods", f"list the pods on node {name}", field=f"spec.nodeName={name}"
        )

    async def evict_gpu_pods(self, node: str) -> list[str]:
        """Evicts the node's live GPU pods (a DaemonSet's pods stay: they would come back);
        the pods that would not go, each with why."""
        pods = [
            p
            for p in await self.pods_on(node)
            if is_live(p)
            and gpus_requested(p) > 0
            and getattr(controller_of(p), "kind", None) != "DaemonSet"
        ]

        async def evict(pod: dict[str, Any]) -> str | None:
            meta = pod["metadata"]
            ns, pod_name = str(meta["namespace"]), str(meta["name"])
            body = {
                "apiVersion": "policy/v1beta1",
                "kind": "Eviction",
                "metadata": {"name": pod_name, "namespace": ns},
            }
            try:
                await self._call(
                    "POST",
                    f"/api/v1/namespaces/{quote(ns)}/pods/{quote(pod_name)}/eviction",
                    f"evict pod {ns}/{pod_name}",
                    body=body,
                )
            except ApiException as exc:
                if exc.status == 404:
                    return None  # gone already
                if exc.status == 429:
                    return f"{ns}/{pod_name} (a PodDisruptionBudget allows no disruption now)"
                return f"{ns}/{pod_name} ({_message(exc)})"
            return None

        answers = await asyncio.gather(*(evict(p) for p in pods))
        return [a for a in answers if a is not None]

    # -- jobs

    @staticmethod
    def _kind_path(api_version: str, kind: str, namespace: str | None) -> str:
        group, _, version = api_version.rpartition("/")
        plural = _PLURALS.get(kind, kind.lower() + "s")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        return f"{base}/namespaces/{quote(namespace)}/{plural}" if namespace else f"{base}/{plural}"

    async def _owners_of_kind(
        self, api_version: str, kind: str, wanted: set[Owner]
    ) -> dict[Owner, dict[str, Any]]:
        """The owner objects of one kind: a GET each for a few, else one list (of their
        namespace when they share one), so the reads grow with the kinds, not the jobs."""
        found: dict[Owner, dict[str, Any]] = {}
        try:
            if len(wanted) <= OWNER_GETS:
                got = await asyncio.gather(
                    *(
                        self.get_object(
                            f"{self._kind_path(api_version, kind, o.namespace)}/{quote(o.name)}",
                            f"read {kind} {o.namespace}/{o.name}",
                        )
                        for o in wanted
                    )
                )
                return {o: obj for o, obj in zip(wanted, got, strict=True) if obj is not None}
            spaces = {o.namespace for o in wanted}
            one = next(iter(spaces)) if len(spaces) == 1 else None
            for obj in await self._list(
                self._kind_path(api_version, kind, one), f"list {kind} objects"
            ):
                meta = obj.get("metadata") or {}
                key = Owner(
                    str(meta.get("namespace") or ""), api_version, kind, str(meta.get("name"))
                )
                if key in wanted:
                    found[key] = obj
        except (BackendError, ApiException):
            # A kind meowbot may not read (a CRD outside its ClusterRole, or one this cluster
            # does not serve) ends the chain where the pods said: the job is still named, one
            # level lower.
            return found
        return found

    async def _tops(self, pods: Sequence[Mapping[str, Any]]) -> dict[Owner, Owner]:
        """Each pod's first owner -> the top of its chain, climbing a level at a time; each
        level reads each kind once (`_owners_of_kind`)."""
        firsts = {pod_owner(p) for p in pods if is_live(p)}
        parents: dict[Owner, Owner | None] = {}
        level = {o for o in firsts if o.kind != "Pod"}
        while level:
            kinds: dict[tuple[str, str], set[Owner]] = {}
            for owner in level:
                kinds.setdefault((owner.api_version, owner.kind), set()).add(owner)
            got: dict[Owner, dict[str, Any]] = {}
            for part in await asyncio.gather(
                *(self._owners_of_kind(v, k, w) for (v, k), w in kinds.items())
            ):
                got.update(part)
            nxt: set[Owner] = set()
            for owner in level:
                obj = got.get(owner)
                up = controller_of(obj) if obj is not None else None
                parents[owner] = up
                if up is not None and up not in parents:
                    nxt.add(up)
            level = nxt
        return {f: top_owner(f, lambda o: parents.get(o)) for f in firsts}

    async def _jobs_from(self, pods: list[dict[str, Any]]) -> list[Job]:
        live = [p for p in pods if is_live(p)]
        return jobs_of(live, await self._tops(live), self.user_rule)

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        field = "status.phase!=Succeeded,status.phase!=Failed"
        if user is None:
            pods = await self._list("/api/v1/pods", "list pods", field=field)
        elif (ns := self.user_rule.namespace_of(user)) is not None:
            pods = await self._list(
                f"/api/v1/namespaces/{quote(ns)}/pods", f"list the pods of {ns}", field=field
            )
        else:
            pods = await self._list(
                "/api/v1/pods",
                "list pods",
                field=field,
                label=self.user_rule.selector_for(user) or "",
            )
        found = await self._jobs_from(pods)
        return [j for j in found if user is None or j.user == user]

    async def jobs_on(self, node: str) -> list[Job]:
        return await self._jobs_from(await self.pods_on(node))

    async def job(self, job_id: str) -> Job | None:
        parsed = parse_job_id(job_id)
        if parsed is None:
            return None
        ns = parsed[0]
        pods = await self._list(
            f"/api/v1/namespaces/{quote(ns)}/pods",
            f"list the pods of {ns}",
            field="status.phase!=Succeeded,status.phase!=Failed",
        )
        return next((j for j in await self._jobs_from(pods) if j.job_id == job_id), None)

    async def last_finished(self, user: str) -> Job | None:
        # Finished pods linger only until the garbage collector takes them, and their end
        # is a container's, not the job's: "your last job" is not read from Kubernetes.
        return None

    async def previous_run(self, job: Job) -> Job | None:
        # A rerun on Kubernetes is a new object under a new name: nothing links the two.
        return None

    async def may(self, group: str, resource: str, verb: str) -> bool:
        """Whether these credentials may `verb` the `resource` (cluster-wide; "pods/eviction"
        names a subresource): a SelfSubjectAccessReview, which changes nothing."""
        name, _, sub = resource.partition("/")
        attributes = {"group": group, "resource": name, "verb": verb}
        if sub:
            attributes["subresource"] = sub
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        answer = await self._call(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            f"review whether it may {verb} {resource}",
            body=review,
        )
        return bool(((answer or {}).get("status") or {}).get("allowed"))

    async def close(self) -> None:
        if self._api is not None:
            await self._api.close()
            self._api = None
