"""Names, topology and hardware identity of the simulated nodes.

Everything here is arithmetic on the node index, so 50,000 nodes cost a list of names and a dict,
not 50,000 objects: a rack holds 16 nodes, a leaf switch 32 (two racks), a spine 16 leaf switches
(512 nodes). Each GPU sits on the NUMA domain of its half of the board and shares a PCIe switch
with one NIC (GPU k with ``mlx5_k``), as on an HGX H100 board.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

RACK_SIZE = 16
LEAF_SIZE = 32
LEAVES_PER_SPINE = 16

GPU_MODEL = "NVIDIA H100 80GB HBM3"
DRIVER_VERSION = "550.54.15"
KERNEL_VERSION = "5.15.0-105-generic"
VBIOS_VERSION = "96.00.89.00.01"
NUMA_NODES = 2
# PCI bus of each GPU on an 8-GPU HGX board; other GPU counts get evenly spread buses.
_HGX_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
ETH_DEVICE = "eth0"


def _width(count: int, minimum: int) -> int:
    return max(minimum, len(str(count)))


class Topology:
    """Node names and where each node sits: rack, leaf switch, spine.

    Names are ``gpu-0001``... with at least four digits, wider when the fleet needs it
    (``gpu-00001``... ``gpu-50000``). Lookups take node names and return names.
    """

    def __init__(self, n_nodes: int) -> None:
        if n_nodes < 1:
            raise ValueError("a fleet needs at least one node")
        self.n_nodes = n_nodes
        width = _width(n_nodes, 4)
        self.names: tuple[str, ...] = tuple(f"gpu-{i:0{width}d}" for i in range(1, n_nodes + 1))
        self._index = {name: i for i, name in enumerate(self.names)}
        n_racks = -(-n_nodes // RACK_SIZE)
        n_leaves = -(-n_nodes // LEAF_SIZE)
        n_spines = -(-n_leaves // LEAVES_PER_SPINE)
        rw, lw, sw = _width(n_racks, 3), _width(n_leaves, 3), _width(n_spines, 2)
        self.racks: tuple[str, ...] = tuple(f"rack-{i:0{rw}d}" for i in range(1, n_racks + 1))
        self.leaf_switches: tuple[str, ...] = tuple(
            f"leaf-{i:0{lw}d}" for i in range(1, n_leaves + 1)
        )
        self.spines: tuple[str, ...] = tuple(f"spine-{i:0{sw}d}" for i in range(1, n_spines + 1))
        self._rack_index = {name: i for i, name in enumerate(self.racks)}
        self._leaf_index = {name: i for i, name in enumerate(self.leaf_switches)}
        self._spine_index = {name: i for i, name in enumerate(self.spines)}

    # --- by index (the engine's view) ---
    def index(self, node: str) -> int:
        """Index of a node name; KeyError for a name the fleet does not have."""
        return self._index[node]

    def has(self, node: str) -> bool:
        return node in self._index

    # --- by name ---
    def rack(self, node: str) -> str:
        return self.racks[self.index(node) // RACK_SIZE]

    def leaf_switch(self, node: str) -> str:
        return self.leaf_switches[self.index(node) // LEAF_SIZE]

    def spine(self, node: str) -> str:
        return self.spines[self.index(node) // (LEAF_SIZE * LEAVES_PER_SPINE)]

    def _members(self, group: int, size: int) -> tuple[str, ...]:
        return self.names[group * size : (group + 1) * size]

    def nodes_in_rack(self, rack: str) -> tuple[str, ...]:
        return self._members(self._rack_index[rack], RACK_SIZE)

    def nodes_on_leaf(self, leaf_switch: str) -> tuple[str, ...]:
        return self._members(self._leaf_index[leaf_switch], LEAF_SIZE)


class Hardware:
    """Per-GPU and per-NIC identity: UUIDs, PCI addresses, NUMA domains, affinity."""

    def __init__(self, seed: int, gpus_per_node: int) -> None:
        if not 1 <= gpus_per_node <= 16:
            raise ValueError("gpus_per_node must be between 1 and 16")
        self.seed = seed
        self.gpus_per_node = gpus_per_node
        self.nics_per_node = gpus_per_node
        self.numa_nodes = NUMA_NODES if gpus_per_node > 1 else 1
        self.nics: tuple[str, ...] = tuple(f"mlx5_{k}" for k in range(self.nics_per_node))
        self.ib_netdevs: tuple[str, ...] = tuple(f"ib{k}" for k in range(self.nics_per_node))
        # Interfaces node_exporter reports for node_network_*: the IPoIB ones, then Ethernet.
        self.netdevs: tuple[str, ...] = (*self.ib_netdevs, ETH_DEVICE)
        if gpus_per_node == len(_HGX_BUSES):
            buses: Sequence[str] = _HGX_BUSES
        else:
            buses = [f"{0x18 + (0xC0 * k) // gpus_per_node:02x}" for k in range(gpus_per_node)]
        self.pci_bus_ids: tuple[str, ...] = tuple(f"00000000:{b}:00.0" for b in buses)

    def gpu_numa(self, gpu: int) -> int:
        return gpu * self.numa_nodes // self.gpus_per_node

    def nic_numa(self, nic: int) -> int:
        return nic * self.numa_nodes // self.nics_per_node

    def uuid(self, node_index: int, gpu: int) -> str:
        digest = hashlib.blake2b(
            f"{self.seed}:{node_index}:{gpu}".encode(), digest_size=16
        ).hexdigest()
        return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
