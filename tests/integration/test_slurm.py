"""The Slurm adapter against a real Slurm 22.05 with slurmrestd (scripts/testsvc/slurm.py).

The cluster has the local host and sixteen emulated nodes gpu-0001..gpu-0016, each a real
slurmd. Jobs submitted here are cancelled by the test that submits them. The error paths
(slurmrestd down, slow, answering 500 or 401) and the REST node update of newer API versions
run against a tiny local aiohttp server instead, so they need no cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import hostlist
import pytest
from aiohttp import web

from bot.backends.slurm import SlurmRest
from bot.errors import BackendError
from bot.models import JobState
from tests import slurm_cluster

GPU_NODES = [f"gpu-{i:04d}" for i in range(1, 17)]
DRAIN_NODE = "gpu-0016"  # jobs here take the lowest-numbered nodes first
REASON = "meowbot: xid79 gpu3"
TOKEN = "test-token"
STOP = web.AppKey("stop", asyncio.Event)


# ---------------------------------------------------------------- the real cluster


@pytest.fixture
def slurm_env() -> dict[str, str]:
    return slurm_cluster.slurm_env()


@pytest.fixture
async def slurm(slurm_env: dict[str, str]) -> AsyncIterator[SlurmRest]:
    adapter = slurm_cluster.slurm_rest(slurm_env)
    yield adapter
    await adapter.close()


def _cli(slurm_env: dict[str, str], *args: str, check: bool = True) -> str:
    return slurm_cluster.cli(slurm_env, *args, check=check)


@pytest.fixture
def train_job(slurm_env: dict[str, str]) -> Iterator[str]:
    out = _cli(
        slurm_env,
        "sbatch",
        "--parsable",
        "-N",
        "2",
        "-J",
        "train-llm",
        "-o",
        "/dev/null",
        "--chdir",
        "/",
        "--wrap",
        "sleep 120",
    )
    job_id = out.strip().split(";")[0]
    assert job_id.isdigit(), out
    try:
        yield job_id
    finally:
        _cli(slurm_env, "scancel", job_id, check=False)


async def test_api_version_detected(slurm: SlurmRest) -> None:
    api = await slurm.api()
    assert api.version.startswith("v0.0.")
    # Debian 12's Slurm is 22.05, whose newest REST API is v0.0.38, without node updates.
    assert api.version == "v0.0.38"
    assert api.node_update is False
    await slurm.ping()


async def test_nodes_listed_with_states(slurm: SlurmRest) -> None:
    nodes = await slurm.nodes()
    assert set(GPU_NODES) <= set(nodes)
    assert len(nodes) == len(GPU_NODES) + 1  # and the local host
    for node in nodes.values():
        assert node.state in {"idle", "mixed", "allocated"}, node
        assert node.state == node.state.lower()
        assert all(flag == flag.upper() for flag in node.flags)
    some = await slurm.nodes(["gpu-0003", "gpu-0004", "no-such-node"])
    assert set(some) == {"gpu-0003", "gpu-0004"}
    assert await slurm.nodes([]) == {}


async def _wait_running(slurm: SlurmRest, job_id: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = await slurm.job(job_id)
        if job is not None and job.state is JobState.RUNNING:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} did not start within {timeout_s} s: {job}")


async def test_the_previous_run_of_a_requeued_name_is_found_by_name(
    slurm: SlurmRest, slurm_env: dict[str, str]
) -> None:
    def submit(command: str) -> str:
        out = _cli(
            slurm_env,
            "sbatch",
            "--parsable",
            "-N",
            "1",
            "-J",
            "resume-llm",
            "-o",
            "/dev/null",
            "--chdir",
            "/",
            "--wrap",
            command,
        )
        return out.strip().split(";")[0]

    first = submit("sleep 1")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the first run ends (MinJobAge keeps it listed)
        done = await slurm.job(first)
        if done is not None and done.state not in (JobState.PENDING, JobState.RUNNING):
            break
        await asyncio.sleep(0.3)
    await asyncio.sleep(1.1)  # Slurm's times are whole seconds: the next run starts later
    second = submit("sleep 60")
    try:
        await _wait_running(slurm, second)
        job = await slurm.job(second)
        assert job is not None and job.prev_job_id is None
        previous = await slurm.previous_run(job)
        assert previous is not None and previous.job_id == first
        assert previous.name == "resume-llm" and previous.start < job.start
        earliest = await slurm.job(first)
        assert earliest is not None and await slurm.previous_run(earliest) is None
    finally:
        _cli(slurm_env, "scancel", second, check=False)


async def test_submitted_job_shows_up(
    slurm: SlurmRest, train_job: str, slurm_env: dict[str, str]
) -> None:
    await _wait_running(slurm, train_job)
    job = await slurm.job(train_job)
    assert job is not None
    assert (job.job_id, job.name, job.user, job.state) == (
        train_job,
        "train-llm",
        "root",
        JobState.RUNNING,
    )
    assert job.partition == "main"
    assert job.end is None
    assert job.start.tzinfo is not None
    assert abs(datetime.now(UTC) - job.start) < timedelta(minutes=5)
    # Expanded, and the same nodes as squeue's hostlist says.
    assert len(job.nodes) == 2 and "[" not in "".join(job.nodes)
    squeue = _cli(slurm_env, "squeue", "-h", "-j", train_job, "-o", "%N").strip()
    assert list(job.nodes) == hostlist.expand_hostlist(squeue)

    listed = {j.job_id: j for j in await slurm.jobs()}
    assert listed[train_job] == job
    assert train_job in {j.job_id for j in await slurm.jobs(user="root")}
    assert await slurm.jobs(user="someone-else") == []
    assert await slurm.job("99999999") is None

    nodes = await slurm.nodes(list(job.nodes))
    assert all(n.state in {"mixed", "allocated"} for n in nodes.values()), nodes


async def test_drain_reaches_slurm_and_resume_clears_it(
    slurm: SlurmRest, slurm_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.backends.slurm")
    before = datetime.now(UTC).replace(microsecond=0)
    try:
        await slurm.drain(DRAIN_NODE, REASON)
        node = (await slurm.nodes([DRAIN_NODE]))[DRAIN_NODE]
        assert node.draining and "DRAIN" in node.flags
        assert node.reason == REASON and node.reason_is_ours
        assert node.reason_set_by == "root"
        assert node.reason_changed_at is not None
        assert before - timedelta(seconds=2) <= node.reason_changed_at <= datetime.now(UTC)

        shown = _cli(slurm_env, "scontrol", "show", "node", DRAIN_NODE)
        assert f"Reason={REASON} [root@" in shown
        state = next(w for w in shown.split() if w.startswith("State="))
        assert "DRAIN" in state

        await slurm.resume(DRAIN_NODE)
        node = (await slurm.nodes([DRAIN_NODE]))[DRAIN_NODE]
        assert not node.draining and node.reason is None
        shown = _cli(slurm_env, "scontrol", "show", "node", DRAIN_NODE)
        assert "Reason=" not in shown and "DRAIN" not in shown
    finally:
        _cli(slurm_env, "scontrol", "update", f"nodename={DRAIN_NODE}", "state=resume", check=False)
    fallback = [r for r in caplog.records if "scontrol" in r.getMessage()]
    assert len(fallback) == 1, "the scontrol fallback is said once per adapter"


async def test_drain_now_sets_the_node_down_and_resume_returns_it(
    slurm: SlurmRest, slurm_env: dict[str, str]
) -> None:
    try:
        await slurm.drain(DRAIN_NODE, REASON, now=True)
        node = (await slurm.nodes([DRAIN_NODE]))[DRAIN_NODE]
        # Down, and drained too, so Slurm's ReturnToService cannot put it back by itself.
        assert node.down and node.out_of_service and node.draining
        assert node.reason == REASON and node.reason_is_ours
        state = next(
            w
            for w in _cli(slurm_env, "scontrol", "show", "node", DRAIN_NODE).split()
            if w.startswith("State=")
        )
        assert state.startswith("State=DOWN"), state
        await slurm.resume(DRAIN_NODE)
        node = (await slurm.nodes([DRAIN_NODE]))[DRAIN_NODE]
        assert not node.out_of_service and node.reason is None
    finally:
        _cli(slurm_env, "scontrol", "update", f"nodename={DRAIN_NODE}", "state=resume", check=False)


async def test_drain_of_an_unknown_node_is_a_sentence(slurm: SlurmRest) -> None:
    with pytest.raises(BackendError) as err:
        await slurm.drain("gpu-9999", REASON)
    assert err.value.backend == "Slurm"
    assert "Invalid node name" in err.value.sentence


async def test_bad_token_is_a_sentence(slurm_env: dict[str, str]) -> None:
    adapter = SlurmRest(slurm_env["SLURM_REST_URL"], token="not-a-jwt", user="root", timeout_s=5)
    try:
        with pytest.raises(BackendError) as err:
            await adapter.nodes()
        assert err.value.backend == "Slurm" and "SLURM_JWT" in err.value.sentence
    finally:
        await adapter.close()


# ---------------------------------------------------------------- a tiny local server

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class FakeRest:
    url: str
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def _serve(handler: Handler) -> AsyncIterator[FakeRest]:
    stop = asyncio.Event()
    fake = FakeRest(url="")

    async def record(request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        fake.requests.append((request.method, request.path, dict(request.headers), body))
        return await handler(request)

    app = web.Application()
    app[STOP] = stop
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        stop.set()
        await runner.cleanup()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _fails_in_time(adapter: SlurmRest, deadline_s: float) -> BackendError:
    started = time.monotonic()
    try:
        with pytest.raises(BackendError) as err:
            await adapter.nodes()
    finally:
        await adapter.close()
    elapsed = time.monotonic() - started
    assert elapsed < deadline_s + 0.5, f"took {elapsed:.2f} s with a {deadline_s} s deadline"
    assert err.value.backend == "Slurm"
    assert err.value.user_text().startswith("Slurm ")
    return err.value


async def test_slurmrestd_down_is_a_sentence_within_the_deadline() -> None:
    adapter = SlurmRest(
        f"http://127.0.0.1:{_closed_port()}", token=TOKEN, user="root", timeout_s=1.0
    )
    err = await _fails_in_time(adapter, 1.0)
    assert "cannot be reached" in err.sentence


async def test_slurmrestd_slow_is_a_sentence_within_the_deadline() -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(request.app[STOP].wait(), timeout=10)
        return web.json_response({})

    async with _serve(slow) as fake:
        adapter = SlurmRest(fake.url, token=TOKEN, user="root", timeout_s=1.0)
        err = await _fails_in_time(adapter, 1.0)
    assert "did not answer in time" in err.sentence


async def test_slurmrestd_500_is_a_sentence_within_the_deadline() -> None:
    async def broken(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500, text="Internal Server Error")

    async with _serve(broken) as fake:
        adapter = SlurmRest(fake.url, token=TOKEN, user="root", timeout_s=1.0)
        err = await _fails_in_time(adapter, 1.0)
    assert "JSON" in err.sentence


async def test_slurmrestd_500_with_its_errors_is_a_sentence() -> None:
    async def broken(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/openapi"):
            return web.json_response({"paths": _paths("v0.0.38", node_update=False)})
        return web.json_response(
            {
                "errors": [
                    {"error": "Unable to contact slurm controller (connect failure)", "errno": 1001}
                ],
                "nodes": [],
            },
            status=500,
        )

    async with _serve(broken) as fake:
        adapter = SlurmRest(fake.url, token=TOKEN, user="root", timeout_s=1.0)
        err = await _fails_in_time(adapter, 1.0)
    assert "Unable to contact slurm controller" in err.sentence


async def test_401_names_the_token_and_user() -> None:
    async def refuse(request: web.Request) -> web.StreamResponse:
        return web.Response(status=401, text="Authentication failure")

    async with _serve(refuse) as fake:
        adapter = SlurmRest(fake.url, token=TOKEN, user="root", timeout_s=1.0)
        err = await _fails_in_time(adapter, 1.0)
    assert "SLURM_JWT" in err.sentence and "SLURM_USER" in err.sentence


# ---------------------------------------------------------------- nothing bad is ever sent

BAD_NODES = ["gpu-1; rm -rf /", "gpu-1 OR 1=1", "gpu-1\nstate=resume", "../../etc", "-x", ""]
BAD_JOB_IDS = ["1 OR 1=1", "1; scancel --user=root", "../1", "1/../../nodes", "", "-1"]
BAD_REASONS = ["meowbot: x\nstate=resume", "x" * 201, "", "a\rb"]


async def test_bad_names_ids_and_reasons_are_refused_before_anything_is_sent() -> None:
    async def anything(request: web.Request) -> web.StreamResponse:
        return web.json_response({"paths": _paths("v0.0.41", node_update=True)})

    async with _serve(anything) as fake:
        # scontrol that cannot run: if a call got that far it would be a BackendError.
        adapter = SlurmRest(fake.url, token=TOKEN, user="root", scontrol="/nonexistent/scontrol")
        try:
            for name in BAD_NODES:
                with pytest.raises(ValueError, match="not a node name"):
                    await adapter.drain(name, REASON)
                with pytest.raises(ValueError, match="not a node name"):
                    await adapter.resume(name)
                with pytest.raises(ValueError, match="not a node name"):
                    await adapter.nodes(["gpu-0001", name])
            for job_id in BAD_JOB_IDS:
                # Not Slurm's id (another scheduler's, or a forgery): no such Slurm job, and
                # nothing asked of Slurm (below).
                assert await adapter.job(job_id) is None
            for reason in BAD_REASONS:
                with pytest.raises(ValueError, match="reason"):
                    await adapter.drain("gpu-0001", reason)
        finally:
            await adapter.close()
    assert fake.requests == []


async def test_bad_input_never_reaches_the_real_cluster(
    slurm: SlurmRest, slurm_env: dict[str, str]
) -> None:
    with pytest.raises(ValueError):
        await slurm.drain("gpu-0001; scontrol update nodename=gpu-0002 state=down", REASON)
    with pytest.raises(ValueError):
        await slurm.drain("gpu-0001", "meowbot: x\nnodename=gpu-0002 state=down")
    sinfo = _cli(slurm_env, "sinfo", "-h", "-N", "-n", "gpu-0001,gpu-0002", "-o", "%N %t")
    assert "drain" not in sinfo and "down" not in sinfo, sinfo
    # A one-line reason that looks like more scontrol arguments stays one literal reason.
    tricky = "meowbot: x nodename=gpu-0014 state=down \"q\" 'q' $(id) ;"
    try:
        await slurm.drain("gpu-0015", tricky)
        nodes = await slurm.nodes(["gpu-0014", "gpu-0015"])
        assert nodes["gpu-0015"].reason == tricky and nodes["gpu-0015"].draining
        assert nodes["gpu-0014"].state != "down" and not nodes["gpu-0014"].draining
    finally:
        await slurm.resume("gpu-0015")


# ---------------------------------------------------------------- newer API: REST node updates


def _paths(version: str, *, node_update: bool) -> dict[str, Any]:
    slash = "/" if version >= "v0.0.40" else ""
    node_ops: dict[str, Any] = {"get": {}, "post": {}, "delete": {}} if node_update else {"get": {}}
    return {
        "/openapi/v3": {"get": {}},
        f"/slurm/{version}/jobs{slash}": {"get": {}},
        f"/slurm/{version}/job/{{job_id}}": {"get": {}, "post": {}, "delete": {}},
        f"/slurm/{version}/nodes{slash}": {"get": {}},
        f"/slurm/{version}/node/{{node_name}}": node_ops,
        f"/slurm/{version}/ping{slash}": {"get": {}},
    }


async def test_newer_api_drains_over_rest() -> None:
    num = {"set": True, "infinite": False, "number": 1722009794}
    state: dict[str, Any] = {"state": ["IDLE"], "reason": ""}

    async def v41(request: web.Request) -> web.StreamResponse:
        if request.path == "/openapi/v3":
            return web.json_response(
                {
                    "paths": {
                        **_paths("v0.0.38", node_update=False),
                        **_paths("v0.0.41", node_update=True),
                    }
                }
            )
        if request.method == "POST" and request.path == "/slurm/v0.0.41/node/gpu-0001":
            body = await request.json()
            state["state"] = ["IDLE", "DRAIN"] if body["state"] == ["DRAIN"] else ["IDLE"]
            state["reason"] = body.get("reason", "")
            return web.json_response({"errors": [], "warnings": []})
        if request.path == "/slurm/v0.0.41/nodes/":
            return web.json_response(
                {
                    "nodes": [
                        {
                            "name": "gpu-0001",
                            **state,
                            "reason_changed_at": num,
                            "reason_set_by_user": "root",
                        }
                    ],
                    "errors": [],
                }
            )
        return web.json_response({"errors": [{"error": "not here"}]}, status=404)

    async with _serve(v41) as fake:
        adapter = SlurmRest(fake.url, token=TOKEN, user="meowbot", scontrol="/nonexistent/x")
        try:
            api = await adapter.api()
            assert (api.version, api.node_update) == ("v0.0.41", True)
            await adapter.drain("gpu-0001", REASON)
            node = (await adapter.nodes(["gpu-0001"]))["gpu-0001"]
            assert node.draining and node.reason == REASON
            assert node.reason_changed_at == datetime.fromtimestamp(1722009794, UTC)
            await adapter.resume("gpu-0001")
            assert not (await adapter.nodes(["gpu-0001"]))["gpu-0001"].draining
        finally:
            await adapter.close()
    posts = [(path, body) for method, path, _, body in fake.requests if method == "POST"]
    assert posts == [
        ("/slurm/v0.0.41/node/gpu-0001", {"state": ["DRAIN"], "reason": REASON}),
        ("/slurm/v0.0.41/node/gpu-0001", {"state": ["RESUME"]}),
    ]
    for _, _, headers, _ in fake.requests:
        assert headers["X-SLURM-USER-NAME"] == "meowbot"
        assert headers["X-SLURM-USER-TOKEN"] == TOKEN
