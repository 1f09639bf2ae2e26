"""The metric families the simulated fleet exports, and their text formats.

Two formats: Prometheus text exposition 0.0.4 (what a scrape reads) and OpenMetrics 1.0 with
timestamps (what ``promtool tsdb create-blocks-from openmetrics`` backfills). Rendering is kept
apart from the values so both formats print the very same samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple

from bot import metric_names as m
from bot.triage.checks import CHECKS

Labels = tuple[tuple[str, str], ...]
Entity = Literal["gpu", "xid", "health", "clock", "nic", "netdev", "node", "uname", "numa", "step"]


class Sample(NamedTuple):
    """One series' value: the metric name, its labels as ordered pairs, the value."""

    name: str
    labels: Labels
    value: float

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    entity: Entity
    """What one series is about: a GPU, an Xid code of a GPU, a DCGM health watch of a GPU, a
    clock-event reason of a GPU, an IB port, a network interface, a node, the node's uname, a
    NUMA domain, or one rank of a training job."""
    help: str

    @property
    def type(self) -> Literal["counter", "gauge"]:
        return "counter" if self.name in m.COUNTERS else "gauge"


FAMILIES: tuple[Family, ...] = (
    Family(m.DCGM_FI_DEV_XID_ERRORS, "gpu", "Value of the last XID error encountered."),
    Family(m.DCGM_EXP_XID_ERRORS_COUNT, "xid", "Count of XID errors, by XID code."),
    Family(m.DCGM_EXP_XID_ERRORS_TOTAL, "xid", "Total XID errors observed since exporter start."),
    Family(m.DCGM_EXP_GPU_HEALTH_STATUS, "health", "Current DCGM-reported GPU health status."),
    Family(
        m.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, "gpu", "Total number of double-bit volatile ECC errors."
    ),
    Family(
        m.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, "gpu", "Total number of single-bit volatile ECC errors."
    ),
    Family(m.DCGM_FI_DEV_ROW_REMAP_FAILURE, "gpu", "Whether remapping of rows has failed."),
    Family(m.DCGM_FI_DEV_ROW_REMAP_PENDING, "gpu", "Whether remapping of rows is pending."),
    Family(
        m.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
        "gpu",
        "Number of remapped rows for uncorrectable errors.",
    ),
    Family(m.DCGM_FI_DEV_CLOCKS_EVENT_REASONS, "gpu", "Current clock event reasons (bitmask)."),
    Family(
        m.DCGM_EXP_CLOCK_EVENTS_TOTAL,
        "clock",
        "Total clock events observed since exporter start (edge-counted).",
    ),
    Family(
        m.DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, "gpu", "Current clock throttle reasons (bitmask)."
    ),
    Family(
        m.DCGM_FI_DEV_THERMAL_VIOLATION,
        "gpu",
        "Throttling duration due to thermal constraints (in ns).",
    ),
    Family(
        m.DCGM_FI_DEV_POWER_VIOLATION,
        "gpu",
        "Throttling duration due to power constraints (in ns).",
    ),
    Family(m.DCGM_FI_DEV_GPU_TEMP, "gpu", "GPU temperature (in C)."),
    Family(m.DCGM_FI_DEV_SM_CLOCK, "gpu", "SM clock frequency (in MHz)."),
    Family(m.DCGM_FI_DEV_POWER_USAGE, "gpu", "Power draw (in W)."),
    Family(m.DCGM_FI_DEV_GPU_UTIL, "gpu", "GPU utilization (in %)."),
    Family(
        m.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        "gpu",
        "Total number of NVLink flow-control CRC errors.",
    ),
    Family(m.DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, "gpu", "Total number of NVLink retries."),
    Family(m.DCGM_FI_PROF_NVLINK_TX_BYTES, "gpu", "The rate of data transmitted over NVLink."),
    Family(m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER, "gpu", "Total number of PCIe retries."),
    Family(m.DCGM_FI_DEV_PCIE_LINK_GEN, "gpu", "PCIe current link generation."),
    Family(m.DCGM_FI_DEV_PCIE_LINK_WIDTH, "gpu", "PCIe current link width."),
    Family(m.NODE_INFINIBAND_STATE_ID, "nic", "State of the InfiniBand port (4: ACTIVE)."),
    Family(
        m.NODE_INFINIBAND_PHYSICAL_STATE_ID,
        "nic",
        "Physical state of the InfiniBand port (5: LinkUp).",
    ),
    Family(
        m.NODE_INFINIBAND_LINK_DOWNED_TOTAL,
        "nic",
        "Number of times the link failed to recover from an error state and went down",
    ),
    Family(
        m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL,
        "nic",
        "Number of minor link errors detected on one or more physical lanes.",
    ),
    Family(
        m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL,
        "nic",
        "Number of data octets received on all links",
    ),
    Family(m.NODE_NETWORK_RECEIVE_ERRS_TOTAL, "netdev", "Network device statistic receive_errs."),
    Family(m.NODE_NETWORK_TRANSMIT_ERRS_TOTAL, "netdev", "Network device statistic transmit_errs."),
    Family(m.NODE_BOOT_TIME_SECONDS, "node", "Node boot time, in unixtime."),
    Family(
        m.NODE_UNAME_INFO,
        "uname",
        "Labeled system information as provided by the uname system call.",
    ),
    Family(m.NODE_LOAD1, "node", "1m load average."),
    Family(
        m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL,
        "node",
        "Total time in seconds that processes have waited for CPU time",
    ),
    Family(m.NODE_MEMORY_NUMA_NUMA_MISS_TOTAL, "numa", "Memory information field numa_miss."),
    Family(
        m.TRAINING_STEP_TIME_SECONDS,
        "step",
        "Duration of the last training iteration on this rank, collective included.",
    ),
    Family(
        m.TRAINING_COMPUTE_TIME_SECONDS,
        "step",
        "Time of the last iteration this rank spent computing, before the collective.",
    ),
    Family(
        m.TRAINING_COLLECTIVE_WAIT_SECONDS,
        "step",
        "Time of the last iteration this rank spent in the collective, waiting for the others.",
    ),
)
# Families a check reads that the list above does not have: its entry says (`exports`).
FAMILIES += tuple(Family(e.metric, e.per, e.help) for c in CHECKS for e in c.injects.exports)
FAMILY_BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}


