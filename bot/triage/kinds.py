"""Each fault kind in words, for the people reading the answers.

The kind's code (`throttle_sw_thermal`) is what filters, configs and alerts key on; the words
are what a person understands at 3 a.m. Answers give both: "software thermal slowdown
(`throttle_sw_thermal`)". `/hw-faults` takes these words as filters too (bot/triage/targets.py).
"""

from __future__ import annotations

from bot.models import FaultKind

WORDS: dict[FaultKind, str] = {
    FaultKind.XID: "GPU Xid error",
    FaultKind.ECC_DBE: "double-bit ECC error",
    FaultKind.ROW_REMAP_FAILURE: "row-remap failure",
    FaultKind.ROW_REMAP_PENDING: "pending row remap",
    FaultKind.THROTTLE_POWER: "power-cap slowdown",
    FaultKind.THROTTLE_HW_SLOWDOWN: "hardware slowdown",
    FaultKind.THROTTLE_SW_THERMAL: "software thermal slowdown",
    FaultKind.THROTTLE_HW_THERMAL: "hardware thermal slowdown",
    FaultKind.POWER_BRAKE: "power brake",
    FaultKind.HIGH_TEMPERATURE: "high GPU temperature",
    FaultKind.NVLINK_CRC: "NVLink CRC errors",
    FaultKind.NVLINK_REPLAY: "NVLink replays",
    FaultKind.PCIE_REPLAY: "PCIe replays",
    FaultKind.PCIE_DOWNTRAINED: "PCIe link below its speed",
    FaultKind.IB_LINK_DOWN: "InfiniBand link down",
    FaultKind.IB_FLAPPING: "InfiniBand link flapping",
    FaultKind.IB_SYMBOL_ERRORS: "InfiniBand symbol errors",
    FaultKind.NIC_ERRORS: "network card errors",
    FaultKind.UNEXPECTED_REBOOT: "unexpected reboot",
    FaultKind.GPU_MISSING: "GPU missing",
    FaultKind.DRIVER_DRIFT: "driver differs from the fleet",
    FaultKind.KERNEL_DRIFT: "kernel differs from the fleet",
    FaultKind.FIRMWARE_DRIFT: "firmware differs from the fleet",
    FaultKind.DCGM_HEALTH: "DCGM health watch failing",
    FaultKind.LOW_SM_CLOCK: "low SM clock",
    FaultKind.CPU_CONTENTION: "CPU contention",
    FaultKind.NUMA_MISPLACEMENT: "NUMA misplacement",
    FaultKind.PIPELINE_IMBALANCE: "pipeline imbalance",
    FaultKind.GC_STALLS: "garbage-collection stalls",
    FaultKind.JOB_SLOWDOWN: "job slowdown",
}


def words(kind: FaultKind) -> str:
    """ "software thermal slowdown": the kind as a person says it."""
    return WORDS.get(kind, kind.value.replace("_", " "))
