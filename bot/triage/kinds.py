"""Each fault kind in words, for the people reading the answers.

The kind's code (`throttle_sw_thermal`) is what filters, configs and alerts key on; the words
are what a person understands at 3 a.m. Answers give both: "software thermal slowdown
(`throttle_sw_thermal`)". `/hw-faults` takes these words as filters too (bot/triage/targets.py).
"""

from __future__ import annotations

from bot.models import FaultKind
from bot.triage.checks import CHECKS

# A check's kind in words is its entry's (bot/triage/checks.py); the causes of a slow job that
# no health check finds are worded here.
WORDS: dict[FaultKind, str] = {
    **{c.kind: c.words for c in CHECKS},
    FaultKind.LOW_SM_CLOCK: "low SM clock",
    FaultKind.CPU_CONTENTION: "CPU contention",
    FaultKind.NUMA_MISPLACEMENT: "NUMA misplacement",
    FaultKind.PIPELINE_IMBALANCE: "pipeline imbalance",
    FaultKind.GC_STALLS: "garbage-collection stalls",
    FaultKind.JOB_SLOWDOWN: "job slowdown",
}


def words(kind: FaultKind) -> str:
    """ "software thermal slowdown": the kind as a person says it."""
    return WORDS.get(kind, kind.value.replace("_", " "))
