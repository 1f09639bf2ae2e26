"""Where nodes sit (leaf switch, rack) when the metrics cannot say: a cluster's inventory in
MEOWBOT_CONFIG, by Slurm hostlist, so that a real-backend /hw-faults and the alerts group one
broken switch as one fault, as they do on the simulated fleet.

    topology:
      leaf_switches: {leaf-01: "gpu-[0001-0032]", leaf-02: "gpu-[0033-0064]"}
      racks: {r01: "gpu-[0001-0016]"}
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.triage.targets import BadInput, expand_nodes


class TopologyConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    leaf_switches: dict[str, str] = Field(default_factory=dict)
    racks: dict[str, str] = Field(default_factory=dict)

    @field_validator("leaf_switches", "racks")
    @classmethod
    def _hostlists(cls, v: dict[str, str]) -> dict[str, str]:
        for place, hosts in v.items():
            try:
                expand_nodes(hosts)
            except BadInput as exc:
                raise ValueError(f"{place}: {exc}") from None
        return v


@dataclass(frozen=True)
class Place:
    """A node's place; the shape alerts group by (a simulated `Node` has the same fields)."""

    leaf_switch: str
    rack: str


class Topology:
    """Node name -> leaf switch and rack, from the config's hostlists (first mention wins)."""

    def __init__(self, cfg: TopologyConfig) -> None:
        self._leaf: dict[str, str] = {}
        self._rack: dict[str, str] = {}
        for target, spec in ((self._leaf, cfg.leaf_switches), (self._rack, cfg.racks)):
            for place, hosts in spec.items():
                for name in expand_nodes(hosts):
                    target.setdefault(name, place)

    def leaf_switch(self, name: str) -> str | None:
        return self._leaf.get(name)

    def place(self, name: str) -> Place | None:
        leaf, rack = self._leaf.get(name), self._rack.get(name)
        if leaf is None and rack is None:
            return None
        return Place(leaf_switch=leaf or "", rack=rack or "")
