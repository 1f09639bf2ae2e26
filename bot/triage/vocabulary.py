"""The one vocabulary of fault kinds and the one reading of node names. No I/O.

Every command (`/hw-faults`, `/hw-faults why`, `/node-health`, ...) and the plain-words reader
(bot/ask/entities.py) read words through these functions, so a word one of them takes is taken
by all: `reboots` names the unexpected reboots in `/hw-faults reboots`, in `/hw-faults why
reboots` and in "any reboots last night?"; `gpu42`, `GPU-0042` and `"gpu-0042"` name gpu-0042
wherever a node is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from bot.models import FaultKind
from bot.triage.checks import CHECKS

# Fault kinds as people write them, beyond the check table's codes, words and filter words:
# each -> the code or the family word (a check's `filters`) it stands for.
_KIND_WORDS: dict[str, str] = {
    "xids": "xid",
    "xid error": "xid",
    "xid errors": "xid",
    "gpu error": "xid",
    "gpu errors": "xid",
    "fell off the bus": "gpu_missing",
    "off the bus": "gpu_missing",
    "missing gpu": "gpu_missing",
    "missing gpus": "gpu_missing",
    "lost a gpu": "gpu_missing",
    "ecc errors": "ecc",
    "memory errors": "ecc",
    "double bit": "ecc_dbe",
    "double-bit": "ecc_dbe",
    "row remap": "remap",
    "row remaps": "remap",
    "remaps": "remap",
    "thermal throttling": "throttle",
    "throttling": "throttle",
    "throttled": "throttle",
    "throttles": "throttle",
    "overheating": "thermal",
    "overheat": "thermal",
    "temperatures": "temperature",
    "hot gpus": "thermal",
    "power cap": "throttle_power",
    "power capping": "throttle_power",
    "power brake": "power_brake",
    "nvlink errors": "nvlink",
    "pcie errors": "pcie",
    "ib errors": "ib",
    "ib link": "ib",
    "ib links": "ib",
    "link down": "ib_link_down",
    "links down": "ib_link_down",
    "link flapping": "ib_flapping",
    "flapping": "ib_flapping",
    "flaps": "ib_flapping",
    "symbol errors": "ib_symbol_errors",
    "nic": "nic",
    "nics": "nic",
    "reboots": "reboot",
    "rebooted": "reboot",
    "rebooting": "reboot",
    "restarts": "reboot",
    "restarted": "reboot",
    "crashed node": "reboot",
    # A kernel panic, a crash, a node going down hard: what the node shows is a reboot.
    "kernel panic": "reboot",
    "kernel panics": "reboot",
    "panic": "reboot",
    "panics": "reboot",
    "panicked": "reboot",
    "crash": "reboot",
    "crashes": "reboot",
    "crashed": "reboot",
    "crashing": "reboot",
    "dcgm": "dcgm",
    "infiniband": "ib",
}


def _phrases() -> dict[str, str]:
    out: dict[str, str] = {}
    for c in CHECKS:
        code = c.kind.value
        out[code] = code
        out[code.replace("_", " ")] = code
        out[code.replace("_", "-")] = code
        out[c.words.lower()] = code
        for word in c.filters:
            out.setdefault(word, word)
    out.update(_KIND_WORDS)
    return out


PHRASES: dict[str, str] = _phrases()
"""Every phrase that names a fault kind or a family -> the code or family word it stands for."""
FAMILIES: dict[str, frozenset[str]] = {
    w: frozenset(c.kind.value for c in CHECKS if w in c.filters) for c in CHECKS for w in c.filters
}
"""A family word (a check's `filters`: "reboot", "nvlink", "ib") -> the kinds' codes it takes."""

_QUOTES = "\"'`\u2018\u2019\u201c\u201d"


def codes_of(target: str) -> frozenset[str]:
    """What a phrase's target (a code or a family word) takes in, as codes."""
    return FAMILIES.get(target, frozenset({target}))


def kinds_named(word: str) -> frozenset[FaultKind] | None:
    """The kinds a word or phrase names (`reboot`, `reboots`, `Unexpected-Reboot`, `nvlink`,
    `link down`), its plural and -ing forms included; None when it names none."""
    text = " ".join(word.strip(_QUOTES + " ").lower().split())
    tries = [text, text.replace("-", "_"), text.replace("_", " ").replace("-", " ")]
    tries += [re.sub(r"(?:s|es|ing)$", "", t) for t in tries]
    for t in tries:
        target = PHRASES.get(t)
        if target is not None:
            return frozenset(FaultKind(code) for code in codes_of(target))
    return None


# --- node names ----------------------------------------------------------------------------

_LOOSE = re.compile(r"([A-Za-z][A-Za-z]*?)[-_.]?(\d{1,6})")


def number_index(names: Iterable[str]) -> dict[tuple[str, int], str]:
    """(the name's letters, its number) -> the name: `gpu42` and `GPU-042` find gpu-0042."""
    out: dict[tuple[str, int], str] = {}
    for name in names:
        m = _LOOSE.fullmatch(name)
        if m:
            out.setdefault((m.group(1).lower(), int(m.group(2))), name)
    return out


def unquote(text: str) -> str:
    """The text without quotes around words (as typed or as Slack's clients curl them), and
    a comma list's spaces closed up: `"gpu-0042", 'gpu-0043'` -> `gpu-0042,gpu-0043`."""
    text = "".join(ch for ch in text if ch not in _QUOTES)
    return re.sub(r"\s*,\s*", ",", text.strip())


def known_name(
    name: str,
    known: frozenset[str] | set[str],
    *,
    by_lower: Mapping[str, str],
    by_number: Mapping[tuple[str, int], str],
) -> str | None:
    """The known node a name typed means: itself, in another case, or written loosely
    (`gpu42` for gpu-0042); None when it means none."""
    if name in known:
        return name
    found = by_lower.get(name.lower())
    if found is not None:
        return found
    m = _LOOSE.fullmatch(name)
    if m:
        return by_number.get((m.group(1).lower(), int(m.group(2))))
    return None


def resolve_names(asked: Iterable[str], known: frozenset[str] | set[str]) -> list[str]:
    """Each name asked as the known node it means, or as typed where it means none."""
    asked = list(asked)
    if all(n in known for n in asked):
        return asked
    by_lower = {n.lower(): n for n in known}
    by_number = number_index(known)
    out = [known_name(n, known, by_lower=by_lower, by_number=by_number) or n for n in asked]
    return list(dict.fromkeys(out))
