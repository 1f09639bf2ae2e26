"""The pure parsing and validation of the Slurm adapter, on recorded shapes of both API families.

v0.0.38 shapes were recorded from Debian's Slurm 22.05.8 slurmrestd (the test cluster of
scripts/testsvc/slurm.py), trimmed to the fields the adapter reads. v0.0.40/v0.0.41 shapes
follow Slurm 23.11/24.05 responses as published (lists for states, `{"set", "infinite",
"number"}` objects for numbers and times).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.backends.slurm import (
    check_job_id,
    check_node_name,
    expand_nodes,
    hostlist_size,
    parse_gpus_per_node,
    parse_job,
    parse_job_state,
    parse_node,
    parse_node_state,
    parse_number,
    parse_openapi,
    parse_time,
    slurm_errors,
)
from bot.drain_reason import check as check_reason
from bot.errors import BackendError
from bot.models import JobState

# ---------------------------------------------------------------- recorded: 22.05, v0.0.38

NODE_V38_DRAINING = {
    "name": "gpu-0002",
    "hostname": "gpu-0002",
    "address": "127.0.0.1",
    "state": "mixed",
    "state_flags": ["DRAIN"],
    "gres": "gpu:8",
    "gres_used": "gpu:2",
    "reason": "meowbot: test x",
    "reason_changed_at": 1796230233,
    "reason_set_by_user": "root",
}
NODE_V38_IDLE = {
    "name": "gpu-0003",
    "state": "idle",
    "state_flags": [],
    "reason": "",
    "reason_changed_at": 0,
    "reason_set_by_user": None,
}
JOB_V38_RUNNING = {
    "job_id": 1,
    "name": "train-llm",
    "user_name": "root",
    "user_id": 0,
    "job_state": "RUNNING",
    "nodes": "gpu-[0001-0002]",
    "node_count": 2,
    "partition": "main",
    "submit_time": 1796230202,
    "start_time": 1796230202,
    "end_time": 1827766202,  # start + time limit: in the future while running
    "tres_per_node": "gres:gpu:2",
    "tres_alloc_str": "cpu=2,node=2,billing=2",
}
JOB_V38_PENDING = {
    "job_id": 4,
    "name": "pend",
    "user_name": "root",
    "job_state": "PENDING",
    "nodes": "",
    "partition": "main",
    "submit_time": 1796230857,
    "start_time": 0,
    "end_time": 0,
    "tres_per_node": "",
    "state_reason": "JobHeldUser",
}
JOB_V38_COMPLETED = {
    "job_id": 3,
    "name": "nojwt",
    "user_name": "root",
    "job_state": "COMPLETED",
    "nodes": "gpu-[0001-0002]",
    "partition": "main",
    "submit_time": 1796230208,
    "start_time": 1796230208,
    "end_time": 1796230210,
    "tres_per_node": "gres:gpu:2",
}
_V38_ENDPOINTS: dict[str, dict[str, Any]] = {
    "diag": {"get": {}},
    "ping": {"get": {}},
    "jobs": {"get": {}},
    "job/{job_id}": {"get": {}, "post": {}, "delete": {}},
    "job/submit": {"post": {}},
    "nodes": {"get": {}},
    "node/{node_name}": {"get": {}},
    "partitions": {"get": {}},
}
OPENAPI_V38_PATHS: dict[str, Any] = {
    "/openapi": {"get": {}},
    "/openapi/v3": {"get": {}},
    **{
        f"/slurm/{v}/{ep}": ops
        for v in ("v0.0.36", "v0.0.37", "v0.0.38")
        for ep, ops in _V38_ENDPOINTS.items()
    },
}
ERR_V38_UNKNOWN_JOB = {
    "errors": [
        {
            "description": "Unable to find JobId=999",
            "error_number": 2017,
            "error": "Invalid job id specified",
            "source": "slurm_load_job",
        }
    ],
    "jobs": [],
}
ERR_V38_UNKNOWN_NODE = {"errors": [{"error": "Invalid node name specified", "errno": 2018}]}

# ---------------------------------------------------------------- newer: v0.0.40 / v0.0.41


def _n(number: int, *, is_set: bool = True, infinite: bool = False) -> dict[str, object]:
    return {"set": is_set, "infinite": infinite, "number": number}


NODE_V41_DRAINED = {
    "name": "gpu-0009",
    "hostname": "gpu-0009",
    "state": ["IDLE", "DRAIN"],
    "reason": "meowbot: xid79 gpu3",
    "reason_changed_at": _n(1722009794),
    "reason_set_by_user": "slurm",
    "resume_after": _n(0),
}
NODE_V41_DOWN = {
    "name": "gpu-0010",
    "state": ["DOWN", "NOT_RESPONDING"],
    "reason": "Not responding",
    "reason_changed_at": _n(1762337299),
    "reason_set_by_user": "slurm",
}
NODE_V41_IDLE = {
    "name": "gpu-0011",
    "state": ["IDLE"],
    "reason": "",
    "reason_changed_at": _n(0),
    "reason_set_by_user": "",
}
JOB_V41_RUNNING = {
    "job_id": 481516,
    "name": "distributed-training",
    "user_name": "alice",
    "job_state": ["RUNNING"],
    "partition": "gpu",
    "nodes": "gpu-node[014-029]",
    "node_count": _n(16),
    "submit_time": _n(1722009000),
    "start_time": _n(1722009794),
    "end_time": _n(1722096194),
    "tres_per_node": "",
    "tres_alloc_str": "cpu=1536,mem=184320G,node=16,billing=1536,gres/gpu=128",
}
JOB_V41_TIMEOUT = {
    "job_id": 481517,
    "name": "eval",
    "user_name": "bob",
    "job_state": ["TIMEOUT"],
    "partition": "gpu",
    "nodes": ["gpu-node[001-002]", "gpu-node010"],
    "submit_time": _n(1722000000),
    "start_time": _n(1722000100),
    "end_time": _n(1722003700),
    "tres_per_node": "gres/gpu:h100:4",
}
OPENAPI_V41_PATHS: dict[str, Any] = {
    "/openapi/v3": {"get": {}},
    "/slurm/v0.0.40/jobs/": {"get": {}},
    "/slurm/v0.0.40/job/{job_id}": {"get": {}, "post": {}, "delete": {}},
    "/slurm/v0.0.40/nodes/": {"get": {}, "post": {}},
    "/slurm/v0.0.40/node/{node_name}": {"get": {}, "post": {}, "delete": {}},
    "/slurm/v0.0.40/ping/": {"get": {}},
    "/slurm/v0.0.41/jobs/": {"get": {}},
    "/slurm/v0.0.41/job/{job_id}": {"get": {}, "post": {}, "delete": {}},
    "/slurm/v0.0.41/nodes/": {"get": {}, "post": {}},
    "/slurm/v0.0.41/node/{node_name}": {"get": {}, "post": {}, "delete": {}},
    "/slurm/v0.0.41/ping/": {"get": {}},
    "/slurmdb/v0.0.42/jobs/": {"get": {}},  # not the slurm/ family: ignored
}


# ---------------------------------------------------------------- API detection


def test_openapi_v38_picks_the_newest_and_has_no_node_update() -> None:
    api = parse_openapi({"paths": OPENAPI_V38_PATHS})
    assert api.version == "v0.0.38"
    assert api.nodes_path == "/slurm/v0.0.38/nodes"
    assert api.jobs_path == "/slurm/v0.0.38/jobs"
    assert api.job_path == "/slurm/v0.0.38/job/{job_id}"
    assert api.node_path == "/slurm/v0.0.38/node/{node_name}"
    assert api.ping_path == "/slurm/v0.0.38/ping"
    assert api.node_update is False


def test_openapi_newer_keeps_trailing_slashes_and_has_node_update() -> None:
    api = parse_openapi({"paths": OPENAPI_V41_PATHS})
    assert api.version == "v0.0.41"
    assert api.version_tuple == (0, 0, 41)
    assert api.jobs_path == "/slurm/v0.0.41/jobs/"
    assert api.nodes_path == "/slurm/v0.0.41/nodes/"
    assert api.node_path == "/slurm/v0.0.41/node/{node_name}"
    assert api.node_update is True


def test_openapi_version_compare_is_numeric() -> None:
    paths: dict[str, Any] = {
        f"/slurm/{v}/{ep}": {"get": {}}
        for v in ("v0.0.9", "v0.0.10")
        for ep in ("jobs", "nodes", "job/{job_id}")
    }
    assert parse_openapi({"paths": paths}).version == "v0.0.10"


@pytest.mark.parametrize("spec", [{}, {"paths": {}}, {"paths": {"/slurmdb/v0.0.38/jobs": {}}}, []])
def test_openapi_without_slurm_api_is_a_sentence(spec: object) -> None:
    with pytest.raises(BackendError) as err:
        parse_openapi(spec)
    assert err.value.backend == "Slurm"


# ---------------------------------------------------------------- numbers and times


def test_numbers_in_both_shapes() -> None:
    assert parse_number(5) == 5
    assert parse_number(_n(7)) == 7
    assert parse_number(_n(7, is_set=False)) is None
    assert parse_number(_n(0, infinite=True)) is None
    assert parse_number(None) is None
    assert parse_number(True) is None


def test_times_are_utc_and_zero_is_unset() -> None:
    assert parse_time(1796230233) == datetime(2026, 12, 2, 16, 50, 33, tzinfo=UTC)
    assert parse_time(_n(1722009794)) == datetime.fromtimestamp(1722009794, UTC)
    assert parse_time(0) is None
    assert parse_time(_n(0)) is None
    assert parse_time(_n(5, infinite=True)) is None
    t = parse_time(_n(1722009794))
    assert t is not None and t.tzinfo is not None


# ---------------------------------------------------------------- nodes


def test_node_state_v38_base_and_flags() -> None:
    assert parse_node_state(NODE_V38_DRAINING) == ("mixed", ("DRAIN",))
    assert parse_node_state(NODE_V38_IDLE) == ("idle", ())


def test_node_state_v41_list() -> None:
    assert parse_node_state(NODE_V41_DRAINED) == ("idle", ("DRAIN",))
    assert parse_node_state(NODE_V41_DOWN) == ("down", ("NOT_RESPONDING",))
    assert parse_node_state({"state": ["DRAIN", "MIXED"]}) == ("mixed", ("DRAIN",))
    assert parse_node_state({}) == ("unknown", ())


def test_node_v38() -> None:
    node = parse_node(NODE_V38_DRAINING)
    assert node.name == "gpu-0002"
    assert node.state == "mixed" and node.flags == ("DRAIN",) and node.draining
    assert node.reason == "meowbot: test x" and node.reason_is_ours
    assert node.reason_set_by == "root"
    assert node.reason_changed_at == datetime.fromtimestamp(1796230233, UTC)
    idle = parse_node(NODE_V38_IDLE)
    assert (idle.reason, idle.reason_set_by, idle.reason_changed_at) == (None, None, None)
    assert not idle.draining


def test_node_v41() -> None:
    node = parse_node(NODE_V41_DRAINED)
    assert node.state == "idle" and node.draining and node.reason_is_ours
    assert node.reason_changed_at == datetime.fromtimestamp(1722009794, UTC)
    idle = parse_node(NODE_V41_IDLE)
    assert idle.reason is None and idle.reason_set_by is None and idle.reason_changed_at is None


# ---------------------------------------------------------------- jobs


def test_job_v38_running() -> None:
    job = parse_job(JOB_V38_RUNNING)
    assert job.job_id == "1" and job.name == "train-llm" and job.user == "root"
    assert job.state is JobState.RUNNING
    assert job.nodes == ("gpu-0001", "gpu-0002")
    assert job.start == datetime.fromtimestamp(1796230202, UTC)
    assert job.end is None  # a running job's end_time is its limit, not an end
    assert job.partition == "main" and job.gpus_per_node == 2


def test_job_v38_pending_starts_at_submit() -> None:
    job = parse_job(JOB_V38_PENDING)
    assert job.state is JobState.PENDING and job.nodes == ()
    assert job.start == datetime.fromtimestamp(1796230857, UTC) and job.end is None


def test_job_v38_completed_has_an_end() -> None:
    job = parse_job(JOB_V38_COMPLETED)
    assert job.state is JobState.COMPLETED
    assert job.end == datetime.fromtimestamp(1796230210, UTC)


def test_job_v41_running() -> None:
    job = parse_job(JOB_V41_RUNNING)
    assert job.state is JobState.RUNNING and job.user == "alice"
    assert len(job.nodes) == 16 and job.nodes[0] == "gpu-node014" and job.nodes[-1] == "gpu-node029"
    assert job.start == datetime.fromtimestamp(1722009794, UTC)
    assert job.gpus_per_node == 8  # gres/gpu=128 over 16 nodes


def test_job_v41_node_list_as_list_and_timeout() -> None:
    job = parse_job(JOB_V41_TIMEOUT)
    assert job.state is JobState.TIMEOUT
    assert job.nodes == ("gpu-node001", "gpu-node002", "gpu-node010")
    assert job.end == datetime.fromtimestamp(1722003700, UTC)
    assert job.gpus_per_node == 4


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("RUNNING", JobState.RUNNING),
        (["RUNNING", "COMPLETING"], JobState.RUNNING),
        ("COMPLETING", JobState.RUNNING),
        (["PENDING", "REQUEUED"], JobState.PENDING),
        ("NODE_FAIL", JobState.FAILED),
        (["OUT_OF_MEMORY"], JobState.FAILED),
        ("CANCELLED", JobState.CANCELLED),
        (["COMPLETED"], JobState.COMPLETED),
        ("DEADLINE", JobState.TIMEOUT),
    ],
)
def test_job_states(raw: object, state: JobState) -> None:
    assert parse_job_state(raw) is state


def test_gpus_per_node_spellings() -> None:
    assert parse_gpus_per_node({"tres_per_node": "gres:gpu:2"}, 1) == 2
    assert parse_gpus_per_node({"tres_per_node": "gres/gpu:a100:4"}, 1) == 4
    assert parse_gpus_per_node({"tres_per_node": "gres/gpu=8"}, 1) == 8
    assert parse_gpus_per_node({"tres_alloc_str": "cpu=4,gres/gpu=16"}, 2) == 8
    assert parse_gpus_per_node({"tres_per_node": "", "tres_alloc_str": "cpu=2"}, 2) == 0


# ---------------------------------------------------------------- hostlists and the cap


def test_hostlist_size_without_expanding() -> None:
    assert hostlist_size("gpu-[0001-0064,0100]") == 65
    assert hostlist_size("a[1-2]b[1-3],c") == 7
    assert hostlist_size("n[1-1000000000]") == 1_000_000_000
    with pytest.raises(ValueError):
        hostlist_size("gpu-[1-")
    for bad in ("gpu-[5-1]", "gpu-[1-10,5-1]", "gpu-1]"):
        with pytest.raises(ValueError):
            hostlist_size(bad)


def test_expand_nodes_caps_the_size() -> None:
    assert expand_nodes("gpu-[0001-0003]") == ("gpu-0001", "gpu-0002", "gpu-0003")
    assert expand_nodes(["a[1-2]", "b"]) == ("a1", "a2", "b")
    assert expand_nodes("") == () and expand_nodes(None) == ()
    assert len(expand_nodes("n[1-100000]")) == 100_000
    for huge in ("n[1-100001]", "a[1-1000]b[1-1000]", ",".join(f"p{i}[1-60000]" for i in range(3))):
        with pytest.raises(BackendError) as err:
            expand_nodes(huge)
        assert err.value.backend == "Slurm" and "100,000" in err.value.sentence
    with pytest.raises(BackendError):
        expand_nodes("gpu-[x-y]")


# ---------------------------------------------------------------- errors in answers


def test_slurm_errors_both_spellings() -> None:
    assert slurm_errors(ERR_V38_UNKNOWN_JOB) == [
        (2017, "Unable to find JobId=999: Invalid job id specified")
    ]
    assert slurm_errors(ERR_V38_UNKNOWN_NODE) == [(2018, "Invalid node name specified")]
    assert slurm_errors({"errors": []}) == [] and slurm_errors(None) == []


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("name", ["gpu-0001", "vm", "node.rack1_a", "a" * 63, "0gpu"])
def test_good_node_names(name: str) -> None:
    assert check_node_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "gpu-1; rm -rf /",
        "gpu-1 OR 1=1",
        "gpu-1\nstate=down",
        "-gpu",
        ".hidden",
        "../etc/passwd",
        "gpu-[0001-0002]",
        "a" * 64,
        "",
        "gpu 1",
        "gpu-1$(id)",
        "gpu-1`id`",
        "gpu-1 reason=x",
        "gpü-1",
    ],
)
def test_bad_node_names(name: str) -> None:
    with pytest.raises(ValueError, match="is not a node name"):
        check_node_name(name)


@pytest.mark.parametrize("job_id", ["1", "123456", " 42 "])
def test_good_job_ids(job_id: str) -> None:
    assert check_job_id(job_id) == job_id.strip()


@pytest.mark.parametrize(
    "job_id", ["1 OR 1=1", "1; scancel --user=root", "../1", "-1", "", "1e3", "12_3", "١٢", "1/2"]
)
def test_bad_job_ids(job_id: str) -> None:
    with pytest.raises(ValueError, match="digits only"):
        check_job_id(job_id)


def test_reasons() -> None:
    assert check_reason("meowbot: xid79 gpu3") == "meowbot: xid79 gpu3"
    for bad in ("meowbot: x\nstate=resume", "a\rb", "x" * 201, "", "   ", "a\x00b", "a\x1bb"):
        with pytest.raises(ValueError):
            check_reason(bad)
