"""deploy/kubernetes/, the Kustomize base, for real: rendered by kubectl's own kustomize and
held to what docs/deploy.md says it is; every object of a kind the test kube-apiserver
(1.20.2, scripts/testsvc/kube.py) serves applied to it in a server-side dry run, broken copies
refused; the ServiceMonitor and PrometheusRule held to prometheus-operator's schemas by the
validators of the npm package @kubernetes-models/prometheus-operator (no API server: see
docs/deploy.md), broken copies refused; and the container run as the Deployment describes it,
with a read-only root and only its emptyDir writable.

Run with MEOWBOT_TEST_SERVICES=kube (the API server; testenv also installs the validators,
once per machine). The container's run needs root (a mount namespace) and redis-server, as
`make test` has.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from asyncio.subprocess import Process
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from slack_sdk.signature import SignatureVerifier

from bot.backends.kubernetes_config import KubernetesConfig
from bot.cli import main as meowbot_cli
from bot.config import ConfigError, load_settings
from bot.redis_url import sentinel_address
from bot.server import HANDOVER_S, SHUTDOWN_GRACE_S
from bot.shell.emulator import SlackEmulator
from scripts.testsvc import crd_validators
from scripts.testsvc.common import free_port
from scripts.testsvc.redis import redis_command
from tests.conftest import RedisServer, need_service
from tests.kube_api import KubeApi, KubeError, wait_ready

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes"
VALIDATE = ROOT / "tests" / "validate_crd_objects.mjs"
NODE_S = 60.0  # one run of the validators; about half a second
NS = "meowbot"
KUBECTL_S = 60.0  # one render; kubectl kustomize takes well under a second
MANAGER = "meowbot-deploy-test"
PLACEHOLDER = "REPLACE-ME"

# Every object the base renders, by kind and name (the ConfigMap's name gets its hash).
OBJECTS = {
    ("v1", "Namespace", "meowbot"),
    ("v1", "ServiceAccount", "meowbot"),
    ("rbac.authorization.k8s.io/v1", "Role", "meowbot-validation"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "meowbot"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "meowbot-readonly"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "meowbot-validation"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "meowbot"),
    ("v1", "ConfigMap", "meowbot-config"),
    ("v1", "Secret", "meowbot-secrets"),
    ("v1", "Service", "meowbot"),
    ("apps/v1", "Deployment", "meowbot"),
    ("policy/v1", "PodDisruptionBudget", "meowbot"),
    ("monitoring.coreos.com/v1", "ServiceMonitor", "meowbot"),
    ("monitoring.coreos.com/v1", "PrometheusRule", "meowbot"),
    ("networking.k8s.io/v1", "NetworkPolicy", "meowbot"),
}
# What kube-apiserver 1.20 does not serve at all (policy/v1 came in 1.21): named here, so
# that no object goes unchecked without the test saying so.
NOT_SERVED_BY_1_20 = {("policy/v1", "PodDisruptionBudget")}
# prometheus-operator's kinds: no CRD of theirs is installed in the test API server; they are
# held to their schemas by the npm package's validators instead (the tests at the end of the
# API server's).
BY_SCHEMA = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}

Doc = dict[str, Any]


def kustomize(path: Path) -> list[Doc]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to render deploy/kubernetes (its kustomize is built in)"
    done = subprocess.run(
        [kubectl, "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=KUBECTL_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def the(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    [doc] = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    return doc


def container(docs: list[Doc]) -> Doc:
    containers: list[Doc] = the(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    [c] = containers
    return c


def env_of(docs: list[Doc]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(docs)["env"]}


def secret_values(secret: Doc) -> dict[str, str]:
    return dict(secret.get("stringData") or {})


@pytest.fixture(scope="module")
def rendered() -> list[Doc]:
    return kustomize(BASE)


# ---------------------------------------------------------------- the rendered base


def test_the_base_renders_each_object_once_in_its_namespace_with_the_common_labels(
    rendered: list[Doc],
) -> None:
    named = {
        (d["apiVersion"], d["kind"], d["metadata"]["name"])
        for d in rendered
        if d["kind"] != "ConfigMap"
    } | {("v1", "ConfigMap", "meowbot-config")}
    assert named == OBJECTS and len(rendered) == len(OBJECTS)
    assert re.fullmatch(
        r"meowbot-config-[a-z0-9]{10}", the(rendered, "ConfigMap")["metadata"]["name"]
    )
    cluster_wide = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for doc in rendered:
        meta = doc["metadata"]
        assert meta.get("namespace") == (None if doc["kind"] in cluster_wide else NS), meta
        assert meta["labels"]["app.kubernetes.io/part-of"] == "meowbot", meta


def test_the_rbac_moved_into_the_base_whole(rendered: list[Doc]) -> None:
    text = (BASE / "rbac.yaml").read_text(encoding="utf-8")
    assert text.startswith("# meowbot on Kubernetes: the smallest rights that work")
    assert not (ROOT / "deploy" / "kubernetes-rbac.yaml").exists()
    for doc in yaml.safe_load_all(text):
        got = the(rendered, doc["kind"], doc["metadata"]["name"])
        for key in ("rules", "roleRef", "subjects"):
            assert got.get(key) == doc.get(key), (doc["kind"], key)


def test_the_deployment_runs_three_locked_down_replicas_spread_over_nodes(
    rendered: list[Doc],
) -> None:
    deployment = the(rendered, "Deployment")
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["replicas"] == 3
    assert spec["selector"]["matchLabels"] == {"app.kubernetes.io/name": "meowbot"}
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    # The pod: the Dockerfile's user, never root, the runtime's seccomp profile.
    useradd = re.search(r"--uid (\d+)", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    assert useradd is not None, "the Dockerfile's user has no fixed uid"
    uid = int(useradd.group(1))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == the(rendered, "ServiceAccount")["metadata"]["name"]
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        subjects = the(rendered, binding)["subjects"]
        assert {"kind": "ServiceAccount", "name": "meowbot", "namespace": NS} in subjects
    # One replica a node, hard; zones where there are some, soft.
    hostname = [
        t for t in pod["topologySpreadConstraints"] if t["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert hostname[0]["whenUnsatisfiable"] == "DoNotSchedule" and hostname[0]["maxSkew"] == 1
    assert hostname[0]["labelSelector"]["matchLabels"].items() <= labels.items()
    # The container.
    c = container(rendered)
    assert c["image"] == "meowbot" and c["args"] == ["run"]
    ctx = c["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False and ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert not ctx.get("privileged")
    res = c["resources"]
    assert {"cpu", "memory"} <= set(res["requests"])
    assert set(res["limits"]) == {"memory"}  # no CPU limit: throttling would hold the acks
    mebi = {"Mi": 1, "Gi": 1024}
    memory = {
        k: int(v[:-2]) * mebi[v[-2:]]
        for k, v in {"request": res["requests"]["memory"], "limit": res["limits"]["memory"]}.items()
    }
    assert 206 < memory["request"] <= memory["limit"]  # above the measured plateau
    # The shutdown fits the grace period: the in-flight wait, the hand-over twice, the loops,
    # after the preStop pause.
    pause = float(c["lifecycle"]["preStop"]["exec"]["command"][1])
    needed = 2 * SHUTDOWN_GRACE_S + 2 * HANDOVER_S + pause
    assert pod["terminationGracePeriodSeconds"] >= needed


def test_ready_means_redis_answers_alive_means_the_loop_answers(rendered: list[Doc]) -> None:
    c = container(rendered)
    [port] = c["ports"]
    assert env_of(rendered)["PORT"] == str(port["containerPort"])
    ready, alive = c["readinessProbe"], c["livenessProbe"]
    assert ready["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # /healthz answers 503 without Redis: as the liveness probe it would restart every
    # replica at once in a Redis outage. /metrics reads no backend.
    assert alive["httpGet"] == {"path": "/metrics", "port": port["name"]}
    assert ready["timeoutSeconds"] > 2  # /healthz waits up to 2 s for Redis' PING
    assert alive["periodSeconds"] * alive["failureThreshold"] >= 60


def test_the_only_writable_folder_is_an_emptydir_and_the_config_is_the_configmap(
    rendered: list[Doc], tmp_path: Path
) -> None:
    c = container(rendered)
    volumes = {
        v["name"]: v for v in the(rendered, "Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    writable = {path for path, m in mounts.items() if not m.get("readOnly")}
    assert writable == {"/tmp"}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    env = env_of(rendered)
    assert env["MPLCONFIGDIR"].startswith("/tmp/")
    # MEOWBOT_CONFIG is a file path (bot/config.py): the ConfigMap's key, where it is mounted.
    folder, key = os.path.split(env["MEOWBOT_CONFIG"])
    config_volume = volumes[mounts[folder]["name"]]
    config_map = the(rendered, "ConfigMap")
    assert config_volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert set(config_map["data"]) == {key}
    path = tmp_path / key
    path.write_text(config_map["data"][key], encoding="utf-8")
    settings = load_settings(MEOWBOT_CONFIG=str(path))
    assert KubernetesConfig(**settings.extra["kubernetes"]).node_selector
    assert config_map["data"][key] == (BASE / "config.yaml").read_text(encoding="utf-8")


def test_the_secret_is_a_template_the_bot_refuses_to_start_with(rendered: list[Doc]) -> None:
    secret = the(rendered, "Secret")
    values = secret_values(secret)
    assert "data" not in secret and values
    assert all(v == PLACEHOLDER for v in values.values())
    assert {
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLURM_JWT",
        "ALERTMANAGER_WEBHOOK_TOKEN",
        "REDIS_PASSWORD",
    } == set(values)
    c = container(rendered)
    assert c["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN must be a bot token"):
        load_settings(**{k: v for k, v in values.items() if k != "REDIS_PASSWORD"})


def test_redis_url_is_a_sentinel_url_with_the_secrets_password(rendered: list[Doc]) -> None:
    env = env_of(rendered)
    names = [e["name"] for e in container(rendered)["env"]]
    # envFrom comes before env: $(REDIS_PASSWORD) is the Secret's, whatever env's order.
    assert "REDIS_PASSWORD" not in names
    url = env["REDIS_URL"]
    assert "$(REDIS_PASSWORD)" in url
    address = sentinel_address(url.replace("$(REDIS_PASSWORD)", "s3cret"))
    assert address is not None and address.password == "s3cret" and address.service
    without = sentinel_address(url.replace("$(REDIS_PASSWORD)", ""))
    assert without is not None and without.password is None  # a Redis without a password
    assert env["MEOWBOT_KUBERNETES_IN_CLUSTER"] == "true"


def test_the_budget_service_and_scrape_select_the_bots_pods(rendered: list[Doc]) -> None:
    labels = the(rendered, "Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb = the(rendered, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    service = the(rendered, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    [port] = service["spec"]["ports"]
    assert port["targetPort"] == container(rendered)["ports"][0]["name"] == port["name"]
    monitor = the(rendered, "ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"


def test_the_prometheus_rule_is_the_committed_generated_file(rendered: list[Doc]) -> None:
    committed = yaml.safe_load((BASE / "prometheusrule.yaml").read_text(encoding="utf-8"))
    rule = the(rendered, "PrometheusRule")
    assert rule["spec"] == committed["spec"]
    assert len(rule["spec"]["groups"]) > 10


def test_the_network_policy_lets_in_only_the_bot_port_and_out_only_what_it_reaches(
    rendered: list[Doc],
) -> None:
    policy = the(rendered, "NetworkPolicy")["spec"]
    labels = the(rendered, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    for rule in policy["ingress"]:
        assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
        assert rule["from"]  # from named namespaces, not from anywhere
    out = {(p["port"], p["protocol"]) for rule in policy["egress"] for p in rule["ports"]}
    assert out == {
        (53, "UDP"),
        (53, "TCP"),  # DNS
        (6379, "TCP"),
        (26379, "TCP"),  # Redis and its Sentinels
        (9090, "TCP"),
        (9093, "TCP"),  # Prometheus, Alertmanager
        (443, "TCP"),
        (6443, "TCP"),  # the API server; Slack
        (6820, "TCP"),  # slurmrestd
    }
    [internet] = [
        rule
        for rule in policy["egress"]
        if any(peer.get("ipBlock", {}).get("cidr") == "0.0.0.0/0" for peer in rule["to"])
    ]
    assert internet["ports"] == [{"port": 443, "protocol": "TCP"}]
    private = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}
    assert set(internet["to"][0]["ipBlock"]["except"]) == private


def test_a_site_overlay_changes_what_docs_deploy_md_says_it_changes(
    rendered: list[Doc], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "secrets.env").write_text(
        "SLACK_BOT_TOKEN=xoxb-site\nSLACK_SIGNING_SECRET=site-secret\nREDIS_PASSWORD=\n"
    )
    # The health window: the counters are recorded over it, so the rules change.
    (site / "config.yaml").write_text("health:\n  window_s: 7200\n")
    monkeypatch.setenv("MEOWBOT_CONFIG", str(site / "config.yaml"))
    rules = site / "prometheusrule.yaml"
    assert meowbot_cli(["prometheus-rules", "--kubernetes", "-o", str(rules)]) == 0
    overlay = {
        "resources": [os.path.relpath(BASE, site)],
        "secretGenerator": [
            {"name": "meowbot-secrets", "behavior": "replace", "envs": ["secrets.env"]}
        ],
        "configMapGenerator": [
            {"name": "meowbot-config", "behavior": "replace", "files": ["config.yaml"]}
        ],
        "images": [{"name": "meowbot", "newName": "registry.site/meowbot", "newTag": "1.2.3"}],
        "patches": [{"path": "prometheusrule.yaml"}],
        "labels": [{"pairs": {"release": "prometheus"}, "includeSelectors": False}],
    }
    (site / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    docs = kustomize(site)
    secret = the(docs, "Secret")
    assert "stringData" not in secret and set(secret["data"]) == {
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "REDIS_PASSWORD",
    }
    assert PLACEHOLDER not in json.dumps(docs)
    assert container(docs)["envFrom"][0]["secretRef"]["name"] == secret["metadata"]["name"]
    config_map = the(docs, "ConfigMap")
    assert config_map["metadata"]["name"] != the(rendered, "ConfigMap")["metadata"]["name"]
    volumes = the(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "configMap": {"name": config_map["metadata"]["name"]}} in volumes
    assert container(docs)["image"] == "registry.site/meowbot:1.2.3"
    site_groups = yaml.safe_load(rules.read_text())["spec"]["groups"]
    assert the(docs, "PrometheusRule")["spec"]["groups"] == site_groups
    assert site_groups != the(rendered, "PrometheusRule")["spec"]["groups"]
    assert the(docs, "ServiceMonitor")["metadata"]["labels"]["release"] == "prometheus"
    assert (
        the(docs, "Deployment")["spec"]["selector"]
        == the(rendered, "Deployment")["spec"]["selector"]
    )


# ---------------------------------------------------------------- a real API server


@pytest.fixture(scope="module")
def api() -> KubeApi:
    wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
    return KubeApi.from_env()


def resource_path(api: KubeApi, doc: Doc) -> str | None:
    """Where the object lives on this server, by its discovery; None for a kind not served."""
    version = doc["apiVersion"]
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    try:
        found = api.get(base)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise
    [resource] = [
        r for r in found["resources"] if r["kind"] == doc["kind"] and "/" not in r["name"]
    ] or [None]
    if resource is None:
        return None
    meta = doc["metadata"]
    where = f"/namespaces/{meta['namespace']}" if resource["namespaced"] else ""
    return f"{base}{where}/{resource['name']}/{meta['name']}"


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def dry_apply(api: KubeApi, path: str, doc: Doc) -> Doc:
    """A server-side apply in dry run: validated, defaulted, admitted, stored nowhere.
    Apply rather than create, so that objects other tests made for real (the ClusterRole
    `meowbot`) are checked too; it also refuses fields the kind does not have. Refused:
    the server's whole message (KubeError keeps its first 300 characters)."""
    query = urllib.parse.urlencode({"dryRun": "All", "fieldManager": MANAGER, "force": "true"})
    request = urllib.request.Request(
        f"{api.url}{path}?{query}",
        data=json.dumps(doc).encode(),
        method="PATCH",
        headers={
            "Authorization": f"Bearer {api.token}",
            "Content-Type": "application/apply-patch+yaml",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30, context=api.ctx) as resp:
            got: Doc = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError):
            body = json.loads(body)["message"]
        raise Refused(exc.code, body) from None
    return got


