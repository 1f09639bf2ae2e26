"""The simulated fleet: meowbot's embedded default cluster and the test bed of its checks.

``SimFleet`` holds the nodes, jobs, runs and injected faults; ``SimFleet.snapshot()`` gives the
metrics as columns, ``samples()``/``exposition()`` as series, ``openmetrics_history()`` as
backfill for a real Prometheus.
"""

from bot.backends.sim.exposition import FAMILIES, Family, Labels, Sample
from bot.backends.sim.faults import ALL_NICS, KIND_SPECS, XID_CODES, InjectedFault
from bot.backends.sim.fleet import NODE_KINDS, STRAGGLER_NODE_KINDS, SimFleet
from bot.backends.sim.inventory import Topology
from bot.backends.sim.snapshot import FleetSnapshot
from bot.backends.sim.workload import JobSpec

__all__ = [
    "ALL_NICS",
    "FAMILIES",
    "KIND_SPECS",
    "NODE_KINDS",
    "STRAGGLER_NODE_KINDS",
    "XID_CODES",
    "Family",
    "FleetSnapshot",
    "InjectedFault",
    "JobSpec",
    "Labels",
    "Sample",
    "SimFleet",
    "Topology",
]
