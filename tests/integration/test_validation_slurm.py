"""A drained node's validation on the real test Slurm: the reservation, the job in it on
that node, the step files, and the node resumed on a pass or left drained with the failing
step as its reason. Stand-ins for `dcgmi` and `all_reduce_perf` print recorded outputs of the
real tools (tests/data/validation/)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.backends.slurm import SlurmRest
from bot.backends.slurm_validation import SlurmTester, reservation_name
from bot.validation.config import StepConfig, ValidationConfig
from bot.validation.run import StepState
from bot.validation.service import Validation, refusal, validate
from tests import slurm_cluster

NODE = "gpu-0008"
DATA = Path(__file__).resolve().parents[1] / "data" / "validation"
STEPS = (
    StepConfig(
        name="dcgm", command=("dcgmi", "diag", "-r", "2", "-j"), timeout_s=30, parser="dcgm_diag"
    ),
    StepConfig(
        name="all-reduce",
        command=("all_reduce_perf", "-b", "16G", "-e", "16G", "-g", "8"),
        timeout_s=30,
        parser="nccl_all_reduce",
        params={"min_bus_bw_gbs": {"H200": 470}},
    ),
)


@pytest.fixture
def slurm_env() -> dict[str, str]:
    return slurm_cluster.slurm_env()


def _cli(env: dict[str, str], *args: str) -> str:
    return slurm_cluster.cli(env, *args)


@pytest.fixture
async def slurm(slurm_env: dict[str, str]) -> AsyncIterator[SlurmRest]:
    adapter = slurm_cluster.slurm_rest(slurm_env)
    await adapter.drain(NODE, "meowbot: xid79 gpu3")
    yield adapter
    _cli(slurm_env, "scontrol", "delete", f"ReservationName={reservation_name('t')}")
    _cli(slurm_env, "scontrol", "update", f"nodename={NODE}", "state=resume")
    await adapter.close()


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[Path]:
    """A folder of stand-in tools; each test writes what they print."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    yield bin_dir


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def _prints(bin_dir: Path, dcgm: str, nccl: str) -> None:
    _tool(bin_dir, "dcgmi", f"cat {DATA / dcgm}")
    _tool(bin_dir, "all_reduce_perf", f"cat {DATA / nccl}")


async def _run(
    slurm: SlurmRest, bin_dir: Path, tmp: Path, steps: tuple[StepConfig, ...] = STEPS
) -> tuple[Validation, list[list[str]]]:
    tester = SlurmTester(slurm, str(tmp / "out"), extra_path=str(bin_dir))
    seen: list[list[str]] = []

    async def progress(run: Validation) -> None:
        seen.append([o.state.value for o in run.steps])

    async def nobody() -> str | None:
        return None

    run = await validate(
        tester,
        slurm,
        NODE,
        ValidationConfig(steps=steps),
        run_id="t",
        progress=progress,
        cancelled=nobody,
        poll_s=0.3,
    )
    return run, seen


async def test_a_node_that_passes_is_resumed_and_its_reservation_is_gone(
    slurm: SlurmRest, tools: Path, tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    _prints(tools, "dcgm_r2_v3_pass.json", "nccl_all_reduce_h200_8gpu.txt")
    run, seen = await _run(slurm, tools, tmp_path)
    assert run.error is None and run.passed, (run.error, [o.line for o in run.steps])
    assert [o.state for o in run.steps] == [StepState.PASSED, StepState.PASSED]
    assert "bus bandwidth 477 GB/s" in run.steps[1].line
    # Read back: in service, no reason, and no reservation left.
    assert run.after is not None and not run.after.out_of_service, run.after
    assert (await slurm.nodes([NODE]))[NODE].reason is None
    assert reservation_name("t") not in _cli(slurm_env, "scontrol", "show", "reservation")
    assert seen and seen[0] == ["queued", "queued"]


async def test_a_failed_diagnostic_leaves_the_node_drained_with_the_step_as_reason(
    slurm: SlurmRest, tools: Path, tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    _prints(tools, "dcgm_r2_v3_fail.json", "nccl_all_reduce_h200_8gpu.txt")
    run, _ = await _run(slurm, tools, tmp_path)
    assert not run.passed and run.error is None
    assert run.steps[0].state is StepState.FAILED and run.steps[1].state is StepState.PASSED
    node = run.after
    assert node is not None and node.draining, node
    assert node.reason is not None and node.reason.startswith("meowbot: failed validation dcgm:")
    assert "GPU 0" in node.reason
    assert reservation_name("t") not in _cli(slurm_env, "scontrol", "show", "reservation")


async def test_a_slow_all_reduce_fails_against_the_models_threshold(
    slurm: SlurmRest, tools: Path, tmp_path: Path
) -> None:
    _prints(tools, "dcgm_r2_v3_pass.json", "nccl_all_reduce_h200_8gpu.txt")
    steps = (STEPS[0], STEPS[1].model_copy(update={"params": {}}))  # H200's default: 480
    run, _ = await _run(slurm, tools, tmp_path, steps)
    assert not run.passed
    assert run.after is not None and run.after.draining
    assert run.after.reason is not None and "all-reduce" in run.after.reason
    assert "476.967 GB/s is below 480 GB/s for H200" in run.steps[1].line


async def test_a_step_past_its_timeout_is_stopped_and_fails(
    slurm: SlurmRest, tools: Path, tmp_path: Path
) -> None:
    _prints(tools, "dcgm_r2_v3_pass.json", "nccl_all_reduce_h200_8gpu.txt")
    _tool(tools, "dcgmi", "sleep 60")
    steps = (STEPS[0].model_copy(update={"timeout_s": 1}), STEPS[1])
    run, _ = await _run(slurm, tools, tmp_path, steps)
    assert not run.passed
    said = (run.error, [o.line for o in run.steps])  # why, when a run ends another way
    assert run.steps[0].result is not None and run.steps[0].result.figure == "timed out", said
    assert run.after is not None and run.after.draining


async def test_a_node_in_service_is_not_tested(slurm: SlurmRest, slurm_env: dict[str, str]) -> None:
    await slurm.resume(NODE)
    node = (await slurm.nodes([NODE]))[NODE]
    refused = refusal(node, NODE)
    assert refused is not None and "drain it first" in refused.sentence
    assert refusal(None, "gpu-9999") is not None
