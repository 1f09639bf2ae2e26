"""How each validation step's output is read: one function per parser, one table of them.

Each parser takes the step's stdout, stderr, exit code and its params and returns a
`StepResult`: passed or not, one line for Slack, and on failure what failed. Output that
cannot be read (truncated, not the tool's format) is a failure saying so, never an exception.
The runner reports a step it stopped at its timeout as exit code 124, as timeout(1) does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

TIMEOUT_EXIT_CODE = 124


class StepResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    passed: bool
    figure: str
    """One line for Slack: `bus bandwidth 472 GB/s ≥ 460`."""
    test: str | None = None
    gpu: int | None = None
    message: str | None = None

    @property
    def reason(self) -> str:
        """On failure, the failing test, GPU and message in one line; empty on a pass."""
        if self.passed:
            return ""
        where = " ".join(
            p for p in (self.test, None if self.gpu is None else f"GPU {self.gpu}") if p
        )
        return ": ".join(p for p in (where, self.message) if p) or self.figure


def _failed(
    figure: str, message: str, test: str | None = None, gpu: int | None = None
) -> StepResult:
    return StepResult(passed=False, figure=figure, test=test, gpu=gpu, message=_line(message))


def _line(text: str, limit: int = 300) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _unreadable(tool: str, exit_code: int, stderr: str) -> StepResult:
    why = f" (exit code {exit_code})" if exit_code else ""
    tail = _line(stderr.strip().splitlines()[-1]) if stderr.strip() else ""
    return _failed(
        f"{tool} output could not be read{why}", tail or f"no {tool} result in the output"
    )


def _timed_out(exit_code: int) -> StepResult | None:
    if exit_code == TIMEOUT_EXIT_CODE:
        return _failed("timed out", "stopped at its timeout")
    return None


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


# --- dcgmi diag -r N -j ---------------------------------------------------------------------


class DcgmParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


_DCGM_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
_DCGM_OK = frozenset({"pass", "skip", "warn", "not run"})


def _json_document(text: str) -> Any:
    """The first JSON object in `text` (dcgmi may print a line before it), or None."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return doc


def _gpu_of(result: Mapping[str, Any]) -> int | None:
    """The GPU of one result: `entity_id` (DCGM 4), `gpu_id` or `gpu_ids` (3.x, "0" or "0,1")."""
    group = result.get("entity_group", "GPU")
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        value = result.get(key)
        if key == "entity_id" and group != "GPU":
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    return None


def _warning_text(result: Mapping[str, Any]) -> str:
    """DCGM's message for a failed result: `warnings` (objects or strings) or `warning`."""
    raw = result.get("warnings", result.get("warning"))
    items = raw if isinstance(raw, list) else [raw]
    texts = [i.get("warning", "") if isinstance(i, dict) else i for i in items]
    return "; ".join(t for t in texts if isinstance(t, str) and t)


def dcgm_diag(stdout: str, stderr: str, exit_code: int, params: DcgmParams) -> StepResult:
    """`dcgmi diag -r N -j`, DCGM 3.x ("DCGM GPU Diagnostic") or 4.x ("DCGM Diagnostic")."""
    del params
    if (late := _timed_out(exit_code)) is not None:
        return late
    doc = _json_document(stdout)
    root = next((doc[k] for k in _DCGM_ROOTS if isinstance(doc, dict) and k in doc), None)
    if not isinstance(root, dict):
        return _unreadable("dcgmi diag", exit_code, stderr)
    if isinstance(root.get("runtime_error"), str):
        return _failed("DCGM diagnostics did not run", root["runtime_error"])
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        return _unreadable("dcgmi diag", exit_code, stderr)
    count = 0
    for category in categories:
        tests = category.get("tests") if isinstance(category, dict) else None
        for test in tests if isinstance(tests, list) else []:
            if not isinstance(test, dict):
                continue  # DCGM 3.1 writes null between tests
            name = str(test.get("name", "?"))
            results = test.get("results")
            for result in results if isinstance(results, list) else []:
                if not isinstance(result, dict):
                    continue
                count += 1
                status = str(result.get("status", "")).strip().lower()
                if status not in _DCGM_OK:
                    gpu = _gpu_of(result)
                    message = _warning_text(result) or f"status {result.get('status')!r}"
                    return _failed(f"DCGM {name} failed", message, test=name, gpu=gpu)
    if count == 0:
        return _unreadable("dcgmi diag", exit_code, stderr)
    if exit_code != 0:
        return _failed(
            f"dcgmi exited {exit_code}", f"every test passed but dcgmi exited {exit_code}"
        )
    return StepResult(passed=True, figure=f"DCGM diagnostics passed ({count} results)")


