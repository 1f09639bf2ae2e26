"""The pure halves of the Kubernetes adapter: Node JSON to scheduler state, the drain and
resume patches, pods and owner chains to jobs, and Slurm's and Kubernetes' views merged.
(The adapter itself is tested against a real API server: tests/integration/test_kubernetes.py.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.backends import kubernetes_nodes as kn
from bot.backends.both_schedulers import merge
from bot.backends.kubernetes_jobs import Owner, UserRule, jobs_of, parse_job_id, top_owner
from bot.models import JobState
from bot.ports import SchedulerNode

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
REASON = "meowbot: ecc_dbe gpu2 by @ana"


def _node(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "resourceVersion": "7", "annotations": {}},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _apply(node: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Enough of RFC 6902 for the patches built here (add, remove, test)."""
    out = json.loads(json.dumps(node))
    for op in patch:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target = out
        for key in parents:
            target = target[key]
        if op["op"] == "test":
            assert target[last] == op["value"]
        elif op["op"] == "add":
            target[last] = op["value"]
        elif op["op"] == "remove":
            del target[last]
    return out


def test_drain_then_resume_round_trip_leaves_the_node_as_it_was() -> None:
    theirs = {"key": "nvidia.com/gpu-health", "value": "bad", "effect": "NoExecute"}
    node = _node(taints=[theirs])
    patch = kn.drain_patch(node, REASON, AT)
    assert patch is not None and patch[0]["op"] == "test"
    drained = _apply(node, patch)
    parsed = kn.parse_node(drained)
    assert parsed.draining and parsed.reason_is_ours and parsed.reason_set_by == "ana"
    assert parsed.reason == f"{REASON} (also taints: nvidia.com/gpu-health=bad:NoExecute)"
    assert kn.drain_patch(drained, REASON, AT) is None  # nothing to do twice
    resumed = _apply(drained, kn.resume_patch(drained) or [])
    assert resumed["spec"] == {"taints": [theirs], "unschedulable": False}
    assert resumed["metadata"]["annotations"] == {}
    assert kn.resume_patch(resumed) is None


def test_a_cordon_that_was_there_stays_after_resume() -> None:
    node = _node(unschedulable=True)
    assert kn.parse_node(node).reason == "cordoned"
    drained = _apply(node, kn.drain_patch(node, REASON, AT) or [])
    # A second drain (another cause) still knows the cordon was not meowbot's.
    again = _apply(drained, kn.drain_patch(drained, "meowbot: xid79 gpu1", AT) or [])
    assert json.loads(again["metadata"]["annotations"][kn.KEY])["cordoned"] is False
    resumed = _apply(again, kn.resume_patch(again) or [])
    assert resumed["spec"]["unschedulable"] is True and resumed["spec"]["taints"] == []


def test_the_cordon_left_is_read_as_someone_elses_and_a_confirmed_resume_clears_it() -> None:
    theirs = {"key": "nvsentinel", "value": "xid79", "effect": "NoSchedule"}
    node = _node(unschedulable=True, taints=[theirs])
    drained = _apply(node, kn.drain_patch(node, REASON, AT) or [])
    assert kn.parse_node(drained).others_cordon  # meowbot found the cordon there
    resumed = _apply(drained, kn.resume_patch(drained) or [])
    parsed = kn.parse_node(resumed)
    assert parsed.others_cordon and parsed.others_taints == ("nvsentinel=xid79:NoSchedule",)
    # Nothing of meowbot's left: only a person's confirmation uncordons, and the taint stays.
    assert kn.resume_patch(resumed) is None
    forced = _apply(resumed, kn.resume_patch(resumed, force=True) or [])
    assert forced["spec"] == {"taints": [theirs], "unschedulable": False}
    assert not kn.parse_node(forced).others_cordon
    assert kn.resume_patch(forced, force=True) is None  # nothing to take back: no write


def test_meowbots_own_cordon_is_not_someone_elses() -> None:
    drained = _apply(_node(), kn.drain_patch(_node(), REASON, AT) or [])
    parsed = kn.parse_node(drained)
    assert not parsed.others_cordon and parsed.others_taints == ()


