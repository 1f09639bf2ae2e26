"""Parsing what people type: node names, Slurm hostlists, fault kinds, durations."""

from __future__ import annotations

import re

import hostlist

from bot.models import FaultKind
from bot.triage.vocabulary import kinds_named, unquote

NODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
HOSTLIST_RE = re.compile(r"^[A-Za-z0-9._\-\[\],]{1,2000}$")
MAX_EXPANSION = 50_000
DURATION_RE = re.compile(r"^(\d{1,4})([smhd])$")
MAX_WINDOW_S = 7 * 86400
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class BadInput(ValueError):
    """What the person typed cannot be used; the message is the sentence they read."""


def expand_nodes(text: str) -> list[str]:
    """A node name or a Slurm hostlist (`gpu-[0001-0064,0100]`), expanded with a cap."""
    text = unquote(text)
    if not text:
        raise BadInput("Give a node name or a hostlist, e.g. `gpu-0042` or `gpu-[0001-0064]`.")
    if not HOSTLIST_RE.fullmatch(text):
        raise BadInput(
            "That is not a node name or a hostlist: use letters, digits, `-`, `.`, and "
            "ranges like `gpu-[0001-0064]`."
        )
    if not _within_cap(text):
        raise BadInput(f"That hostlist names more than {MAX_EXPANSION:,} nodes; narrow it down.")
    try:
        names = hostlist.expand_hostlist(text)
    except hostlist.BadHostlist as exc:
        raise BadInput(f"That hostlist is malformed ({exc}).") from None
    if len(names) > MAX_EXPANSION:
        raise BadInput(f"That hostlist names more than {MAX_EXPANSION:,} nodes; narrow it down.")
    bad = next((n for n in names if not NODE_RE.fullmatch(n)), None)
    if bad is not None:
        raise BadInput(f"`{bad[:40]}` is not a valid node name.")
    return list(dict.fromkeys(names))


def _within_cap(text: str) -> bool:
    """Bounds a hostlist's size before expanding it, so `gpu-[0-999999999]` costs nothing."""
    total = 0
    for part in re.findall(r"[^,\[]*(?:\[[^\]]*\])*[^,]*", text):
        size = 1
        for ranges in re.findall(r"\[([^\]]*)\]", part):
            count = 0
            for item in ranges.split(","):
                lo, _, hi = item.partition("-")
                if lo.isdigit() and hi.isdigit():
                    count += max(0, int(hi) - int(lo) + 1)
                else:
                    count += 1
            size *= count
            if size > MAX_EXPANSION:
                return False
        total += size if part else 0
        if total > MAX_EXPANSION:
            return False
    return True


def compress(names: list[str]) -> str:
    return str(hostlist.collect_hostlist(names))


def parse_kinds(word: str) -> frozenset[FaultKind] | None:
    """The kinds a filter word names, in the one vocabulary every command and plain words
    read (bot/triage/vocabulary.py: `temp`, `reboots`, `ib-link-down`); None when it names
    none (then it is read as a hostlist)."""
    return kinds_named(word)


def parse_duration(text: str) -> float:
    m = DURATION_RE.fullmatch(text.strip().lower())
    if not m:
        raise BadInput("Give a duration like `30m`, `6h` or `2d`.")
    seconds = int(m.group(1)) * _UNIT_S[m.group(2)]
    if not 60 <= seconds <= MAX_WINDOW_S:
        raise BadInput("The window must be between 1 minute and 7 days.")
    return float(seconds)


def take_since(text: str, example: str) -> tuple[list[str], str | None]:
    """`text`'s words without its `--since D` (`-s D`, `--since=D`), and D (None if absent),
    for every command that takes a window: each checks D against its own range."""
    words = text.split()
    rest: list[str] = []
    since: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word in {"--since", "-s"}:
            if i + 1 >= len(words):
                raise BadInput(f"`--since` needs a duration, e.g. `--since {example}`.")
            since = words[i + 1]
            i += 2
            continue
        if word.startswith("--since="):
            since = word.split("=", 1)[1]
        else:
            rest.append(word)
        i += 1
    return rest, since
