"""The doctor's judgement of what Kubernetes nodes say of their GPUs (no I/O)."""

from __future__ import annotations

from typing import Any

from bot.doctor.kubernetes_part import gpu_labels_line
from bot.doctor.report import Status


def _node(name: str, labels: dict[str, str], capacity: dict[str, str] | None = None) -> Any:
    return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": capacity or {}}}


H100 = {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_labelled_nodes_pass_summed_by_kind() -> None:
    nodes = [_node(f"g{i}", H100) for i in range(3)]
    line = gpu_labels_line(nodes)
    assert line.status is Status.PASS
    assert line.said == "3 with 8 x NVIDIA-H100-80GB-HBM3"


def test_the_device_plugins_capacity_counts_without_gfd() -> None:
    line = gpu_labels_line([_node("g1", {}, {"nvidia.com/gpu": "4"})])
    assert line.status is Status.PASS
    assert line.said == "1 with 4 x no nvidia.com/gpu.product label"


def test_nodes_without_gpus_are_named_and_warned() -> None:
    nodes = [_node(f"cpu-{i}", {}) for i in range(5)] + [_node("g1", H100)]
    line = gpu_labels_line(nodes)
    assert line.status is Status.WARN and "GPU Feature Discovery" in line.fix
    assert line.said.startswith("5 of 6 say no GPUs")
    assert "cpu-0, cpu-1, cpu-2 ..." in line.said
    assert line.said.endswith("The rest: 1 with 8 x NVIDIA-H100-80GB-HBM3")


def test_many_kinds_are_cut_to_three() -> None:
    nodes = [
        _node(f"g{i}", {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": f"P{i}"})
        for i in range(5)
    ]
    assert gpu_labels_line(nodes).said.endswith("; 2 more kinds")
