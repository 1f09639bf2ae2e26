"""What makes a repeat offender: the `health.repeat` section (bot/triage/repeats.py uses it).

Kept apart from the check table so that the table (`HealthConfig.repeat`) and the repeat logic
(which words faults through the table) do not import each other.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.models import VerdictLevel


class RepeatRule(BaseModel):
    """Which causes count, per GPU or per node, and (unset: the section's) how many
    occurrences in how many days make an offender and what its verdict becomes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A cause as a drain reason names it (`xid79`, `ecc_dbe`), or a kind's code for every
    # cause of the kind (`xid`: every Xid code, each counted on its own).
    causes: frozenset[str]
    # `gpu`: occurrences on one GPU; `node`: on any GPU of the node (three GPUs failing once
    # each make a node offender only under such a rule).
    per: Literal["gpu", "node"] = "gpu"
    occurrences: int | None = Field(default=None, ge=2)
    window_days: float | None = Field(default=None, gt=0)
    escalate_to: VerdictLevel | None = None


# The GPU's own hardware: a GPU that falls off the bus, loses memory rows or takes double-bit
# errors again and again is a part to replace (NVIDIA's catalog buckets these CONTACT_SUPPORT or
# the XID_48 workflow when they recur). Nodes that reboot or lose their link again and again
# are taken out, not replaced.
GPU_HARDWARE = frozenset(
    {"xid79", "xid48", "xid63", "xid64", "xid74", "xid92", "xid94", "xid95", "xid140"}
    | {"ecc_dbe", "row_remap_failure", "gpu_missing"}
)
FAILED_VALIDATION = "failed_validation"
"""The cause a failed "Test and resume" is counted under (bot/validation/service.py)."""
DEFAULT_RULES: tuple[RepeatRule, ...] = (
    RepeatRule(causes=GPU_HARDWARE),
    # A node that fails the site's validation again and again, repairs in between, is a lemon.
    RepeatRule(causes=frozenset({FAILED_VALIDATION}), per="node"),
    RepeatRule(
        causes=frozenset({"unexpected_reboot", "ib_link_down", "ib_flapping"}),
        per="node",
        escalate_to=VerdictLevel.DRAIN,
    ),
)


class RepeatConfig(BaseModel):
    """YAML key: `health.repeat`, e.g. `{window_days: 30, occurrences: 3, escalate_to: rma}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    window_days: float = Field(default=30.0, gt=0)
    occurrences: int = Field(default=3, ge=2)
    escalate_to: VerdictLevel = VerdictLevel.RMA
    # A fault unseen for this long starts a new occurrence when it is seen again; seen in every
    # sweep (or flapping within it), it stays one occurrence however long it lasts.
    gap_s: float = Field(default=3600.0, gt=0)
    # What the store keeps: occurrences seen in the last `keep_days`, at most `max_per_node`
    # a node (the newest).
    keep_days: float = Field(default=90.0, gt=0)
    max_per_node: int = Field(default=200, ge=1)
    rules: tuple[RepeatRule, ...] = DEFAULT_RULES

    def occurrences_of(self, rule: RepeatRule) -> int:
        return rule.occurrences or self.occurrences

    def window_days_of(self, rule: RepeatRule) -> float:
        return rule.window_days or self.window_days

    def escalate_to_of(self, rule: RepeatRule) -> VerdictLevel:
        return rule.escalate_to or self.escalate_to
