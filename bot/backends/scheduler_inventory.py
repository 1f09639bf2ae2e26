"""The nodes as the scheduler lists them: the inventory of a cluster without a metrics source.

With Slurm or Kubernetes and no Prometheus, the fleet is what the scheduler knows (its node
list, one read a refresh), never a simulated stand-in: /node-health of a name it does not list
says so, and a node it lists shows its scheduler state. Places come from MEOWBOT_CONFIG's
`topology:` hostlists (and, for Kubernetes, from Node labels: `KubernetesPlaces` wraps this);
the hardware (`node`) is unknown without metrics.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

from bot.errors import BackendError
from bot.ports import Scheduler
from bot.triage.topology import Place, Topology

log = logging.getLogger(__name__)


class SchedulerInventory:
    """An `Inventory` over `Scheduler.nodes()`: the names it lists, refreshed every REFRESH_S."""

    REFRESH_S = 30.0

    def __init__(self, scheduler: Scheduler, topology: Topology | None = None) -> None:
        self.scheduler = scheduler
        self.topology = topology
        self._names: tuple[str, ...] = ()
        self._loaded_at = -math.inf
        self._ever = False

    async def load(self) -> None:
        if time.monotonic() - self._loaded_at < self.REFRESH_S:
            return
        try:
            listed = await self.scheduler.nodes()
        except BackendError:
            if not self._ever:
                raise  # nothing known yet: the caller says the scheduler is unreachable
            # The names listed before serve until the scheduler answers again.
            log.warning("scheduler node list unread; the last one kept")
            self._loaded_at = time.monotonic()
            return
        self._names = tuple(sorted(listed))
        self._loaded_at = time.monotonic()
        self._ever = True

    def names(self) -> Sequence[str]:
        return self._names

    def node(self, name: str) -> None:
        return None  # the hardware is read from metrics, and there are none

    def leaf_switch(self, name: str) -> str | None:
        return self.topology.leaf_switch(name) if self.topology is not None else None

    def place(self, name: str) -> Place | None:
        return self.topology.place(name) if self.topology is not None else None