# --- nccl-tests all_reduce_perf -------------------------------------------------------------


class NcclParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Azure's HPC node health checks gate an 8-GPU all-reduce at these (conf/nd96isr_*_v5.conf).
    min_bus_bw_gbs: dict[str, float] = Field(default_factory=lambda: {"H100": 460.0, "H200": 480.0})
    """Minimum average bus bandwidth in GB/s, by GPU model as nccl-tests names the devices
    (`NVIDIA H100 80GB HBM3` matches `H100`; the longest matching name wins)."""
    default_gbs: float | None = Field(None, gt=0)
    """For a model not listed; unset, such a node fails the step (no threshold to pass)."""
    gpu_model: str | None = None
    """The node's GPU model when the output does not name it (the scheduler knows it)."""


_AVG_BUS_BW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+(?:[eE][-+]?\d+)?)")
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)")
_DEVICE = re.compile(r"^#?\s*Rank\s+\d+.*\bdevice\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$", re.MULTILINE)


def _threshold(model: str | None, params: NcclParams) -> tuple[str | None, float | None]:
    if model:
        for name in sorted(params.min_bus_bw_gbs, key=len, reverse=True):
            if name.lower() in model.lower():
                return name, params.min_bus_bw_gbs[name]
    return model, params.default_gbs


def nccl_all_reduce(stdout: str, stderr: str, exit_code: int, params: NcclParams) -> StepResult:
    """nccl-tests' `all_reduce_perf`: its average bus bandwidth against the GPU model's bar."""
    if (late := _timed_out(exit_code)) is not None:
        return late
    found = _AVG_BUS_BW.search(stdout)
    if found is None:
        return _unreadable("all_reduce_perf", exit_code, stderr)
    try:
        bus_bw = float(found.group(1))
    except ValueError:
        return _unreadable("all_reduce_perf", exit_code, stderr)
    bounds = _OUT_OF_BOUNDS.search(stdout)
    if bounds is not None and (int(bounds.group(1)) > 0 or bounds.group(2).upper() != "OK"):
        return _failed(
            "all-reduce returned wrong values", f"{bounds.group(1)} values out of bounds"
        )
    if exit_code != 0:
        return _failed(f"all_reduce_perf exited {exit_code}", _line(stderr) or "non-zero exit")
    devices = _DEVICE.findall(stdout)
    model, minimum = _threshold(params.gpu_model or (devices[0] if devices else None), params)
    if minimum is None:
        return _failed(
            f"bus bandwidth {_fmt(bus_bw)} GB/s, no threshold",
            f"no bus bandwidth threshold for GPU model {model or 'unknown'}",
        )
    if bus_bw >= minimum:
        return StepResult(
            passed=True, figure=f"bus bandwidth {_fmt(bus_bw)} GB/s ≥ {_fmt(minimum)}"
        )
    return _failed(
        f"bus bandwidth {_fmt(bus_bw)} GB/s < {_fmt(minimum)}",
        f"average bus bandwidth {bus_bw:g} GB/s is below {minimum:g} GB/s for {model}",
    )


# --- perftest ib_write_bw -------------------------------------------------------------------


class IbWriteBwParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Azure's GPUDirect check (check_ib_bw_gdr, run with --report_gbits) gates NDR at 375 Gb/s.
    min_gbps: float = Field(375.0, gt=0)
    """Minimum average bandwidth in Gb/s (bits); MB/sec output is converted."""


