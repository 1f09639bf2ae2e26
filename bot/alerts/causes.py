"""What an Alertmanager alert is about: its cause, read from its labels. No I/O.

Alerts of one cause on many nodes at once are one event (one message), so the cause must not
depend on how a rule's author spelled it: an explicit `meowbot_cause` label wins, then an `xid`
label (`xid_79`: every rule reporting Xid 79 is the same cause), then the alertnames of the
usual DCGM and node_exporter rules, mapped to the fault kinds meowbot's own sweep reports, so
that both sources correlate. Any other alertname is its own cause.
"""

from __future__ import annotations

import re

from bot.models import FaultKind

CAUSE_LABEL = "meowbot_cause"
XID_PREFIX = "xid_"
_CAUSE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")

# Alert names of dcgm-exporter's and node_exporter's common rule sets (lower case), by the
# fault kind they report. An `xid` label on any of them names the Xid and wins.
KNOWN_ALERTNAMES: dict[str, FaultKind] = {
    "dcgm_fi_dev_xid_errors": FaultKind.XID,
    "gpuxiderror": FaultKind.XID,
    "gpuxiderrors": FaultKind.XID,
    "dcgmxiderrors": FaultKind.XID,
    "dcgm_fi_dev_ecc_dbe_vol_total": FaultKind.ECC_DBE,
    "gpueccdbe": FaultKind.ECC_DBE,
    "gpueccdoublebiterrors": FaultKind.ECC_DBE,
    "dcgm_fi_dev_row_remap_failure": FaultKind.ROW_REMAP_FAILURE,
    "gpurowremapfailure": FaultKind.ROW_REMAP_FAILURE,
    "dcgm_fi_dev_gpu_temp": FaultKind.HIGH_TEMPERATURE,
    "gpuhightemperature": FaultKind.HIGH_TEMPERATURE,
    "gputemperaturehigh": FaultKind.HIGH_TEMPERATURE,
    "dcgm_fi_dev_nvlink_crc_flit_error_count_total": FaultKind.NVLINK_CRC,
    "gpunvlinkcrcerrors": FaultKind.NVLINK_CRC,
    "nvlinkreplayerrors": FaultKind.NVLINK_REPLAY,
    "dcgm_fi_dev_pcie_replay_counter": FaultKind.PCIE_REPLAY,
    "gpupciereplays": FaultKind.PCIE_REPLAY,
    "gpumissing": FaultKind.GPU_MISSING,
    "gpucountmismatch": FaultKind.GPU_MISSING,
    "infinibandlinkdown": FaultKind.IB_LINK_DOWN,
    "nodeinfinibandportdown": FaultKind.IB_LINK_DOWN,
    "infinibandlinkflapping": FaultKind.IB_FLAPPING,
    "nodenetworkreceiveerrs": FaultKind.NIC_ERRORS,
    "nodenetworktransmiterrs": FaultKind.NIC_ERRORS,
    "nodenetworkinterfaceflapping": FaultKind.NIC_ERRORS,
    "noderebooted": FaultKind.UNEXPECTED_REBOOT,
    "nodeunexpectedreboot": FaultKind.UNEXPECTED_REBOOT,
}


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
