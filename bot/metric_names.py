"""Metric and label names, exactly as the real exporters write them.

The simulated fleet exports these and the health checks read them, so both sides agree by
importing one module instead of repeating strings. The names are those of NVIDIA's dcgm-exporter
and of Prometheus' node_exporter, so the same checks run unchanged against a real cluster.
"""

from __future__ import annotations

from typing import Final

# --- dcgm-exporter: GPU faults ------------------------------------------------------------------
DCGM_FI_DEV_XID_ERRORS: Final = "DCGM_FI_DEV_XID_ERRORS"  # gauge: the last Xid seen (0 = none)
# dcgm-exporter declares this one a gauge: the Xids of each code in its own sliding window
# (label `window_size_in_ms`, flag --xid-count-window-size), not since it started
# (internal/pkg/collector/expcollector.go). Read as a counter here, its growth over the window
# is the Xids still inside the exporter's window at the read.
DCGM_EXP_XID_ERRORS_COUNT: Final = "DCGM_EXP_XID_ERRORS_COUNT"  # per Xid code, label `xid`
# The newer exporters' real counter (internal/pkg/collector/xid_total_collector.go): Xids of
# each code since the exporter started, label `xid`. A series appears with its code's first
# Xid, at 1, so a series born in the window counts whole (Reading.EVENTS), and a GPU reset
# does not hide a new Xid of the same code as it does on the last-value gauge above.
DCGM_EXP_XID_ERRORS_TOTAL: Final = "DCGM_EXP_XID_ERRORS_TOTAL"
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: Final = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"  # double-bit ECC since reset
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL: Final = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"  # single-bit, corrected
DCGM_FI_DEV_ROW_REMAP_FAILURE: Final = "DCGM_FI_DEV_ROW_REMAP_FAILURE"  # 1 = remap failed: RMA
DCGM_FI_DEV_ROW_REMAP_PENDING: Final = "DCGM_FI_DEV_ROW_REMAP_PENDING"  # 1 = remap waits for reset
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS: Final = (
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"  # rows already remapped; a few are normal
)

# --- dcgm-exporter: clocks, throttling, temperature, power --------------------------------------
DCGM_FI_DEV_CLOCKS_EVENT_REASONS: Final = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"  # bitmask, new name
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: Final = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"  # same, old name
# Time spent throttled, counters in nanoseconds (dcgm-exporter's counters CSV said "us" until
# its #589 fixed the comment to "ns", as DCGM's dcgm_fields.h defines them): the share of a
# window a GPU was held back, where the bitmask above is only the reasons at one instant.
DCGM_FI_DEV_THERMAL_VIOLATION: Final = "DCGM_FI_DEV_THERMAL_VIOLATION"
DCGM_FI_DEV_POWER_VIOLATION: Final = "DCGM_FI_DEV_POWER_VIOLATION"
# The newer exporters' clock events by reason, label `clock_event` (gpu_idle, power_cap,
# hw_slowdown, sw_thermal, hw_thermal, hw_power_brake, ...): _COUNT is a gauge of the samples
# with the reason in its sliding window (clock_events_collector.go), _TOTAL a counter of the
# times a reason came on since the exporter started (clock_events_total_collector.go: edge
# counted, so a throttle that lasts counts once).
DCGM_EXP_CLOCK_EVENTS_COUNT: Final = "DCGM_EXP_CLOCK_EVENTS_COUNT"
DCGM_EXP_CLOCK_EVENTS_TOTAL: Final = "DCGM_EXP_CLOCK_EVENTS_TOTAL"
# DCGM's own health watches, one series per GPU and watch (gpu_health_collector.go): labels
# `health_watch` (PCIE, NVLINK, PMU, MCU, MEM, SM, INFOROM, THERMAL, POWER, DRIVER, ALL) and
# `health_error_code` (DCGM_FR_...); the value is DCGM's result, 0 pass, 10 warn, 20 fail.
DCGM_EXP_GPU_HEALTH_STATUS: Final = "DCGM_EXP_GPU_HEALTH_STATUS"
DCGM_FI_DEV_GPU_TEMP: Final = "DCGM_FI_DEV_GPU_TEMP"  # degrees C
DCGM_FI_DEV_SM_CLOCK: Final = "DCGM_FI_DEV_SM_CLOCK"  # MHz
DCGM_FI_DEV_POWER_USAGE: Final = "DCGM_FI_DEV_POWER_USAGE"  # W
DCGM_FI_DEV_GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"  # percent

# --- dcgm-exporter: interconnects ---------------------------------------------------------------
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: Final = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"  # counter, all links of the GPU
)
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: Final = (
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"  # counter, all links of the GPU
)
DCGM_FI_PROF_NVLINK_TX_BYTES: Final = "DCGM_FI_PROF_NVLINK_TX_BYTES"  # gauge: bytes/s (a rate)
DCGM_FI_DEV_PCIE_REPLAY_COUNTER: Final = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"  # counter
DCGM_FI_DEV_PCIE_LINK_GEN: Final = "DCGM_FI_DEV_PCIE_LINK_GEN"  # current PCIe generation
DCGM_FI_DEV_PCIE_LINK_WIDTH: Final = "DCGM_FI_DEV_PCIE_LINK_WIDTH"  # current lanes

