"""Every drain reason meowbot writes, built here: `meowbot: xid79 gpu3 by @ana`.

The prefix marks a reason as meowbot's (`SchedulerNode.reason_is_ours`): meowbot never
overwrites a reason an operator set and resumes only nodes it drained. /node-health proposes
`for_fault`, /job-slow's Drain `for_straggler`; a button press adds the person (`by_user`); the
Slurm adapter and the simulated scheduler accept what `check` accepts, so a reason the buttons
build is never refused by the scheduler it is sent to.
"""

from __future__ import annotations

from bot.models import Fault, FaultKind

PREFIX = "meowbot:"

MAX_CHARS = 120
"""The one length limit of a reason, whoever builds or sends it.

Slurm itself stores a node's reason as a free string (slurm.conf(5), scontrol(1) `Reason=`:
no maximum is documented), but `sinfo -R` and `scontrol show node` print it on one line and
slurmrestd hands it back whole in every node listing; 120 characters keep it readable on a
terminal line next to the node name and the user. Before this module the bot cut at 60, 120
and 120 and the Slurm adapter refused above 200: one limit now, the smallest a person
pressing a button was ever shown (120), so no reason built here is cut by another layer.
"""


def is_ours(reason: str | None) -> bool:
    return bool(reason and reason.startswith(PREFIX))


def short_cause(fault: Fault) -> str:
    """`xid79`, `ecc_dbe`, `ib_link_down`: the cause as Slurm's reason shows it; the kind is
    the name `health.disabled` takes (bot/triage/checks.py), so a reason names a check."""
    if fault.evidence and fault.evidence[0].labels.get("cause"):
        return fault.evidence[0].labels["cause"]  # a cause of its own (a failed validation)
    if fault.kind is FaultKind.XID and fault.evidence:
        ev = fault.evidence[0]
        code = ev.labels.get("xid")  # per-code counter: the value is a count, not the code
        return f"xid{code if code and code.isdigit() else int(ev.value)}"
    return fault.kind.value


def _bounded(cause: str, tail: str = "") -> str:
    """`meowbot: <cause><tail>` within MAX_CHARS: the cause is cut, never the tail (the user)."""
    text = " ".join(cause.split())
    if text.startswith(PREFIX):
        text = text[len(PREFIX) :].strip()
    text = text or "alert"
    room = MAX_CHARS - len(PREFIX) - 1 - len(tail)
    if room < 1:
        return f"{PREFIX} {text}{tail}"[:MAX_CHARS]
    if len(text) > room:
        text = text[: room - 1] + "…"
    return f"{PREFIX} {text}{tail}"


def for_fault(fault: Fault) -> str:
    """`meowbot: xid79 gpu3`: what /node-health proposes for a node's worst fault."""
    gpu = f" gpu{fault.gpu}" if fault.gpu is not None else ""
    return _bounded(f"{short_cause(fault)}{gpu}")


def for_straggler(job_id: str, cause: FaultKind | None) -> str:
    """`meowbot: slows job 4242 (throttle_power)`: /job-slow's Drain."""
    return _bounded(f"slows job {job_id} ({cause.value if cause else 'straggler'})")


def by_user(cause: str, user_name: str) -> str:
    """`meowbot: <cause> by @user`: a cause (with or without the prefix: a button may carry
    either) and who pressed the button. The cause is cut, never the user."""
    user = " ".join(user_name.split()).lstrip("@") or "unknown"
    return _bounded(cause, f" by @{user}")


def check(reason: str) -> str:
    """The reason as a scheduler may take it, or ValueError: one line, at most MAX_CHARS. It
    goes into a REST body or an `scontrol` argument, never through a shell."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("A drain reason is required.")
    if len(reason) > MAX_CHARS:
        raise ValueError(f"A drain reason is at most {MAX_CHARS} characters.")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in reason):
        raise ValueError("A drain reason must be one line without control characters.")
    return reason


def for_failed_validation(step: str, why: str) -> str:
    """`meowbot: failed validation dcgm-diag-r2: Memory GPU 3: ...`: the step that failed."""
    return _bounded(f"failed validation {step}: {why}")


def for_cancelled_validation(user_name: str) -> str:
    """`meowbot: validation cancelled by @ana`: the node stays out until someone acts."""
    return by_user("validation cancelled", user_name)
