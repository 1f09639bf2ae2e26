"""What a job's owner is told when meowbot takes the job's node out: the model and its words.

The words are the core's (the renderer lays them out): why the node went, in a person's terms
rather than the drain reason's code (`xid79 gpu3` -> "Xid 79 (GPU has fallen off the bus) on
GPU 3"), and what becomes of the job. A drain lets running jobs finish; a node set down stops
them, and Slurm then requeues a job that allows it (its `requeue` flag) and kills the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from bot import drain_reason
from bot.models import FaultKind
from bot.triage import kinds, xid

_XID_RE = re.compile(r"^xid(\d+)$")
_GPU_RE = re.compile(r"^gpu(\d+)$")
_BY_RE = re.compile(r"^(?P<cause>.*?)(?: by @(?P<user>\S+))?$")
_KINDS = {k.value: k for k in FaultKind}


class Fate(StrEnum):
    FINISHES = "finishes"  # drained: the job runs to its end, no new job starts on the node
    REQUEUED = "requeued"  # set down: stopped and put back in the queue
    KILLED = "killed"  # set down: stopped for good (the job does not allow requeue)
    STOPPED = "stopped"  # set down, and the scheduler did not say whether it requeues


@dataclass(frozen=True)
class JobNotice:
    job_id: str
    job_name: str
    node: str
    reason: str  # the drain reason as the scheduler holds it: `meowbot: xid79 gpu3 by @ana`
    fate: Fate
    by_you: bool = False
    """The owner pressed the drain themselves: told as "you drained", not as news."""

    @property
    def why(self) -> str:
        return reason_words(self.reason)

    @property
    def what_happens(self) -> str:
        return FATE_WORDS[self.fate]

    @property
    def stopped(self) -> bool:
        return self.fate is not Fate.FINISHES


FATE_WORDS = {
    Fate.FINISHES: "It keeps running to its end; no new job starts on that node.",
    Fate.REQUEUED: "It was stopped and requeued: it starts again on other nodes.",
    Fate.KILLED: "It was stopped and not requeued (it does not allow requeue): resubmit it.",
    Fate.STOPPED: "It was stopped; it is requeued if it allows requeue, else resubmit it.",
}


def fate(requeue: bool | None, *, now: bool) -> Fate:
    """What a drain (`now` False) or a node set down (`now` True) does to a running job."""
    if not now:
        return Fate.FINISHES
    if requeue is None:
        return Fate.STOPPED
    return Fate.REQUEUED if requeue else Fate.KILLED


def _token_words(token: str) -> str:
    if m := _XID_RE.fullmatch(token):
        code = int(m.group(1))
        return f"Xid {code} ({xid.describe(code).meaning})"
    if m := _GPU_RE.fullmatch(token):
        return f"on GPU {m.group(1)}"
    if token in _KINDS:
        return kinds.words(_KINDS[token])
    return token


def reason_words(reason: str) -> str:
    """`meowbot: xid79 gpu3 by @ana` -> `Xid 79 (GPU has fallen off the bus) on GPU 3, by @ana`;
    a reason meowbot did not build is given as it stands."""
    if not drain_reason.is_ours(reason):
        return reason
    text = reason[len(drain_reason.PREFIX) :].strip()
    m = _BY_RE.fullmatch(text)
    cause, user = (m.group("cause"), m.group("user")) if m else (text, None)
    said = " ".join(_token_words(t) for t in cause.split()) or "a fault"
    return f"{said}, by @{user}" if user else said