# --- node_exporter ------------------------------------------------------------------------------
NODE_INFINIBAND_STATE_ID: Final = "node_infiniband_state_id"  # 4 = ACTIVE
NODE_INFINIBAND_PHYSICAL_STATE_ID: Final = "node_infiniband_physical_state_id"  # 5 = LinkUp
NODE_INFINIBAND_LINK_DOWNED_TOTAL: Final = "node_infiniband_link_downed_total"  # link went down
NODE_INFINIBAND_SYMBOL_ERROR_TOTAL: Final = "node_infiniband_symbol_error_total"  # bad symbols
NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL: Final = (
    "node_infiniband_port_data_received_bytes_total"  # throughput proxy for slow jobs
)
NODE_INFINIBAND_PORT_DATA_TRANSMITTED_BYTES_TOTAL: Final = (
    "node_infiniband_port_data_transmitted_bytes_total"
)
NODE_NETWORK_RECEIVE_BYTES_TOTAL: Final = "node_network_receive_bytes_total"  # per interface
NODE_NETWORK_TRANSMIT_BYTES_TOTAL: Final = "node_network_transmit_bytes_total"  # per interface
NODE_NETWORK_RECEIVE_ERRS_TOTAL: Final = "node_network_receive_errs_total"  # per interface
NODE_NETWORK_TRANSMIT_ERRS_TOTAL: Final = "node_network_transmit_errs_total"  # per interface
NODE_BOOT_TIME_SECONDS: Final = "node_boot_time_seconds"  # epoch seconds; moves on a reboot
NODE_UNAME_INFO: Final = "node_uname_info"  # value 1; label `release` is the kernel
NODE_LOAD1: Final = "node_load1"  # 1-minute load average: CPU contention (noisy neighbour)
NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL: Final = (
    "node_pressure_cpu_waiting_seconds_total"  # PSI: time runnable tasks waited for a CPU
)
NODE_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL: Final = (
    "node_pressure_memory_waiting_seconds_total"  # PSI: time tasks stalled on memory
)
NODE_MEMORY_NUMA_NUMA_MISS_TOTAL: Final = (
    "node_memory_numa_numa_miss_total"  # pages allocated off their NUMA node, label `node`
)

# --- training jobs ------------------------------------------------------------------------------
# A synchronous job's ranks all report the same iteration time (each waits in the collective for
# the slowest): it says how slow the job is, not which node. Where a job also exports each rank's
# compute time (before the collective) and its wait in the collective, those name the node.
TRAINING_STEP_TIME_SECONDS: Final = "training_step_time_seconds"  # one rank's iteration time
TRAINING_COMPUTE_TIME_SECONDS: Final = "training_compute_time_seconds"  # work before the collective
TRAINING_COLLECTIVE_WAIT_SECONDS: Final = "training_collective_wait_seconds"  # waited for the rest

# --- labels -------------------------------------------------------------------------------------
LABEL_HOSTNAME: Final = "Hostname"  # dcgm-exporter host label in released versions
LABEL_HOSTNAME_NEW: Final = "hostname"  # ... and in newer ones
HOST_LABELS: Final = (LABEL_HOSTNAME, LABEL_HOSTNAME_NEW)  # accept both, use what is present
LABEL_GPU: Final = "gpu"  # GPU index on the node, "0".."7"
LABEL_UUID: Final = "UUID"  # "GPU-xxxxxxxx-..."
LABEL_MODEL_NAME: Final = "modelName"  # "NVIDIA H100 80GB HBM3"
LABEL_PCI_BUS_ID: Final = "pci_bus_id"  # "00000000:18:00.0"
LABEL_DCGM_DEVICE: Final = "device"  # on DCGM series: "nvidia0"
LABEL_DRIVER_VERSION: Final = "DCGM_FI_DRIVER_VERSION"  # a dcgm-exporter "label" field
# Firmware: dcgm-exporter can attach string fields as labels (type "label" in its counters CSV);
# the VBIOS version is attached this way to every DCGM series of the GPU, beside the driver.
LABEL_VBIOS_VERSION: Final = "DCGM_FI_DEV_VBIOS_VERSION"
LABEL_XID: Final = "xid"  # Xid code on DCGM_EXP_XID_ERRORS_COUNT and _TOTAL
LABEL_CLOCK_EVENT: Final = "clock_event"  # reason on DCGM_EXP_CLOCK_EVENTS_COUNT and _TOTAL
LABEL_HEALTH_WATCH: Final = "health_watch"  # on DCGM_EXP_GPU_HEALTH_STATUS: "MEM", "PCIE", ...
LABEL_HEALTH_ERROR_CODE: Final = "health_error_code"  # on it too: "DCGM_FR_OK", "DCGM_FR_..."
LABEL_INSTANCE: Final = "instance"  # "gpu-0001:9100" (node_exporter), "gpu-0001:9400" (DCGM)
LABEL_JOB: Final = "job"  # Prometheus scrape job, not a Slurm job
LABEL_IB_DEVICE: Final = "device"  # on node_infiniband_*: HCA, "mlx5_0"
LABEL_IB_PORT: Final = "port"  # on node_infiniband_*: "1"
LABEL_NET_DEVICE: Final = "device"  # on node_network_*: interface, "ib0", "eth0"
LABEL_NUMA_NODE: Final = "node"  # on node_memory_numa_*: NUMA node "0", "1"
LABEL_RELEASE: Final = "release"  # on node_uname_info: kernel release
LABEL_JOB_ID: Final = "job_id"  # on training_step_time_seconds: Slurm job id
LABEL_NODE: Final = "node"  # on training_step_time_seconds: host name
LABEL_RANK: Final = "rank"  # on training_step_time_seconds: global rank
LABEL_PIPELINE_STAGE: Final = "pipeline_stage"  # on training_step_time_seconds, optional