def escape_label_value(value: str) -> str:
    """Escape a label value for both text formats: backslash, double quote, newline."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Shortest exact text: integers without a fraction, floats by repr, NaN and infinities."""
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def render_labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels) + "}"


class LabelRenderer:
    """Renders label sets once: one GPU's labels are shared by every DCGM family."""

    def __init__(self) -> None:
        self._cache: dict[Labels, str] = {}

    def __call__(self, labels: Labels) -> str:
        text = self._cache.get(labels)
        if text is None:
            text = render_labels(labels)
            self._cache[labels] = text
        return text


def text_exposition(
    families: Iterable[tuple[Family, Iterable[tuple[Labels, float]]]],
) -> str:
    """Prometheus text format 0.0.4."""
    render = LabelRenderer()
    out: list[str] = []
    for family, rows in families:
        out.append(f"# HELP {family.name} {_escape_help(family.help)}\n")
        out.append(f"# TYPE {family.name} {family.type}\n")
        name = family.name
        out.extend(f"{name}{render(labels)} {format_value(value)}\n" for labels, value in rows)
    return "".join(out)


def openmetrics_family_header(family: Family) -> tuple[str, str]:
    """(metric family name, header lines) for OpenMetrics.

    OpenMetrics wants a counter family named without its ``_total`` suffix and its samples with
    it. The DCGM counters do not end in a lower-case ``_total``, so they are declared ``unknown``
    there (promtool stores no type in blocks anyway); node_exporter's counters stay counters.
    """
    kind: str = family.type
    name = family.name
    if kind == "counter":
        if name.endswith("_total"):
            name = name[: -len("_total")]
        else:
            kind = "unknown"
    header = f"# HELP {name} {_escape_help(family.help)}\n# TYPE {name} {kind}\n"
    return name, header


def openmetrics_series(
    family: Family,
    series: Iterable[tuple[Labels, list[tuple[int, float]]]],
    render: LabelRenderer,
    chunk_chars: int = 1 << 16,
) -> Iterator[str]:
    """One family with its header, every series with all its points, in chunks of text."""
    _, header = openmetrics_family_header(family)
    buf: list[str] = [header]
    size = len(header)
    name = family.name
    for labels, points in series:
        prefix = f"{name}{render(labels)} "
        for t, v in points:
            line = f"{prefix}{format_value(v)} {t}\n"
            buf.append(line)
            size += len(line)
        if size >= chunk_chars:
            yield "".join(buf)
            buf, size = [], 0
    if buf:
        yield "".join(buf)
