"""The Xid codes that matter for triage, after NVIDIA's Xid catalog.

Each code has its meaning and the catalog's resolution buckets: the immediate one (what to do
now) and the investigatory one (what to do if it comes back). The verdict follows from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.models import Action, Severity

RESTART_APP = "RESTART_APP"
RESET_GPU = "RESET_GPU"
RESTART_BM = "RESTART_BM"  # reboot the bare-metal node
CONTACT_SUPPORT = "CONTACT_SUPPORT"  # RMA path
WORKFLOW_XID_48 = "WORKFLOW_XID_48"  # DBE: check row remapping, then reset
WORKFLOW_NVLINK_ERR = "WORKFLOW_NVLINK_ERR"
WORKFLOW_NVLINK5_ERR = "WORKFLOW_NVLINK5_ERR"
UPDATE_SW = "UPDATE_SW"
CHECK_MECHANICALS = "CHECK_MECHANICALS"
IGNORE = "IGNORE"


# The catalog's bucket names are for tools; an answer says what to do in words.
BUCKET_WORDS: dict[str, str] = {
    RESTART_APP: "restart the job",
    RESET_GPU: "reset the GPU",
    RESTART_BM: "reboot the node",
    CONTACT_SUPPORT: "contact NVIDIA support (RMA)",
    WORKFLOW_XID_48: "check the GPU's row remapping, then reset it",
    WORKFLOW_NVLINK_ERR: "check the NVLink connections and reset the GPU",
    WORKFLOW_NVLINK5_ERR: "check the NVLink 5 connections and reset the GPU",
    UPDATE_SW: "update the driver and firmware",
    CHECK_MECHANICALS: "check cooling, power and seating",
}


def advice(immediate: str, investigatory: str) -> str:
    """`reset the GPU now; if it recurs, check the GPU's row remapping, then reset it`."""
    now = BUCKET_WORDS.get(immediate, immediate.lower().replace("_", " "))
    if investigatory == IGNORE or investigatory not in BUCKET_WORDS:
        return f"{now} now"
    return f"{now} now; if it recurs, {BUCKET_WORDS[investigatory]}"


@dataclass(frozen=True)
class XidInfo:
    code: int
    meaning: str
    immediate: str
    investigatory: str
    severity: Severity
    action: Action


def _x(
    code: int, meaning: str, immediate: str, investigatory: str, sev: Severity, act: Action
) -> XidInfo:
    return XidInfo(code, meaning, immediate, investigatory, sev, act)


W, C, INF = Severity.WARNING, Severity.CRITICAL, Severity.INFO
XID_CATALOG: dict[int, XidInfo] = {
    x.code: x
    for x in (
        _x(
            13,
            "graphics engine exception (usually the application)",
            RESTART_APP,
            IGNORE,
            INF,
            Action.REQUEUE,
        ),
        _x(
            31,
            "GPU memory page fault (usually the application)",
            RESTART_APP,
            IGNORE,
            INF,
            Action.REQUEUE,
        ),
        _x(
            43,
            "GPU stopped processing (application fault)",
            RESTART_APP,
            IGNORE,
            INF,
            Action.REQUEUE,
        ),
        _x(45, "preemptive cleanup after another fault", IGNORE, IGNORE, INF, Action.NONE),
        _x(48, "double-bit ECC error", RESET_GPU, WORKFLOW_XID_48, C, Action.DRAIN),
        _x(
            61,
            "internal micro-controller breakpoint",
            RESET_GPU,
            CONTACT_SUPPORT,
            W,
            Action.RESET_GPU,
        ),
        _x(62, "internal micro-controller halt", RESET_GPU, CONTACT_SUPPORT, C, Action.DRAIN),
        _x(
            63,
            "ECC page retirement or row remap recorded",
            IGNORE,
            WORKFLOW_XID_48,
            W,
            Action.WATCH,
        ),
        _x(
            64,
            "ECC page retirement or row remap failed",
            RESET_GPU,
            CONTACT_SUPPORT,
            C,
            Action.DRAIN,
        ),
        _x(74, "NVLink error", RESET_GPU, WORKFLOW_NVLINK_ERR, C, Action.DRAIN),
        _x(79, "GPU has fallen off the bus", RESTART_BM, CONTACT_SUPPORT, C, Action.DRAIN),
        _x(92, "high single-bit ECC error rate", IGNORE, CONTACT_SUPPORT, W, Action.WATCH),
        _x(
            94, "contained uncorrectable ECC error", RESTART_APP, WORKFLOW_XID_48, W, Action.REQUEUE
        ),
        _x(95, "uncontained uncorrectable ECC error", RESET_GPU, WORKFLOW_XID_48, C, Action.DRAIN),
        _x(119, "GSP RPC timeout", RESET_GPU, UPDATE_SW, C, Action.DRAIN),
        _x(120, "GSP error", RESET_GPU, UPDATE_SW, C, Action.DRAIN),
        _x(121, "C2C link corrected error", IGNORE, CHECK_MECHANICALS, W, Action.WATCH),
        _x(140, "unrecovered ECC error", RESET_GPU, WORKFLOW_XID_48, C, Action.DRAIN),
        _x(143, "GPU initialisation failure", RESTART_BM, CONTACT_SUPPORT, C, Action.DRAIN),
        _x(144, "NVLink 5 error", RESET_GPU, WORKFLOW_NVLINK5_ERR, C, Action.DRAIN),
        _x(
            154,
            "GPU recovery action changed (reset or reboot required)",
            RESTART_BM,
            IGNORE,
            C,
            Action.DRAIN,
        ),
    )
}


def describe(code: int) -> XidInfo:
    """The catalog entry, or a cautious default for a code not in it."""
    return XID_CATALOG.get(
        code,
        XidInfo(
            code,
            "Xid not in meowbot's catalog",
            RESTART_APP,
            CONTACT_SUPPORT,
            Severity.WARNING,
            Action.WATCH,
        ),
    )