# --- ports and scrape jobs, as the simulated fleet labels its series ----------------------------
DCGM_EXPORTER_PORT: Final = 9400
NODE_EXPORTER_PORT: Final = 9100
TRAINING_EXPORTER_PORT: Final = 9500
SCRAPE_JOB_DCGM: Final = "dcgm-exporter"
SCRAPE_JOB_NODE: Final = "node"
SCRAPE_JOB_TRAINING: Final = "training"

# --- values -------------------------------------------------------------------------------------
# Clock event (throttle) reason bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
CLOCK_EVENT_GPU_IDLE: Final = 0x1  # normal on an idle GPU, not a fault
CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING: Final = 0x2
CLOCK_EVENT_SW_POWER_CAP: Final = 0x4
CLOCK_EVENT_HW_SLOWDOWN: Final = 0x8
CLOCK_EVENT_SYNC_BOOST: Final = 0x10
CLOCK_EVENT_SW_THERMAL: Final = 0x20
CLOCK_EVENT_HW_THERMAL: Final = 0x40
CLOCK_EVENT_HW_POWER_BRAKE: Final = 0x80
# The `clock_event` label of DCGM_EXP_CLOCK_EVENTS_* for each bit (dcgm-exporter's
# clock_events_collector.go, clockEventToString, after dcgmi's names).
CLOCK_EVENT_NAMES: Final[dict[int, str]] = {
    CLOCK_EVENT_GPU_IDLE: "gpu_idle",
    CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING: "clocks_setting",
    CLOCK_EVENT_SW_POWER_CAP: "power_cap",
    CLOCK_EVENT_HW_SLOWDOWN: "hw_slowdown",
    CLOCK_EVENT_SYNC_BOOST: "sync_boost",
    CLOCK_EVENT_SW_THERMAL: "sw_thermal",
    CLOCK_EVENT_HW_THERMAL: "hw_thermal",
    CLOCK_EVENT_HW_POWER_BRAKE: "hw_power_brake",
    0x100: "display_clocks",
}

# DCGM_EXP_GPU_HEALTH_STATUS values: go-dcgm's DCGM_HEALTH_RESULT_PASS, _WARN, _FAIL.
HEALTH_PASS: Final = 0
HEALTH_WARN: Final = 10
HEALTH_FAIL: Final = 20
HEALTH_OK_CODE: Final = "DCGM_FR_OK"

IB_STATE_DOWN: Final = 1
IB_STATE_ACTIVE: Final = 4
IB_PHYSICAL_STATE_POLLING: Final = 2
IB_PHYSICAL_STATE_LINK_UP: Final = 5

# Counters (read with rate/increase); everything else above is a gauge. The DCGM ones are declared
# counters by dcgm-exporter although their names end in an upper-case _TOTAL or nothing at all.
COUNTERS: Final[frozenset[str]] = frozenset(
    {
        DCGM_EXP_XID_ERRORS_COUNT,
        DCGM_EXP_XID_ERRORS_TOTAL,
        DCGM_EXP_CLOCK_EVENTS_TOTAL,
        DCGM_FI_DEV_THERMAL_VIOLATION,
        DCGM_FI_DEV_POWER_VIOLATION,
        DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
        DCGM_FI_DEV_ECC_SBE_VOL_TOTAL,
        DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
        DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
        NODE_INFINIBAND_LINK_DOWNED_TOTAL,
        NODE_INFINIBAND_SYMBOL_ERROR_TOTAL,
        NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL,
        NODE_INFINIBAND_PORT_DATA_TRANSMITTED_BYTES_TOTAL,
        NODE_NETWORK_RECEIVE_BYTES_TOTAL,
        NODE_NETWORK_TRANSMIT_BYTES_TOTAL,
        NODE_NETWORK_RECEIVE_ERRS_TOTAL,
        NODE_NETWORK_TRANSMIT_ERRS_TOTAL,
        NODE_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL,
        NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL,
        NODE_MEMORY_NUMA_NUMA_MISS_TOTAL,
    }
)
