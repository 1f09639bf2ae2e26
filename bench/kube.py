"""/node-health and App Home over Kubernetes nodes in a real API server: run by hand.

Starts kube-apiserver and etcd as the tests do (scripts/testsvc/kube.py: the cached binary,
or a build of about 3.5 minutes the first time), creates 256 and then 4,096 GPU nodes through
the API (GPU Feature Discovery labels, a Ready condition, one node in 16 cordoned by an
operator, one in 32 drained by meowbot) and a training pod on one node in four (a batch Job
each, half of them ana's), then answers over the simulated fleet's metrics with the Kubernetes
adapter as the scheduler:

- /node-health of one node, and of every node (a hostlist: its summary reads no scheduler),
- App Home (the fleet at a glance, and ana's jobs),
- a drain's look-up of the jobs on one node, every job (what the alerts read), and the
  scheduler state of every node,

printing each answer's API calls (they must not grow with the node count) and its time.

    nice -n 15 python bench/kube.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.app import sim_triage  # noqa: E402
from bot.backends.kubernetes import KubernetesScheduler  # noqa: E402
from bot.backends.kubernetes_jobs import UserRule  # noqa: E402
from bot.backends.sim.fleet import SimFleet  # noqa: E402
from bot.triage import service  # noqa: E402
from bot.triage.service import FleetSummary, NodeReport  # noqa: E402
from scripts.testsvc import kube as kube_service  # noqa: E402
from tests.kube_api import KubeApi, wait_ready  # noqa: E402

SIZES = (256, 4096)
RUNS = 3


def _make_node(api: KubeApi, i: int, name: str) -> None:
    taints = [{"key": "nvidia.com/gpu-health", "value": "xid48", "effect": "NoSchedule"}]
    operator = i % 16 == 5
    api.node(
        name,
        rack=f"r{i // 32:03d}",
        labels={"network.topology.kubernetes.io/switch": f"leaf-{i // 16:03d}"},
        taints=taints if operator else None,
        unschedulable=operator,
    )
    if i % 32 == 7:
        api.merge(
            f"/api/v1/nodes/{name}",
            {
                "metadata": {
                    "annotations": {
                        "meowbot.io/drain": '{"reason":"meowbot: xid79 gpu3","by":"meowbot",'
                        '"at":"2026-12-01T00:00:00+00:00","cordoned":true}'
                    }
                },
                "spec": {
                    "unschedulable": True,
                    "taints": [
                        {"key": "meowbot.io/drain", "value": "xid79-gpu3", "effect": "NoSchedule"}
                    ],
                },
            },
        )
    if i % 4 == 0:
        ns = "u-ana" if i % 8 == 0 else "u-bo"
        job = api.batch_job(ns, f"train-{i}")
        api.pod(ns, f"train-{i}-0", name, owner=job)


async def _timed(kube: KubernetesScheduler, answer: Any) -> tuple[float, int, Any]:
    times, calls, result = [], 0, None
    for _ in range(RUNS):
        before = kube.calls
        started = time.perf_counter()
        result = await answer()
        times.append(time.perf_counter() - started)
        calls = kube.calls - before
    return statistics.median(times), calls, result


async def _measure(n: int, kubeconfig: str) -> None:
    fleet = SimFleet(n, seed=1)
    kube = KubernetesScheduler(kubeconfig=kubeconfig, user_rule=UserRule("namespace", "u-"))
    triage = sim_triage(fleet, scheduler=kube)
    names = list(fleet.nodes)
    try:
        one_t, one_c, one = await _timed(kube, lambda: service.node_health(triage, names[7]))
        assert isinstance(one, NodeReport), one
        all_t, all_c, every = await _timed(
            kube, lambda: service.node_health(triage, f"gpu-[0001-{n:04d}]")
        )
        assert isinstance(every, FleetSummary), every

        async def home() -> Any:
            return await asyncio.gather(
                service.fleet_glance(triage), service.user_jobs(triage, "ana")
            )

        home_t, home_c, (_, mine) = await _timed(kube, home)
        on_t, on_c, on_node = await _timed(kube, lambda: kube.jobs_on(names[0]))
        all_jobs_t, all_jobs_c, every_job = await _timed(kube, kube.jobs)
        states_t, states_c, states = await _timed(kube, lambda: kube.nodes(names))
    finally:
        await kube.close()
    print(f"{n:>5} Kubernetes nodes:")
    print(f"  /node-health {names[7]:<18} {one_c:>2} API calls, {one_t * 1000:7.0f} ms")
    print(
        f"  /node-health gpu-[0001-{n:04d}]   {all_c:>2} API calls, {all_t * 1000:7.0f} ms "
        f"({len(every.nodes) if hasattr(every, 'nodes') else n} nodes)"
    )
    print(
        f"  App Home (glance + ana's jobs) {home_c:>2} API calls, {home_t * 1000:7.0f} ms "
        f"({len(mine.jobs)} jobs of ana)"
    )
    print(
        f"  jobs on one node (a drain)     {on_c:>2} API calls, {on_t * 1000:7.0f} ms "
        f"({len(on_node)} job)"
    )
    print(
        f"  every job (the alerts' read)   {all_jobs_c:>2} API calls, {all_jobs_t * 1000:7.0f} ms "
        f"({len(every_job)} jobs, their owners read a kind at a time)"
    )
    drained = sum(1 for s in states.values() if s.draining)
    print(
        f"  state of every node            {states_c:>2} API calls, {states_t * 1000:7.0f} ms "
        f"({len(states)} nodes, {drained} drained or cordoned)"
    )


async def _bench(env: dict[str, str]) -> None:
    wait_ready(env["MEOWBOT_TEST_KUBE_STATUS"])
    api = KubeApi(
        env["MEOWBOT_TEST_KUBE_URL"], env["MEOWBOT_TEST_KUBE_CA"], env["MEOWBOT_TEST_KUBE_TOKEN"]
    )
    for ns in ("u-ana", "u-bo"):
        api.namespace(ns)
    made = 0
    for n in SIZES:
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: _make_node(api, i, f"gpu-{i + 1:04d}"), range(made, n)))
        print(f"(made nodes {made + 1}..{n} in {time.perf_counter() - started:.0f} s)")
        made = n
        await _measure(n, env["MEOWBOT_TEST_KUBECONFIG"])


async def main() -> None:
    # Under `make bench` the services are up: the API server of scripts/testenv.py is used.
    if "MEOWBOT_TEST_KUBE_URL" in os.environ:
        await _bench(dict(os.environ))
        return
    with (
        tempfile.TemporaryDirectory(prefix="meowbot-bench-kube-") as tmp,
        kube_service.start(Path(tmp), {}) as env,
    ):
        await _bench(env)


if __name__ == "__main__":
    asyncio.run(main())