def test_the_api_server_accepts_every_object_of_a_kind_it_serves(
    api: KubeApi, rendered: list[Doc]
) -> None:
    api.namespace(NS)  # namespaced objects need it to exist, dry run or not
    accepted, not_served, by_schema = [], set(), set()
    for doc in rendered:
        if (doc["apiVersion"], doc["kind"]) in BY_SCHEMA:
            by_schema.add((doc["apiVersion"], doc["kind"]))
            continue
        path = resource_path(api, doc)
        if path is None:
            not_served.add((doc["apiVersion"], doc["kind"]))
            continue
        got = dry_apply(api, path, doc)
        assert got["kind"] == doc["kind"] and got["metadata"]["name"] == doc["metadata"]["name"]
        accepted.append(doc["kind"])
    assert not_served == NOT_SERVED_BY_1_20 and by_schema == BY_SCHEMA
    assert len(accepted) == len(rendered) - len(NOT_SERVED_BY_1_20) - len(BY_SCHEMA)
    assert {"Deployment", "NetworkPolicy", "ClusterRole", "Secret"} <= set(accepted)
    # A dry run stores nothing.
    with pytest.raises(KubeError) as gone:
        api.get(f"/apis/apps/v1/namespaces/{NS}/deployments/meowbot")
    assert gone.value.status == 404
    # The budget, as the policy/v1beta1 1.20 serves: the same fields but the one v1 added.
    pdb = copy.deepcopy(the(rendered, "PodDisruptionBudget"))
    pdb["apiVersion"] = "policy/v1beta1"
    del pdb["spec"]["unhealthyPodEvictionPolicy"]
    path = resource_path(api, pdb)
    assert path is not None
    assert dry_apply(api, path, pdb)["spec"]["maxUnavailable"] == 1


