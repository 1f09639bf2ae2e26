"""The validation parsers on real outputs (tests/data/validation, sources in its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.validation.parsers import (
    PARSERS,
    TIMEOUT_EXIT_CODE,
    IbWriteBwParams,
    NcclParams,
    by_exit_code,
    dcgm_diag,
    ib_write_bw,
    nccl_all_reduce,
    read_step,
)

DATA = Path(__file__).parents[1] / "data" / "validation"


def data(name: str) -> str:
    return (DATA / name).read_text()


# --- dcgmi diag -j --------------------------------------------------------------------------


def test_dcgm_3x_level_2_pass() -> None:
    r = read_step("dcgm_diag", data("dcgm_r2_v3_pass.json"), "", 0, {})
    assert r.passed and r.reason == ""
    assert r.figure == "DCGM diagnostics passed (11 results)"


def test_dcgm_3x_fail_names_the_test_the_gpu_and_dcgms_message() -> None:
    r = read_step("dcgm_diag", data("dcgm_r2_v3_fail.json"), "", 226, {})
    assert not r.passed
    assert (r.test, r.gpu) == ("GPU Memory", 0)
    assert r.message is not None and "cuCtxCreate" in r.message
    assert r.figure == "DCGM GPU Memory failed"
    assert r.reason.startswith("GPU Memory GPU 0: GPU 0 Error using CUDA API cuCtxCreate")


def test_dcgm_4x_fail_reads_the_entity_of_the_failing_result() -> None:
    r = read_step("dcgm_diag", data("dcgm_v4_fail.json"), "", 226, {})
    assert not r.passed
    assert (r.test, r.gpu) == ("diagnostic", 3)
    assert r.message is not None and r.message.startswith("GPU 3 Error using CUDA API")


def test_dcgm_4x_pass_when_whole() -> None:
    # The fragment is one test of a DCGM 4 document; closed into one, it passes.
    fragment = data("dcgm_v4_fragment.txt").rstrip().rstrip(",")
    doc = '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [%s]}]}}'
    r = read_step(
        "dcgm_diag", "Successfully ran diagnostic for group.\n" + doc % fragment, "", 0, {}
    )
    assert r.passed and r.figure == "DCGM diagnostics passed (8 results)"


@pytest.mark.parametrize(
    "stdout",
    [
        data("dcgm_v4_fragment.txt"),  # truncated: a test, no document around it
        data("dcgm_r2_v3_pass.json")[:900],  # cut mid-way
        "",
        "Error: unable to establish a connection to the specified host: localhost\n",
        '{"DCGM GPU Diagnostic": {"test_categories": []}}',  # no results at all
        '{"something": "else"}',
    ],
)
def test_dcgm_output_that_cannot_be_read_is_a_failure_saying_so(stdout: str) -> None:
    r = read_step("dcgm_diag", stdout, "", 255, {})
    assert not r.passed
    assert r.figure == "dcgmi diag output could not be read (exit code 255)"


def test_dcgm_unreadable_output_quotes_the_last_line_of_stderr() -> None:
    r = dcgm_diag(
        "", "loading\nError: Unable to connect to host engine\n", 1, PARSERS["dcgm_diag"].params()
    )  # type: ignore[arg-type]
    assert r.message == "Error: Unable to connect to host engine"


def test_dcgm_runtime_error_and_a_pass_with_a_failing_exit_code() -> None:
    r = read_step("dcgm_diag", '{"DCGM Diagnostic": {"runtime_error": "No GPUs found"}}', "", 1, {})
    assert not r.passed and r.message == "No GPUs found"
    r = read_step("dcgm_diag", data("dcgm_r2_v3_pass.json"), "", 3, {})
    assert not r.passed and r.figure == "dcgmi exited 3"


# --- all_reduce_perf ------------------------------------------------------------------------


def test_all_reduce_threshold_per_gpu_model() -> None:
    h200 = data("nccl_all_reduce_h200_8gpu.txt")
    # The default bar for an H200 is 480 GB/s: 476.967 is short of it.
    r = nccl_all_reduce(h200, "", 0, NcclParams())
    assert not r.passed
    assert r.figure == "bus bandwidth 477 GB/s < 480"
    assert r.message == "average bus bandwidth 476.967 GB/s is below 480 GB/s for H200"
    # A site that gates H200 at 431 GB/s (Azure's ND H200 v5 setting) passes it.
    r = nccl_all_reduce(h200, "", 0, NcclParams(min_bus_bw_gbs={"H200": 431, "H100": 460}))
    assert r.passed and r.figure == "bus bandwidth 477 GB/s ≥ 431"


def test_all_reduce_slow_h100_run() -> None:
    # Two H100 nodes at 406 GB/s; the output does not name the GPUs, the scheduler does.
    r = read_step(
        "nccl_all_reduce",
        data("nccl_all_reduce_h100_2node.txt"),
        "",
        0,
        {"gpu_model": "NVIDIA H100 80GB HBM3"},
    )
    assert not r.passed and r.figure == "bus bandwidth 406 GB/s < 460"
    r = read_step(
        "nccl_all_reduce",
        data("nccl_all_reduce_h100_2node.txt"),
        "",
        0,
        {"gpu_model": "H100", "min_bus_bw_gbs": {"H100": 400}},
    )
    assert r.passed and r.figure == "bus bandwidth 406 GB/s ≥ 400"


def test_all_reduce_unknown_model_fails_unless_a_default_is_set() -> None:
    out = data("nccl_all_reduce_h100_2node.txt")
    r = read_step("nccl_all_reduce", out, "", 0, {})
    assert not r.passed and r.message == "no bus bandwidth threshold for GPU model unknown"
    assert read_step("nccl_all_reduce", out, "", 0, {"default_gbs": 300}).passed


def test_all_reduce_wrong_values_fail_whatever_the_bandwidth() -> None:
    out = data("nccl_all_reduce_h200_8gpu.txt").replace(
        "Out of bounds values : 0 OK", "Out of bounds values : 248 FAILED"
    )
    r = read_step("nccl_all_reduce", out, "", 0, {"default_gbs": 1})
    assert not r.passed and r.message == "248 values out of bounds"


@pytest.mark.parametrize(
    "stdout",
    [
        data("nccl_all_reduce_h200_8gpu.txt").split("# Out of bounds")[0],  # cut before the end
        "",
        "# Avg bus bandwidth    : nan\n",
    ],
)
def test_all_reduce_unreadable_output(stdout: str) -> None:
    r = read_step("nccl_all_reduce", stdout, "", 1, {})
    assert not r.passed and r.figure == "all_reduce_perf output could not be read (exit code 1)"


def test_all_reduce_nonzero_exit_fails() -> None:
    r = read_step("nccl_all_reduce", data("nccl_all_reduce_h200_8gpu.txt"), "boom\n", 1, {})
    assert not r.passed and r.figure == "all_reduce_perf exited 1" and r.message == "boom"


# --- ib_write_bw ----------------------------------------------------------------------------


def test_ib_write_bw_in_gbits_against_the_threshold() -> None:
    out = data("ib_write_bw_gbits.txt")
    r = ib_write_bw(out, "", 0, IbWriteBwParams())
    assert not r.passed and r.figure == "IB write bandwidth 0.48 Gb/s < 375"
    assert read_step("ib_write_bw", out, "", 0, {"min_gbps": 0.4}).passed


def test_ib_write_bw_mb_per_second_is_converted_to_gbits() -> None:
    out = data("ib_write_bw_mbsec_truncated.txt").replace(
        " 65536      664644\n",
        " 65536      664644           0.00               43524.12          0.696386\n",
    )
    r = read_step("ib_write_bw", out, "", 0, {})
    assert not r.passed and r.figure == "IB write bandwidth 365 Gb/s < 375"  # 43524 MiB/s
    assert read_step("ib_write_bw", out, "", 0, {"min_gbps": 360}).passed


@pytest.mark.parametrize(
    "stdout",
    [data("ib_write_bw_mbsec_truncated.txt"), "", "Couldn't connect to 10.0.0.1:18515\n"],
)
def test_ib_write_bw_unreadable_output(stdout: str) -> None:
    r = read_step("ib_write_bw", stdout, "", 0, {})
    assert not r.passed and r.figure == "ib_write_bw output could not be read"


def test_ib_write_bw_nonzero_exit_fails() -> None:
    r = read_step("ib_write_bw", data("ib_write_bw_gbits.txt"), "", 1, {"min_gbps": 0.1})
    assert not r.passed and r.figure == "ib_write_bw exited 1"


# --- any command, timeouts, the table -------------------------------------------------------


def test_exit_code_parser() -> None:
    params = PARSERS["exit_code"].params()
    assert by_exit_code("", "", 0, params).passed  # type: ignore[arg-type]
    r = read_step("exit_code", "ran 3 loops\n", "GPU 2: burn failed\n", 2, {})
    assert not r.passed and r.figure == "exited 2" and r.reason == "GPU 2: burn failed"
    assert read_step("exit_code", "", "", 3, {"ok_exit_codes": [0, 3]}).passed


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_a_timeout_is_marked_by_its_exit_code(name: str) -> None:
    stdout = data("dcgm_r2_v3_pass.json") if name == "dcgm_diag" else ""
    r = read_step(name, stdout, "", TIMEOUT_EXIT_CODE, {})
    assert not r.passed and r.figure == "timed out"
    assert r.reason == "stopped at its timeout"


def test_wrong_params_are_a_failure_not_an_exception() -> None:
    r = read_step("ib_write_bw", data("ib_write_bw_gbits.txt"), "", 0, {"min_gbps": "fast"})
    assert not r.passed and r.figure == "validation step misconfigured"
