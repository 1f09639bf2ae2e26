"""`/hw-faults why <kind> [node|hostlist] [--since 7d]`, read. No I/O."""

from __future__ import annotations

from dataclasses import dataclass

from bot.triage.targets import DURATION_RE, BadInput, expand_nodes, take_since
from bot.triage.vocabulary import kinds_named, unquote

WHY_WORD = "why"
DEFAULT_WINDOW_S = 7 * 86400.0
MIN_WINDOW_S = 3600.0
MAX_WINDOW_S = 14 * 86400.0
"""Two weeks at most: a minute's resolution around events, and ordinary windows, stay
within what one range query may return (11,000 points a series)."""
MAX_KINDS_SAID = 3
"""The kinds an error names: the ones found over days from the metrics come first."""
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class WhyAsk:
    kind: str
    nodes: tuple[str, ...] | None
    window_s: float


def say_window(seconds: float) -> str:
    if seconds % 86400 == 0:
        return f"{int(seconds // 86400)} d"
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 60)} min"


def _window(word: str) -> float:
    found = DURATION_RE.fullmatch(word.strip().lower())
    if not found:
        raise BadInput("Give `--since` a duration like `3d` or `36h`.")
    seconds = float(int(found.group(1)) * _UNIT_S[found.group(2)])
    if not MIN_WINDOW_S <= seconds <= MAX_WINDOW_S:
        raise BadInput(
            f"`--since` must be between {say_window(MIN_WINDOW_S)} and {say_window(MAX_WINDOW_S)}."
        )
    return seconds


def _kind(word: str, kinds: tuple[str, ...]) -> str:
    """The kind a word names, in the words every command takes (`reboots`, `Unexpected-Reboot`,
    `nvlink`), among those whose history can be read: the first of them for a family word."""
    named = kinds_named(word)
    codes = {k.value for k in named} if named else {word.lower().replace("-", "_")}
    found = [k for k in kinds if k in codes]
    if len(found) == 1:
        return found[0]
    if found:  # a family word of several readable kinds: which one is the person's to say
        raise BadInput(
            f"`{word[:40]}` names several kinds I can look back at: "
            + ", ".join(f"`{k}`" for k in found[:6])
            + ("..." if len(found) > 6 else "")
            + "; name one."
        )
    shown = ", ".join(f"`{k}`" for k in kinds[:MAX_KINDS_SAID])
    more = " and the other kinds `/hw-faults help` lists" if len(kinds) > MAX_KINDS_SAID else ""
    if named:
        codes_said = ", ".join(sorted(f"`{k.value}`" for k in named))
        raise BadInput(
            f"`{word[:40]}` names {codes_said}, whose history I cannot read here; "
            f"I can look back at {shown}{more}."
        )
    raise BadInput(f"I cannot look back at `{word[:40]}` faults; I can for {shown}{more}.")


def parse_why(text: str, kinds: tuple[str, ...]) -> WhyAsk:
    """The words after `why`: a kind first, then at most one node or hostlist and `--since`."""
    words, since = take_since(unquote(text), "7d")
    if not words:
        raise BadInput(
            "Name a kind of fault: `/hw-faults why unexpected_reboot`. Kinds: "
            + ", ".join(f"`{k}`" for k in kinds[:MAX_KINDS_SAID])
            + ("..." if len(kinds) > MAX_KINDS_SAID else ".")
        )
    kind = _kind(words[0], kinds)
    window = _window(since) if since is not None else DEFAULT_WINDOW_S
    if len(words) > 2:
        raise BadInput(f"I read `{words[2][:40]}` as a second hostlist; give one.")
    nodes = tuple(expand_nodes(words[1])) if len(words) == 2 else None
    return WhyAsk(kind, nodes, window)
