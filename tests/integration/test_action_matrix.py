"""Every action on every scheduler from every node state: the words, what was recorded and the
state read back from the backend agree.

Schedulers: the simulated one, the real Slurm 22.05 (scripts/testsvc/slurm.py: gpu-0001..0016
are real slurmds), the real kube-apiserver (scripts/testsvc/kube.py: Nodes made through the
API, no kubelet), and both at once (the Slurm nodes, with a Kubernetes Node of the same name).
Actions go through the alert buttons' path (`bot.alerts.acts`, which calls the core in
bot/triage/actions.py as the /node-health buttons do) with a real Redis alert store (the audit)
and resume memory, so "what it recorded" is read back from Redis too.

Node states, and where a backend has no such state, its nearest (the mapping):

- idle: Slurm idle; Kubernetes Ready and schedulable; both idle. The simulated fleet has no
  idle node (every node runs a job), so its nearest is another node with a job.
- running: a real Slurm job (sbatch -w); a Running pod of a batch Job on the Node; both: the
  Slurm job; simulated: a node of the fleet's jobs.
- ours: drained by meowbot (Slurm drain, Kubernetes cordon + meowbot's taint, both sides).
- operator: an operator's drain (Slurm reason "disk swap", the simulator's likewise), an
  operator's cordon in Kubernetes, both: the Slurm drain and the Kubernetes cordon.
- cordon_taint: Kubernetes cordon + an operator's NoSchedule taint; Slurm and the simulator
  have neither, so their nearest is an operator's drain; both: Slurm idle, Kubernetes
  cordoned and tainted.
- down: Kubernetes NotReady (Ready=False); Slurm (and the simulator) set down with reason
  "Not responding", its nearest (a node whose slurmd died reads the same); both: the two.
- unknown: a name the scheduler does not have.

Each case sets its node up from scratch and puts it back afterwards, so cases reuse a few nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.alerts import acts
from bot.alerts.config import AlertsConfig
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Scope
from bot.alerts.ports import Update
from bot.backends.alert_store import RedisAlertStore
from bot.backends.both_schedulers import BothSchedulers
from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.kubernetes_jobs import UserRule
from bot.backends.resume_store import RedisResumes
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.scheduler import SimScheduler
from bot.backends.slurm import SlurmRest
from bot.models import Severity
from bot.ports import Scheduler, SchedulerNode
from bot.triage import readback
from tests.conftest import need_service
from tests.kube_api import KubeApi, wait_ready

SCHEDULERS = ("sim", "slurm", "kube", "both")
STATES = ("idle", "running", "ours", "operator", "cordon_taint", "down", "unknown")
ACTIONS = ("drain", "drain_now", "resume", "resume_anyway")
OURS = "meowbot: xid79 gpu3 by @ana"
TAINT = {"key": "nvsentinel.dgx.nvidia.com/gpu", "value": "xid79", "effect": "NoSchedule"}
TAINT_TEXT = "nvsentinel.dgx.nvidia.com/gpu=xid79:NoSchedule"
# Slurm nodes of the matrix (each state its own; "both" reuses them with a Kubernetes twin).
SLURM_NODE = {
    "idle": "gpu-0009",
    "running": "gpu-0010",
    "ours": "gpu-0011",
    "operator": "gpu-0012",
    "cordon_taint": "gpu-0013",
    "down": "gpu-0015",
    "unknown": "gpu-0099",
}
NS = "mx"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------ what each case expects

OUT = "out"  # taken out by meowbot, read back out of service with meowbot's reason
ALREADY = "already"  # meowbot's drain already there: nothing changed
REFUSED = "refused"  # someone else's reason: a drain does not overwrite it
NOTHING = "nothing"  # a resume of a node in service
ASK = "ask"  # a resume over someone else's reason waits for a confirmation
RESUMED = "resumed"  # read back in service everywhere, remembered, audited
PARTIAL = "partial"  # something changed, the node is not back in service
STILL = "still"  # a resume that changed nothing: says what remains
UNKNOWN = "unknown"


def expect(sched: str, state: str, action: str) -> str:
    if state == "unknown":
        return UNKNOWN
    drain = action.startswith("drain")
    if state in {"idle", "running"}:
        return OUT if drain else NOTHING
    if state == "ours":
        return (ALREADY if action == "drain" else OUT) if drain else RESUMED
    if state == "down" and sched == "kube":
        # NotReady with no reason of anyone's: meowbot may cordon it, and a resume has
        # nothing to take back: it stays NotReady.
        return OUT if drain else STILL
    if drain:
        return REFUSED
    if action == "resume":
        return ASK
    if sched in {"sim", "slurm"} or state == "operator":
        return RESUMED
    return PARTIAL  # Kubernetes' taint stays, or Kubernetes' NotReady


CASES = [
    pytest.param(s, st, a, id=f"{s}-{st}-{a}") for s in SCHEDULERS for st in STATES for a in ACTIONS
]


# ------------------------------------------------------------------ the backends


def _slurm_cli(*args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    out = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise AssertionError(f"{args}: {out.stderr}")
    return out.stdout


async def _until(what: str, ok: Any, timeout_s: float = 20) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not await ok():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


@dataclass
class Case:
    sched: str
    state: str
    node: str
    scheduler: Scheduler
    slurm: SlurmRest | None = None
    kube: KubernetesScheduler | None = None
    api: KubeApi | None = None


async def _slurm_reset(slurm: SlurmRest, node: str) -> None:
    if node == SLURM_NODE["unknown"]:
        return
    _slurm_cli("scancel", "-n", f"mx-{node}", check=False)
    _slurm_cli("scontrol", "update", f"nodename={node}", "state=resume", check=False)

    async def idle() -> bool:
        n = (await slurm.nodes([node])).get(node)
        if n is not None and n.state == "down":  # a resume raced a job's end: again
            _slurm_cli("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        return n is not None and n.state == "idle" and not n.flags and n.reason is None

    await _until(f"{node} idle in Slurm", idle)


async def _slurm_set(slurm: SlurmRest, node: str, state: str) -> None:
    await _slurm_reset(slurm, node)
    if state == "running":
        _slurm_cli(
            "sbatch",
            "--parsable",
            "--no-requeue",
            "-o",
            "/dev/null",
            "-w",
            node,
            "-J",
            f"mx-{node}",
            "--wrap",
            "sleep 600",
        )

        async def busy() -> bool:
            n = (await slurm.nodes([node]))[node]
            return n.state in {"allocated", "mixed"}

        await _until(f"a job on {node}", busy)
    elif state == "ours":
        await slurm.drain(node, OURS)
    elif state in {"operator", "cordon_taint"}:
        _slurm_cli("scontrol", "update", f"nodename={node}", "state=drain", "reason=disk swap")
    elif state == "down":
        _slurm_cli("scontrol", "update", f"nodename={node}", "state=down", "reason=Not responding")


def _kube_reset(api: KubeApi, node: str) -> None:
    api.delete(f"/api/v1/namespaces/{NS}/pods/{node}-train")
    api.delete(f"/api/v1/nodes/{node}")


async def _kube_set(api: KubeApi, kube: KubernetesScheduler, node: str, state: str) -> None:
    _kube_reset(api, node)
    if state == "unknown":
        return
    api.node(
        node,
        ready=state != "down",
        unschedulable=state in {"operator", "cordon_taint"},
        taints=[TAINT] if state == "cordon_taint" else None,
    )
    if state == "running":
        api.namespace(NS)
        job = api.batch_job(NS, f"{node}-train")
        api.pod(NS, f"{node}-train", node, owner=job)
    elif state == "ours":
        await kube.drain(node, OURS)


@pytest.fixture
async def store(redis_client: Any) -> RedisAlertStore:
    return RedisAlertStore(redis_client)  # redis_client starts from an empty database


async def _case(sched: str, state: str) -> AsyncIterator[Case]:
    if sched == "sim":
        fleet = SimFleet(16, seed=5, fault_rate=0.0)
        sim = SimScheduler(fleet)
        names = fleet.topology.names
        # Every node of the simulated fleet runs a job: "idle" is its nearest, another one.
        node = {"running": names[0], "unknown": "gpu-9999"}.get(state, names[1])
        if state == "ours":
            await sim.drain(node, OURS)
        elif state in {"operator", "cordon_taint"}:
            sim.hold(node, "disk swap")
        elif state == "down":
            sim.hold(node, "Not responding", down=True)
        yield Case(sched, state, node, sim)
        return
    slurm: SlurmRest | None = None
    kube: KubernetesScheduler | None = None
    api: KubeApi | None = None
    if sched in {"slurm", "both"}:
        slurm = SlurmRest(
            need_service("SLURM_REST_URL"),
            token=need_service("SLURM_JWT"),
            user=os.environ.get("SLURM_USER", "root"),
            slurm_conf=need_service("SLURM_CONF"),
            timeout_s=10,
        )
    if sched in {"kube", "both"}:
        wait_ready(need_service("MEOWBOT_TEST_KUBE_STATUS"))
        api = KubeApi.from_env()
        kube = KubernetesScheduler(
            kubeconfig=need_service("MEOWBOT_TEST_KUBECONFIG"),
            user_rule=UserRule("namespace", ""),
        )
    node = SLURM_NODE[state] if sched != "kube" else f"mx-{state.replace('_', '-')}"
    try:
        if slurm is not None:
            # Both: Kubernetes' cordon and taint beside a Slurm node in service.
            slurm_state = "idle" if sched == "both" and state == "cordon_taint" else state
            await _slurm_set(slurm, node, slurm_state)
        if api is not None and kube is not None:
            k_state = "idle" if sched == "both" and state == "running" else state
            await _kube_set(api, kube, node, k_state)
        scheduler: Scheduler
        if slurm is not None and kube is not None:
            scheduler = BothSchedulers(slurm, kube)
        else:
            scheduler = slurm or kube  # type: ignore[assignment]
        yield Case(sched, state, node, scheduler, slurm, kube, api)
    finally:
        with contextlib.suppress(Exception):
            if slurm is not None:
                await _slurm_reset(slurm, node)
        if api is not None:
            _kube_reset(api, node)
        if slurm is not None:
            await slurm.close()
        if kube is not None:
            await kube.close()


def _group(node: str, severity: Severity) -> AlertGroup:
    """An alert group naming the node: critical offers Drain now, warning Drain after jobs."""
    alert = Alert(
        fingerprint=f"mx-{node}-{severity.name}",
        source=AlertSource.ALERTMANAGER,
        status=AlertStatus.FIRING,
        cause=f"mx_{severity.name.lower()}",
        node=node,
        severity=severity,
        summary="matrix",
        labels={"alertname": "Matrix", "Hostname": node},
        starts_at=T0,
    )
    key = GroupKey(cause=alert.cause, scope=Scope.NODE, scope_value=node)
    return AlertGroup(key=key, alerts=(alert,), opened_at=T0, channel="C_ALERTS")


async def _put(store: RedisAlertStore, group: AlertGroup) -> str:
    gid = group.key.id
    await store.update(gid, lambda _g: Update(group, group, dirty=True))
    return gid


# ------------------------------------------------------------------ reading back


async def _sides(case: Case) -> dict[str, SchedulerNode]:
    """The node as each backend says it, read by a fresh call (not through the action)."""
    out: dict[str, SchedulerNode] = {}
    if case.sched == "sim":
        found = (await case.scheduler.nodes([case.node])).get(case.node)
        return {case.scheduler.name: found} if found else {}
    if case.slurm is not None:
        found = (await case.slurm.nodes([case.node])).get(case.node)
        if found:
            out["Slurm"] = found
    if case.kube is not None:
        found = (await case.kube.nodes([case.node])).get(case.node)
        if found:
            out["Kubernetes"] = found
    return out


def _raw_kube(case: Case) -> dict[str, Any] | None:
    if case.api is None:
        return None
    try:
        node: dict[str, Any] = case.api.get(f"/api/v1/nodes/{case.node}")
    except Exception:
        return None
    return node


def _seen(nodes: dict[str, SchedulerNode]) -> dict[str, tuple[object, ...]]:
    return {
        w: (n.state, n.flags, n.reason, n.others_cordon, n.others_taints) for w, n in nodes.items()
    }


def _in_service(case: Case, nodes: dict[str, SchedulerNode]) -> bool:
    if any(readback.remains(n, w) for w, n in nodes.items()):
        return False
    raw = _raw_kube(case)
    return raw is None or not raw["spec"].get("unschedulable")


# ------------------------------------------------------------------ the matrix


@pytest.mark.parametrize(("sched", "state", "action"), CASES)
async def test_action_matrix(
    sched: str, state: str, action: str, store: RedisAlertStore, redis_client: Any
) -> None:
    memory = RedisResumes(redis_client)
    want = expect(sched, state, action)
    gen = _case(sched, state)
    case = await gen.__anext__()
    try:
        node = case.node
        before = await _sides(case)
        if action.startswith("drain"):
            severity = Severity.CRITICAL if action == "drain_now" else Severity.WARNING
            gid = await _put(store, _group(node, severity))
            out = await acts.drain(
                store,
                case.scheduler,
                AlertsConfig(),
                gid,
                node,
                acts.Actor("U0ANA", "ana"),
                datetime.now(UTC),
                16,
                confirmed_by_second=True,
            )
        else:
            gid = await _put(store, _group(node, Severity.WARNING))
            out = await acts.resume(
                store,
                case.scheduler,
                gid,
                node,
                acts.Actor("U0ANA", "ana"),
                force=action == "resume_anyway",
                memory=memory,
            )
        after = await _sides(case)
        said = out.sentence
        audit = [e["verb"] for e in await store.audit_entries()]
        remembered = await memory.resumes([node])
        raw = _raw_kube(case)
        where = f"{sched}/{state}/{action}: {said!r} read back {after}"

        # What is said agrees with what is read back, whatever was expected.
        if said.startswith("Resumed"):
            assert _in_service(case, after), where
        if "stays cordoned" in said:
            assert raw is not None and raw["spec"].get("unschedulable"), where
        if "stays tainted" in said:
            assert any(n.others_taints for n in after.values()), where
        if "NotReady" in said:
            assert any(n.down for w, n in after.items() if w == "Kubernetes"), where
        # A resume is remembered only when the node is back in service.
        if remembered:
            assert _in_service(case, after), where

        if want == UNKNOWN:
            assert "not know" in said, where
        elif want in {ALREADY, REFUSED, NOTHING, ASK, STILL}:
            # Nothing changed: said so, nothing recorded, the backend as it was.
            assert _seen(after) == _seen(before), where
            assert not remembered and audit == [], where
            assert out.thread_line is None, where
            phrase = {
                ALREADY: "nothing was changed",
                REFUSED: "I do not overwrite it",
                NOTHING: "nothing to resume",
                ASK: "unless you confirm",
                STILL: "Nothing changed",
            }[want]
            assert phrase in said, where
            assert out.can_force == (want == ASK), where
            if want == STILL:
                assert "still NotReady: Kubernetes schedules nothing there" in said, where
        elif want == OUT:
            assert all(n.out_of_service and n.reason_is_ours for n in after.values()), where
            assert after.keys() == before.keys() and after, where
            head = "Took" if action == "drain_now" else "Draining"
            assert said.startswith(f"{head} `{node}` in ") or said.startswith(
                f"{head} `{node}` out of "
            ), where
            assert "Read back:" in said, where
            if action == "drain_now" and "Slurm" in after:
                # Down and drained: Slurm may put a DOWN node back when its slurmd registers
                # again (ReturnToService=2), the DRAIN flag keeps it out.
                assert "DRAIN" in after["Slurm"].flags, where
            changed = _seen(after) != _seen(before)
            verb = "drain_now" if action == "drain_now" else "drain"
            assert audit == ([verb] if changed else []), where
            assert not remembered, where
            if state == "down" and sched == "kube":
                assert "still NotReady" in said, where
        elif want == RESUMED:
            assert said == f"Resumed `{node}` in {' and '.join(after)} (by @ana).", where
            assert _in_service(case, after), where
            assert node in remembered, where
            assert audit == ["resume_confirmed" if action == "resume_anyway" else "resume"], where
        elif want == PARTIAL:
            assert not _in_service(case, after), where
            assert not remembered, where
            assert "not back in service" in said and "Resumed" not in said, where
            assert audit == ["resume_incomplete"], where
            if state == "cordon_taint":
                # The operator's cordon went (confirmed), their taint stays, named.
                assert raw is not None and not raw["spec"].get("unschedulable"), where
                assert f"stays tainted by someone else, not meowbot ({TAINT_TEXT})" in said, where
            else:
                assert "Slurm: resumed" in said, where
                assert "Kubernetes: nothing changed, still NotReady" in said, where
        else:  # pragma: no cover - every code is handled above
            raise AssertionError(want)
    finally:
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


def test_the_matrix_is_whole() -> None:
    """Every scheduler x state x action is a case (the size the README quotes)."""
    assert len(CASES) == len(SCHEDULERS) * len(STATES) * len(ACTIONS) == 112
