"""Where an alert's nodes stand in the scheduler when its message is drawn: which button each
gets. Pure: the scheduler's states in, one `Standings` out (bot/alerts/runtime.py reads the
states of a pass's nodes in one bounded call).

- in service: Drain (after jobs or now, as the group's severity says: bot/alerts/policy.py);
- taken out by meowbot (its `meowbot:` reason): Resume;
- taken out, tainted or given a reason by someone else (an operator, the scheduler itself for
  a node that stopped answering): neither; the message says who holds it;
- not a node the scheduler lists: neither; the message says so;
- the scheduler did not answer: Drain as for a node in service (a press reads the state
  before it acts and refuses what does not fit), no Resume (nothing says it is meowbot's);
- no scheduler at all: no Drain, no Resume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from bot.ports import SchedulerNode


class Standing(StrEnum):
    IN_SERVICE = "in_service"
    OURS = "ours"
    HELD = "held"
    UNLISTED = "unlisted"


@dataclass(frozen=True)
class NodeStanding:
    standing: Standing
    state: str = ""  # "drained", "down", "tainted": how it is out, for the words
    reason: str = ""
    by: str = ""  # who set the reason, where the scheduler says


@dataclass(frozen=True)
class Standings:
    """The nodes of one notifier pass as the scheduler stands them."""

    scheduler: str = ""
    """The scheduler's name ("Slurm"); "" when none is configured."""
    nodes: Mapping[str, NodeStanding] | None = field(default=None)
    """By node; None when the scheduler did not answer (an error, its time ran out)."""

    @property
    def known(self) -> bool:
        return bool(self.scheduler) and self.nodes is not None

    def of(self, node: str) -> NodeStanding | None:
        """The node's standing; None when it is not known (no scheduler, or no answer)."""
        if self.nodes is None:
            return None
        return self.nodes.get(node, NodeStanding(Standing.UNLISTED))


NO_SCHEDULER = Standings()


def standing_of(node: SchedulerNode) -> NodeStanding:
    """One node's standing: meowbot's own drain, someone else's hold, or in service."""
    reason = node.reason or ""
    state = "down" if node.down else "drained" if node.out_of_service else "tainted"
    if node.out_of_service and node.reason_is_ours:
        return NodeStanding(Standing.OURS, state, reason, node.reason_set_by or "")
    if node.out_of_service or (reason and not node.reason_is_ours):
        # A reason meowbot did not set, the node in service or not (an operator's taint):
        # a drain would not overwrite it and a resume would not be meowbot's to make.
        return NodeStanding(Standing.HELD, state, reason, node.reason_set_by or "")
    return NodeStanding(Standing.IN_SERVICE)


def standings(
    scheduler: str, states: Mapping[str, SchedulerNode] | None, nodes: Iterable[str]
) -> Standings:
    """`nodes` as `states` (the scheduler's answer, None: no answer) stands them."""
    if states is None:
        return Standings(scheduler, None)
    return Standings(
        scheduler, {n: standing_of(states[n]) for n in sorted(set(nodes)) if n in states}
    )