@pytest.mark.parametrize(
    ("ready", "state", "flags"),
    [("True", "idle", ()), ("False", "down", ()), ("Unknown", "down", ("NOT_RESPONDING",))],
)
def test_ready_condition_is_the_state(ready: str, state: str, flags: tuple[str, ...]) -> None:
    node = _node()
    node["status"]["conditions"][0]["status"] = ready
    parsed = kn.parse_node(node)
    assert (parsed.state, parsed.flags) == (state, flags)


def test_taint_values_are_what_kubernetes_takes() -> None:
    assert kn.taint_value("meowbot: xid79 gpu3 by @ana") == "xid79-gpu3"
    assert kn.taint_value("meowbot: " + "x" * 100) == "x" * 63
    assert kn.taint_value("meowbot: …") == "drained"
    assert kn.by_whom("meowbot: alert") == "meowbot"


def _pod(name: str, node: str, owner: Owner | None, phase: str = "Running") -> dict[str, Any]:
    refs = (
        [
            {
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "controller": True,
            }
        ]
        if owner
        else []
    )
    return {
        "metadata": {"name": name, "namespace": "u-ana", "ownerReferences": refs},
        "spec": {
            "nodeName": node,
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}],
        },
        "status": {"phase": phase, "startTime": "2026-12-01T10:00:00Z"},
    }


def test_pods_group_under_the_top_of_their_owner_chain() -> None:
    job = Owner("u-ana", "batch/v1", "Job", "llm-workers-0")
    jobset = Owner("u-ana", "jobset.x-k8s.io/v1alpha2", "JobSet", "llm")
    parents = {job: jobset}
    assert top_owner(job, parents.get) == jobset
    looped = {job: jobset, jobset: job}
    assert top_owner(job, looped.get) == jobset  # a loop ends where it would repeat
    pods = [
        _pod("a", "n1", job),
        _pod("b", "n1", job),
        _pod("c", "n2", job, phase="Pending"),
        _pod("d", "n3", None, phase="Succeeded"),
    ]
    jobs = jobs_of(pods, {job: jobset}, UserRule("namespace", "u-"))
    assert len(jobs) == 1
    (llm,) = jobs
    assert llm.job_id == "u-ana/jobset/llm" and llm.user == "ana"
    assert llm.nodes == ("n1", "n2") and llm.gpus_per_node == 8
    assert llm.state is JobState.RUNNING and llm.start == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert parse_job_id(llm.job_id) == ("u-ana", "jobset", "llm")
    assert parse_job_id("1234") is None


def test_user_rule_is_a_namespace_or_a_label() -> None:
    assert UserRule.parse("label:team").selector_for("ana") == "team=ana"
    assert UserRule.parse("namespace", "u-").namespace_of("ana") == "u-ana"
    with pytest.raises(ValueError, match="neither"):
        UserRule.parse("annotation:x")


def _sn(
    flags: tuple[str, ...] = (), reason: str | None = None, state: str = "idle"
) -> SchedulerNode:
    return SchedulerNode(name="gpu-1", state=state, flags=flags, reason=reason)


def test_merged_views_agree_or_say_how_they_differ() -> None:
    both = merge("gpu-1", _sn(("DRAIN",), REASON), _sn(("DRAIN",), REASON))
    assert both.reason == REASON and both.draining
    assert merge("gpu-1", _sn(), _sn()).reason is None
    differ = merge("gpu-1", _sn(), _sn(("DRAIN",), REASON))
    assert differ.draining and differ.reason_is_ours
    assert differ.reason == f"{REASON} [differs: Slurm in service, Kubernetes drained ({REASON})]"
    theirs = merge("gpu-1", _sn(("DRAIN",), "disk swap"), _sn())
    assert not theirs.reason_is_ours
    assert theirs.reason == "differs: Slurm drained (disk swap), Kubernetes in service"
    down = merge("gpu-1", _sn(state="down"), _sn())
    assert down.down
