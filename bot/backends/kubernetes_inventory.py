"""Where a Kubernetes node sits, from its labels, beside the inventory the metrics give.

The node names the triage reads stay the metrics' (a node is judged on what it exports); the
rack and leaf switch come from the Node's topology labels where it has them
(`topology.kubernetes.io/rack`, a site's own label under `kubernetes.rack_labels`), else from
the inventory underneath (MEOWBOT_CONFIG's `topology:` hostlists). The labels are read with
one paginated list of Nodes a minute, whatever the fleet.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot import ticks
from bot.backends import kubernetes_nodes as kn
from bot.backends.kubernetes import KubernetesScheduler
from bot.errors import BackendError
from bot.models import Node
from bot.ports import Inventory, Located
from bot.triage.topology import Place

log = logging.getLogger(__name__)


class KubernetesPlaces:
    """An `Inventory` whose places come from Node labels first, then from `inner`."""

    REFRESH_S = 60.0

    def __init__(
        self,
        inner: Inventory,
        kube: KubernetesScheduler,
        *,
        rack_labels: Sequence[str] = kn.RACK_LABELS,
        switch_labels: Sequence[str] = kn.SWITCH_LABELS,
    ) -> None:
        self.inner = inner
        self.kube = kube
        self.rack_labels = tuple(rack_labels)
        self.switch_labels = tuple(switch_labels)
        self._places: dict[str, Place] = {}
        self._loaded_at: float | None = None  # never loaded yet

    async def load(self) -> None:
        await self.inner.load()
        if ticks.since(self._loaded_at) < self.REFRESH_S:
            return
        try:
            raw = await self.kube.raw_nodes()
        except BackendError as exc:
            # The places known before (or the config's) serve until the API answers again.
            log.warning("Kubernetes node labels unread, places kept: %s", exc.user_text())
            self._loaded_at = ticks.now()
            return
        places: dict[str, Place] = {}
        for node in raw:
            name = str((node.get("metadata") or {}).get("name") or "")
            rack, leaf = kn.label(node, self.rack_labels), kn.label(node, self.switch_labels)
            if name and (rack or leaf):
                places[name] = Place(leaf_switch=leaf, rack=rack)
        self._places = places
        self._loaded_at = ticks.now()

    def names(self) -> Sequence[str]:
        return self.inner.names()

    def node(self, name: str) -> Node | None:
        return self.inner.node(name)

    def leaf_switch(self, name: str) -> str | None:
        found = self._places.get(name)
        if found is not None and found.leaf_switch:
            return found.leaf_switch
        return self.inner.leaf_switch(name)

    def place(self, name: str) -> Located | None:
        found = self._places.get(name)
        if found is None:
            return self.inner.place(name)
        below = self.inner.place(name)
        return Place(
            leaf_switch=found.leaf_switch or (below.leaf_switch if below else ""),
            rack=found.rack or (below.rack if below else ""),
        )