def _refused(api: KubeApi, doc: Doc, status: int = 422) -> str:
    path = resource_path(api, doc)
    assert path is not None
    with pytest.raises(Refused) as caught:
        dry_apply(api, path, doc)
    assert caught.value.status == status, caught.value
    return caught.value.message


def test_the_dry_run_refuses_a_broken_deployment(api: KubeApi, rendered: list[Doc]) -> None:
    api.namespace(NS)
    wrong_labels = copy.deepcopy(the(rendered, "Deployment"))
    wrong_labels["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "other"}
    assert "`selector` does not match template `labels`" in _refused(api, wrong_labels)
    unknown = copy.deepcopy(the(rendered, "Deployment"))
    unknown["spec"]["replicaz"] = 3
    # 1.20's server-side apply answers a field the kind lacks with a 500 (newer ones: 400).
    said = _refused(api, unknown, status=500)
    assert ".spec.replicaz: field not declared in schema" in said


# ---------------------------------------------------------------- prometheus-operator's schemas


@pytest.fixture(scope="module")
def crd_validators_folder() -> Path:
    """Where testenv installed the npm package (scripts/testsvc/crd_validators.py)."""
    folder = Path(need_service(crd_validators.VAR))
    assert shutil.which("node"), "node runs the validators (testenv installs nodejs)"
    assert crd_validators.installed_version(folder) == crd_validators.VERSION, folder
    return folder


def schema_errors(folder: Path, docs: list[Doc]) -> tuple[int, list[list[str]]]:
    """tests/validate_crd_objects.mjs on `docs`: its exit code and each object's errors."""
    done = subprocess.run(
        ["node", str(VALIDATE), str(folder)],
        input=json.dumps(docs),
        capture_output=True,
        text=True,
        timeout=NODE_S,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    results = json.loads(done.stdout)
    assert [(r["kind"], r["name"]) for r in results] == [
        (d["kind"], d["metadata"]["name"]) for d in docs
    ]
    return done.returncode, [r["errors"] for r in results]


def test_the_monitoring_objects_hold_to_prometheus_operators_schemas(
    crd_validators_folder: Path, rendered: list[Doc]
) -> None:
    docs = [d for d in rendered if (d["apiVersion"], d["kind"]) in BY_SCHEMA]
    assert {(d["apiVersion"], d["kind"]) for d in docs} == BY_SCHEMA and len(docs) == 2
    assert schema_errors(crd_validators_folder, docs) == (0, [[], []])


DURATION = (
    "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)


def test_the_schemas_refuse_broken_monitoring_objects_each_for_its_fault(
    crd_validators_folder: Path, rendered: list[Doc]
) -> None:
    """One fault a copy, each refused where it is and for what it is, in one run beside the
    objects untouched: a wrong type, a duration that is none, a required field misspelt (so
    missing), a value outside its enum. (A misspelt optional field is not refused: the CRDs
    allow unknown fields, which an API server drops.)"""

    def fresh(kind: str) -> tuple[Doc, Doc, Doc]:
        """A copy of the object, its spec, and its first endpoint or its second group."""
        doc = copy.deepcopy(the(rendered, kind))
        spec = doc["spec"]
        part = spec["endpoints"][0] if kind == "ServiceMonitor" else spec["groups"][1]
        return doc, spec, part

    cases: list[tuple[Doc, list[str]]] = []
    rule, _, group = fresh("PrometheusRule")
    group["rules"][0]["record"] = ["not", "a", "name"]
    cases.append((rule, ["/spec/groups/1/rules/0/record: must be string"]))
    rule, _, group = fresh("PrometheusRule")
    group["interval"] = "every half minute"
    cases.append((rule, [f'/spec/groups/1/interval: must match pattern "{DURATION}"']))
    rule, _, group = fresh("PrometheusRule")
    group["rules"][0]["exp"] = group["rules"][0].pop("expr")
    cases.append((rule, ["/spec/groups/1/rules/0: must have required property expr"]))
    rule, _, group = fresh("PrometheusRule")
    group["nme"] = group.pop("name")
    cases.append((rule, ["/spec/groups/1: must have required property name"]))
    monitor, _, endpoint = fresh("ServiceMonitor")
    endpoint["path"] = 9090
    cases.append((monitor, ["/spec/endpoints/0/path: must be string"]))
    monitor, _, endpoint = fresh("ServiceMonitor")
    endpoint["port"] = 8080  # a port's name; a number goes in targetPort
    cases.append((monitor, ["/spec/endpoints/0/port: must be string"]))
    monitor, spec, _ = fresh("ServiceMonitor")
    spec["selectr"] = spec.pop("selector")
    cases.append((monitor, ["/spec: must have required property selector"]))
    monitor, _, endpoint = fresh("ServiceMonitor")
    endpoint["scheme"] = "gopher"
    cases.append(
        (monitor, ["/spec/endpoints/0/scheme: must be equal to one of the allowed values"])
    )
    for kind in ("PrometheusRule", "ServiceMonitor"):
        cases.append((the(rendered, kind), []))
    code, said = schema_errors(crd_validators_folder, [doc for doc, _ in cases])
    assert code == 1
    assert said == [errors for _, errors in cases]


# ---------------------------------------------------------------- the container, run

SIGNING_SECRET = "deploy-test-signing-secret"
START_S = 60.0  # imports, matplotlib's font cache, the first sweep, on a loaded machine
STATUS_S = 15.0


KEEP_AT = Path("/mnt")
"""Where the checkout waits, bound, while an emptyDir covers the folder it lies in."""


def _mount_script(
    mounts: list[Doc], volumes: dict[str, Doc], files: dict[str, Path], scratch: Path
) -> list[str]:
    """Shell lines that make, in a private mount namespace, what a kubelet would: the
    container's mounts (a configMap's files read-only, an emptyDir a tmpfs of its size), then
    the root read-only. A mount point missing here is made in an overlay of its nearest
    folder, itself read-only after, so nothing is written to this machine's own tree. A
    checkout (and its .venv, the interpreter run here) under an emptyDir's folder, /tmp for
    a clean clone, is bound back in read-only, where the image has its files in /usr/local."""
    lines = ["set -e", f"mount -t tmpfs tmpfs {scratch}"]
    covered = [
        Path(m["mountPath"])
        for m in mounts
        if "emptyDir" in volumes[m["name"]] and ROOT.is_relative_to(m["mountPath"])
    ]
    if covered:
        assert KEEP_AT.is_dir(), f"{KEEP_AT} is needed to hold the checkout"
        lines.append(f"mount --bind {shlex.quote(str(ROOT))} {KEEP_AT}")
    overlaid: list[str] = []
    for mount in mounts:
        target = Path(mount["mountPath"])
        if target.exists():
            continue
        nearest = next(p for p in target.parents if p.exists())
        assert str(nearest) != "/", f"{target}: no folder to overlay but the root"
        if str(nearest) not in overlaid:
            n = len(overlaid)
            upper, work = scratch / f"upper{n}", scratch / f"work{n}"
            lines += [
                f"mkdir {upper} {work}",
                f"mount -t overlay overlay -o lowerdir={nearest},upperdir={upper},"
                f"workdir={work} {nearest}",
            ]
            overlaid.append(str(nearest))
        lines.append(f"mkdir -p {target}")
    ordered = sorted(mounts, key=lambda m: "emptyDir" in volumes[m["name"]])  # files first
    for mount in ordered:
        volume, at = volumes[mount["name"]], shlex.quote(mount["mountPath"])
        if "configMap" in volume:
            lines += [f"mount --bind {files[mount['name']]} {at}"]
            lines += [f"mount -o remount,bind,ro {at}"]
        else:
            size = volume["emptyDir"].get("sizeLimit", "64Mi").replace("Mi", "m")
            lines.append(f"mount -t tmpfs -o size={size},mode=1777 tmpfs {at}")
    if covered:
        kept = shlex.quote(str(ROOT))
        lines += [f"mkdir -p {kept}", f"mount --bind {KEEP_AT} {kept}"]
        lines += [f"mount -o remount,bind,ro {kept}", f"umount {KEEP_AT}"]
    lines.append("mount -o remount,bind,ro /")
    lines += [f"mount -o remount,ro {folder}" for folder in overlaid]
    return lines


@contextlib.contextmanager
def _redis(tmp: Path) -> Iterator[RedisServer]:
    assert shutil.which("redis-server"), "redis-server is needed (make test installs it)"
    port = free_port()
    server = RedisServer(redis_command(port, tmp), port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def _status(http: aiohttp.ClientSession, url: str) -> int | None:
    try:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
            return resp.status
    except (TimeoutError, aiohttp.ClientError):
        return None


async def _until(
    http: aiohttp.ClientSession, url: str, status: int, within: float, proc: Process
) -> None:
    deadline = time.monotonic() + within
    while (seen := await _status(http, url)) != status:
        if proc.returncode is not None:
            _, err = await proc.communicate()
            pytest.fail(f"the bot exited {proc.returncode}: {err.decode()[-3000:]}")
        assert time.monotonic() < deadline, f"{url}: {seen}, not {status}, after {within:.0f} s"
        await asyncio.sleep(0.2)


async def test_the_container_runs_with_a_read_only_root_and_only_its_emptydir_written(
    rendered: list[Doc],
) -> None:
    """The container as rendered, on this machine: its env (the cluster's addresses swapped for
    the simulated fleet, a Redis of the test's own and the Slack emulator), its mounts, a
    read-only root, every capability dropped. Run as root without capabilities (this
    machine's Python is under /root, where uid 10001 cannot read); a read-only mount refuses
    root alike. Ready with Redis, unready without it while still alive, and a chart drawn."""
    for tool in ("unshare", "setpriv", "mount"):
        assert shutil.which(tool), f"{tool} (util-linux) is needed"
    assert os.geteuid() == 0, "a private mount namespace needs root, as `make test` runs"
    deployment = the(rendered, "Deployment")
    pod, c = deployment["spec"]["template"]["spec"], container(rendered)
    volumes = {v["name"]: v for v in pod["volumes"]}
    work = Path(tempfile.mkdtemp(prefix="mw-deploy-"))
    files: dict[str, Path] = {}
    for mount in c["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            folder = work / mount["name"]
            folder.mkdir()
            data = the(rendered, "ConfigMap", volume["configMap"]["name"])["data"]
            for key, text in data.items():
                (folder / key).write_text(text, encoding="utf-8")
            files[mount["name"]] = folder
        else:
            assert "emptyDir" in volume, f"{mount['name']}: only configMaps and emptyDirs here"
    scratch = work / "scratch"
    scratch.mkdir()
    emulator = SlackEmulator()
    await emulator.start()
    port = free_port()
    with _redis(work) as redis:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/nonexistent",  # the image's user has no home
            **env_of(rendered),
            # This machine's stand-ins for the cluster's services.
            "PORT": str(port),
            "REDIS_URL": redis.url,
            "SLACK_BOT_TOKEN": emulator.bot_token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": emulator.api_url,
        }
        for cluster_only in ("PROMETHEUS_URL", "MEOWBOT_KUBERNETES_IN_CLUSTER"):
            env.pop(cluster_only)
        script = _mount_script(c["volumeMounts"], volumes, files, scratch)
        command = [sys.executable, "-m", "bot", *c["args"]]
        script.append(
            "cd / && exec setpriv --bounding-set -all --inh-caps -all --no-new-privs "
            + shlex.join(command)
        )
        proc = await asyncio.create_subprocess_exec(
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "\n".join(script),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        base = f"http://127.0.0.1:{port}"
        ready = base + c["readinessProbe"]["httpGet"]["path"]
        alive = base + c["livenessProbe"]["httpGet"]["path"]
        seen_root = Path(f"/proc/{proc.pid}/root")
        try:
            async with aiohttp.ClientSession() as http:
                await _until(http, ready, 200, START_S, proc)
                assert await _status(http, alive) == 200
                # The namespace as the bot sees it: the root and the config refuse writes.
                for refused in (seen_root / "meowbot-was-here", seen_root / "etc/meowbot/x"):
                    with pytest.raises(OSError) as caught:
                        refused.write_text("x")
                    assert caught.value.errno == errno.EROFS
                mpl = seen_root / env["MPLCONFIGDIR"].lstrip("/")
                assert list(mpl.glob("fontlist-*.json")), "matplotlib wrote no font cache there"
                # A chart drawn and sent.
                payload = emulator.slash_command_payload("/job-slow", "4100001")
                body = urllib.parse.urlencode(payload)
                stamp = str(int(time.time()))
                signature = str(
                    SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=stamp, body=body)
                )
                headers = {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Slack-Request-Timestamp": stamp,
                    "X-Slack-Signature": signature,
                }
                async with http.post(base + "/slack/events", data=body, headers=headers) as r:
                    assert r.status == 200
                deadline = time.monotonic() + START_S
                while not any(png.startswith(b"\x89PNG") for png in emulator.uploads.values()):
                    assert time.monotonic() < deadline, "no chart was uploaded"
                    await asyncio.sleep(0.2)
                # Redis gone: unready, still alive; back: ready again.
                redis.stop()
                await _until(http, ready, 503, STATUS_S, proc)
                for _ in range(3):
                    assert await _status(http, alive) == 200
                    await asyncio.sleep(0.5)
                redis.start()
                await _until(http, ready, 200, STATUS_S, proc)
            proc.terminate()
            grace = pod["terminationGracePeriodSeconds"]
            _, err = await asyncio.wait_for(proc.communicate(), grace)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await emulator.stop()
            shutil.rmtree(work, ignore_errors=True)
    assert proc.returncode == 0, err.decode()[-3000:]
    text = err.decode()
    assert "Read-only file system" not in text and "Errno 30" not in text, text[-3000:]
