"""`precursors:` in MEOWBOT_CONFIG: what /hw-faults why compares, and how. No I/O.

Each candidate is a PromQL template of a per-node rate or gauge; `$nodes` stands for the
matcher of the nodes read (on the candidate's `host_label`), which the Prometheus adapter
fills in, and the adapter takes the maximum (the minimum for a falling candidate) per node
and part. The defaults cover what node_exporter and dcgm-exporter export already; `candidates`
replaces them, `add` appends to them:

    precursors:
      lead_minutes: 15
      add:
        - name: NVMe write
          query: 'rate(node_disk_written_bytes_total{device=~"nvme.*",$nodes}[2m]) / 1e9'
          unit: GB/s
          by: device
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from bot import metric_names as m
from bot.precursors.models import Candidate

LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
NODES = "$nodes"
"""The placeholder of a candidate's query for the nodes' matcher."""


class CandidateConfig(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    query: str = Field(min_length=1, max_length=2000)
    unit: str = Field(default="", max_length=16)
    direction: Literal["above", "below"] = "above"
    host_label: str = m.LABEL_INSTANCE
    by: str | None = None

    @field_validator("query")
    @classmethod
    def _nodes(cls, value: str) -> str:
        if NODES not in value:
            raise ValueError(f"the query must select the nodes with {NODES}")
        return value

    @field_validator("host_label", "by")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and (not LABEL_NAME_RE.fullmatch(value) or value.startswith("__")):
            raise ValueError(f"{value!r} is not a label name")
        return value

    def candidate(self) -> Candidate:
        return Candidate(
            name=self.name,
            query=self.query,
            unit=self.unit,
            direction=self.direction,
            host_label=self.host_label,
            by=self.by,
        )


def _c(
    name: str,
    query: str,
    unit: str,
    *,
    host: str = m.LABEL_INSTANCE,
    by: str | None = None,
    direction: Literal["above", "below"] = "above",
) -> CandidateConfig:
    return CandidateConfig(
        name=name, query=query, unit=unit, host_label=host, by=by, direction=direction
    )


_NET = f'device!~"lo|ib.*|docker.*|veth.*",{NODES}'
DEFAULT_CANDIDATES: tuple[CandidateConfig, ...] = (
    _c(
        "network transmit",
        f"rate({m.NODE_NETWORK_TRANSMIT_BYTES_TOTAL}{{{_NET}}}[2m]) * 8 / 1e9",
        "Gbps",
        by=m.LABEL_NET_DEVICE,
    ),
    _c(
        "network receive",
        f"rate({m.NODE_NETWORK_RECEIVE_BYTES_TOTAL}{{{_NET}}}[2m]) * 8 / 1e9",
        "Gbps",
        by=m.LABEL_NET_DEVICE,
    ),
    _c(
        "InfiniBand transmit",
        f"rate({m.NODE_INFINIBAND_PORT_DATA_TRANSMITTED_BYTES_TOTAL}{{{NODES}}}[2m]) * 8 / 1e9",
        "Gbps",
        by=m.LABEL_IB_DEVICE,
    ),
    _c(
        "InfiniBand receive",
        f"rate({m.NODE_INFINIBAND_PORT_DATA_RECEIVED_BYTES_TOTAL}{{{NODES}}}[2m]) * 8 / 1e9",
        "Gbps",
        by=m.LABEL_IB_DEVICE,
    ),
    _c(
        "InfiniBand symbol errors",
        f"rate({m.NODE_INFINIBAND_SYMBOL_ERROR_TOTAL}{{{NODES}}}[5m]) * 60",
        "/min",
    ),
    _c("GPU power", f"{m.DCGM_FI_DEV_POWER_USAGE}{{{NODES}}}", "W", host=m.LABEL_HOSTNAME),
    _c("GPU temperature", f"{m.DCGM_FI_DEV_GPU_TEMP}{{{NODES}}}", "°C", host=m.LABEL_HOSTNAME),
    _c(
        "SM clock",
        f"{m.DCGM_FI_DEV_SM_CLOCK}{{{NODES}}}",
        "MHz",
        host=m.LABEL_HOSTNAME,
        direction="below",
    ),
    _c(
        "PCIe replays",
        f"rate({m.DCGM_FI_DEV_PCIE_REPLAY_COUNTER}{{{NODES}}}[5m]) * 60",
        "/min",
        host=m.LABEL_HOSTNAME,
    ),
    _c("CPU pressure", f"rate({m.NODE_PRESSURE_CPU_WAITING_SECONDS_TOTAL}{{{NODES}}}[2m])", "s/s"),
    _c(
        "memory pressure",
        f"rate({m.NODE_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL}{{{NODES}}}[2m])",
        "s/s",
    ),
    _c("load", f"{m.NODE_LOAD1}{{{NODES}}}", ""),
)


class PrecursorsConfig(BaseModel):
    lead_minutes: int = Field(default=10, ge=1, le=120)
    """The lead window: how long before each event a precursor is looked for."""
    quiet_minutes: int = Field(default=60, ge=0, le=24 * 60)
    """Ordinary windows keep this far from any event of their node, before or after."""
    peers: int = Field(default=64, ge=8, le=1024)
    """Nodes without an event read beside the events' nodes, for comparison."""
    min_events: int = Field(default=4, ge=2, le=100)
    """Below this many events the answer says the evidence is thin and claims nothing."""
    max_events: int = Field(default=60, ge=4, le=500)
    """The most recent events read at most: the reads stay bounded in a storm."""
    alpha: float = Field(default=0.01, gt=0.0, lt=0.5)
    """The corrected p-value a claim must be below."""
    candidates: list[CandidateConfig] | None = None
    """Replaces the default candidates."""
    add: list[CandidateConfig] = Field(default_factory=list)
    """Appended to the candidates."""

    @model_validator(mode="after")
    def _unique(self) -> PrecursorsConfig:
        names = [c.name for c in self.all_candidates()]
        dupe = next((n for n in names if names.count(n) > 1), None)
        if dupe is not None:
            raise ValueError(f"two candidates are named {dupe!r}")
        return self

    def all_candidates(self) -> list[CandidateConfig]:
        base = list(DEFAULT_CANDIDATES) if self.candidates is None else list(self.candidates)
        return [*base, *self.add]

    def candidate_list(self) -> tuple[Candidate, ...]:
        return tuple(c.candidate() for c in self.all_candidates())

    @property
    def lead_s(self) -> float:
        return self.lead_minutes * 60.0

    @property
    def quiet_s(self) -> float:
        return self.quiet_minutes * 60.0