_IB_HEADER = re.compile(r"BW average\[(Gb|MB)/sec\]")
_MB_TO_GBPS = 1_048_576 * 8 / 1e9  # perftest's MB is 2^20 bytes


def ib_write_bw(stdout: str, stderr: str, exit_code: int, params: IbWriteBwParams) -> StepResult:
    """perftest's `ib_write_bw`: the last row's average bandwidth, in Gb/s, against the bar."""
    if (late := _timed_out(exit_code)) is not None:
        return late
    lines = stdout.splitlines()
    header = next((i for i, line in enumerate(lines) if _IB_HEADER.search(line)), None)
    if header is None:
        return _unreadable("ib_write_bw", exit_code, stderr)
    # "#bytes #iterations BW peak[..] BW average[..] MsgRate[..]": a row has no "BW" words.
    names = [n for n in lines[header].split() if n != "BW"]
    column = next((i for i, n in enumerate(names) if n.startswith("average[")), 3)
    rows = [r.split() for r in lines[header + 1 :] if r.strip() and r.split()[0].isdigit()]
    rows = [r for r in rows if len(r) > column]
    try:
        value = float(rows[-1][column]) if rows else None
    except ValueError:
        value = None
    if value is None:
        return _unreadable("ib_write_bw", exit_code, stderr)
    unit = _IB_HEADER.search(lines[header])
    gbps = value if unit is not None and unit.group(1) == "Gb" else value * _MB_TO_GBPS
    if exit_code != 0:
        return _failed(f"ib_write_bw exited {exit_code}", _line(stderr) or "non-zero exit")
    if gbps >= params.min_gbps:
        figure = f"IB write bandwidth {_fmt(gbps)} Gb/s ≥ {_fmt(params.min_gbps)}"
        return StepResult(passed=True, figure=figure)
    return _failed(
        f"IB write bandwidth {_fmt(gbps)} Gb/s < {_fmt(params.min_gbps)}",
        f"average write bandwidth {gbps:g} Gb/s is below {params.min_gbps:g} Gb/s",
    )


# --- any other command ----------------------------------------------------------------------


class ExitCodeParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ok_exit_codes: frozenset[int] = frozenset({0})


def by_exit_code(stdout: str, stderr: str, exit_code: int, params: ExitCodeParams) -> StepResult:
    """Any command: passes on an exit code in `ok_exit_codes`."""
    if (late := _timed_out(exit_code)) is not None:
        return late
    if exit_code in params.ok_exit_codes:
        return StepResult(passed=True, figure=f"exited {exit_code}")
    last = (stderr.strip() or stdout.strip()).splitlines()
    return _failed(f"exited {exit_code}", last[-1] if last else f"exit code {exit_code}")


# --- the table ------------------------------------------------------------------------------


class Parser(NamedTuple):
    params: type[BaseModel]
    read: Callable[[str, str, int, Any], StepResult]


PARSERS: dict[str, Parser] = {
    "dcgm_diag": Parser(DcgmParams, dcgm_diag),
    "nccl_all_reduce": Parser(NcclParams, nccl_all_reduce),
    "ib_write_bw": Parser(IbWriteBwParams, ib_write_bw),
    "exit_code": Parser(ExitCodeParams, by_exit_code),
}


def parser_params(name: str, raw: Mapping[str, Any]) -> BaseModel:
    """The params of parser `name`, validated (a pydantic ValidationError when wrong)."""
    return PARSERS[name].params.model_validate(dict(raw))


def read_step(
    name: str, stdout: str, stderr: str, exit_code: int, params: Mapping[str, Any]
) -> StepResult:
    """Run parser `name` on one step's output; wrong params are a failure, not an exception."""
    try:
        checked = parser_params(name, params)
    except ValidationError as exc:
        return _failed("validation step misconfigured", str(exc.errors()[0]["msg"]))
    return PARSERS[name].read(stdout, stderr, exit_code, checked)
