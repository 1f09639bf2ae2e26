"""What an Alertmanager alert is about: its cause, read from its labels. No I/O.

Alerts of one cause on many nodes at once are one event (one message), so the cause must not
depend on how a rule's author spelled it: an explicit `meowbot_cause` label wins, then an `xid`
label (`xid_79`: every rule reporting Xid 79 is the same cause), then the alertnames of the
usual DCGM and node_exporter rules, mapped to the fault kinds meowbot's own sweep reports, so
that both sources correlate. Any other alertname is its own cause.

The sweep names its causes the same way (`fault_cause`): an Xid fault is `xid_<code>`, any other
fault its kind's value. A cause is still read as its fault kind wherever a kind is what counts
(`kind_of`, `named_in`): config that names `xid` covers `xid_79` and every other Xid.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import TypeVar

from bot.metric_names import LABEL_XID
from bot.models import Fault, FaultKind
from bot.triage.checks import ALERTNAMES
from bot.triage.repeats import OCCURRENCES_SERIES

T = TypeVar("T")

CAUSE_LABEL = "meowbot_cause"
XID_PREFIX = "xid_"
_CAUSE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")

# Alert names of dcgm-exporter's and node_exporter's common rule sets (lower case), by the
# fault kind they report: each check's entry lists its own (`alertnames`). An `xid` label on
# any of them names the Xid and wins.
KNOWN_ALERTNAMES: dict[str, FaultKind] = ALERTNAMES


def xid_cause(code: int) -> str:
    return f"{XID_PREFIX}{code}"


def xid_of(cause: str) -> int | None:
    """The Xid a cause names (`xid_79` -> 79), None for any other cause."""
    rest = cause.removeprefix(XID_PREFIX)
    return int(rest) if rest != cause and rest.isdigit() else None


def cause_of(alertname: str, labels: dict[str, str]) -> str:
    """The cause an Alertmanager alert reports (see the module's docstring)."""
    explicit = labels.get(CAUSE_LABEL, "").strip()
    if _CAUSE_RE.fullmatch(explicit):
        return explicit
    xid = labels.get("xid", "").strip()
    if xid.isdigit() and len(xid) <= 5:
        return xid_cause(int(xid))
    known = KNOWN_ALERTNAMES.get(alertname.lower())
    if known is not None:
        return known.value
    # A group id is `cause|scope|value`: a bar in a name must not split it.
    return alertname.replace("|", "/")[:100]


def kind_of(cause: str) -> FaultKind | None:
    """The fault kind a cause is (`xid_79` -> XID, `ecc_dbe` -> ECC_DBE); None for a cause that
    is only an Alertmanager alert name."""
    if xid_of(cause) is not None:
        return FaultKind.XID
    try:
        return FaultKind(cause)
    except ValueError:
        return None


def named_in(cause: str, names: Collection[str]) -> bool:
    """Whether configuration naming `names` covers `cause`: by the cause itself, or by its
    fault kind (`xid` covers `xid_79`)."""
    kind = kind_of(cause)
    return cause in names or (kind is not None and kind.value in names)


def lookup(cause: str, table: Mapping[str, T]) -> T | None:
    """What `table` says of `cause`, else of its fault kind (`xid_79`, then `xid`)."""
    if cause in table:
        return table[cause]
    kind = kind_of(cause)
    return table.get(kind.value) if kind is not None else None


def xid_code(fault: Fault) -> int | None:
    """The Xid an Xid fault reports: its evidence's `xid` label (a per-code counter, whose value
    is a count), else the last-Xid gauge's value, which is the code. None when unknown."""
    if fault.kind is not FaultKind.XID or not fault.evidence:
        return None
    ev = fault.evidence[0]
    label = ev.labels.get(LABEL_XID, "").strip()
    if label:
        return int(label) if label.isdigit() and len(label) <= 5 else None
    # A repeat offender's added fault counts its occurrences: no code without the label.
    if ev.series != OCCURRENCES_SERIES and 0 < ev.value < 100_000 and ev.value.is_integer():
        return int(ev.value)
    return None


def fault_cause(fault: Fault) -> str:
    """The cause of the sweep's alert for `fault`: `xid_79` for an Xid whose code is known,
    so it is one event with Alertmanager's Xid 79 and apart from Xid 48; else the kind."""
    code = xid_code(fault)
    return xid_cause(code) if code is not None else fault.kind.value
