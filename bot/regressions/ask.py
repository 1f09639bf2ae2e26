"""What `/regressions [component ...] [--since 7d]` asks, read from its text. No I/O.

The components a person may name are the built-in ones (driver, kernel, firmware) and the info
metrics the config adds (an image, NCCL, CUDA); the caller passes the list it knows. A window
is bounded (`MAX_WINDOW`): a rollout needs days of pace on both sides, and a month is as far
as the recorded pace is kept and the queries stay bounded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from bot.regressions.models import Component

DEFAULT_WINDOW = timedelta(days=7)
MIN_WINDOW = timedelta(hours=6)
MAX_WINDOW = timedelta(days=30)
BUILT_IN: tuple[str, ...] = tuple(c.value for c in Component)

# What people call the built-in components besides their names.
ALIASES: dict[str, str] = {
    "drivers": Component.DRIVER,
    "nvidia-driver": Component.DRIVER,
    "kernels": Component.KERNEL,
    "linux": Component.KERNEL,
    "vbios": Component.FIRMWARE,
    "fw": Component.FIRMWARE,
    "gpu-firmware": Component.FIRMWARE,
}
EVERY_WORDS = {"all", "every", "everything", "any"}

_DURATION = re.compile(r"(\d{1,5})\s*(h|hours?|d|days?|w|weeks?)")
_UNIT = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


class AskError(ValueError):
    """The text cannot be read; `str(error)` is the sentence for the person who typed it."""


@dataclass(frozen=True)
class RegressionsAsk:
    components: tuple[str, ...]
    """In the order given; every known component when none was named."""
    window: timedelta
    named: bool
    """Whether the person named components (the answer then speaks of those only)."""


def parse_window(text: str) -> timedelta:
    m = _DURATION.fullmatch(text.strip().lower())
    if m is None:
        raise AskError(f"`{text[:20]}` is not a window: give one like `36h`, `7d` or `2w`.")
    window = int(m.group(1)) * _UNIT[m.group(2)[0]]
    if window < MIN_WINDOW:
        raise AskError(
            "A rollout needs pace before and after it: give at least "
            f"{say_window(MIN_WINDOW)} (`--since 7d` is the default)."
        )
    if window > MAX_WINDOW:
        raise AskError(
            f"`--since {text.strip()}` is more than I read at once: "
            f"at most {say_window(MAX_WINDOW)}."
        )
    return window


def parse_ask(text: str, known: Sequence[str]) -> RegressionsAsk:
    """`kernel --since 7d` -> the components and the window; raises AskError with a sentence."""
    names = {k.lower(): k for k in known}
    words = text.split()
    chosen: list[str] = []
    window: timedelta | None = None
    every = False
    i = 0
    while i < len(words):
        word = words[i]
        low = word.lower()
        if low in {"--since", "-s", "since"}:
            if i + 1 >= len(words):
                raise AskError("`--since` needs a window, e.g. `--since 7d`.")
            window = _once(window, parse_window(words[i + 1]))
            i += 2
            continue
        if low.startswith("--since="):
            window = _once(window, parse_window(word.split("=", 1)[1]))
        elif low in EVERY_WORDS:
            every = True
        elif (name := names.get(low) or _alias(low, names)) is not None:
            if name not in chosen:
                chosen.append(name)
        else:
            raise AskError(_unknown(word, known))
        i += 1
    if every and chosen:
        raise AskError("Name components or say `all`, not both.")
    return RegressionsAsk(
        components=tuple(chosen) if chosen else tuple(known),
        window=window or DEFAULT_WINDOW,
        named=bool(chosen),
    )


def _alias(word: str, names: dict[str, str]) -> str | None:
    target = ALIASES.get(word)
    return names.get(target) if target is not None else None


def _once(window: timedelta | None, new: timedelta) -> timedelta:
    if window is not None:
        raise AskError("Give `--since` once.")
    return new


def _unknown(word: str, known: Sequence[str]) -> str:
    shown = word[:40]
    if shown.startswith("-"):
        return f"I don't know the option `{shown}`; the one option is `--since 7d`."
    close = difflib.get_close_matches(word.lower(), [*known, *ALIASES], n=1, cutoff=0.6)
    hint = f" Did you mean `{ALIASES.get(close[0], close[0])}`?" if close else ""
    return f"I don't know a component `{shown}`: I watch {', '.join(known)}.{hint}"


def say_window(window: timedelta) -> str:
    hours = int(window.total_seconds() // 3600)
    if hours % 24 == 0:
        days = hours // 24
        return f"{days} day" + ("" if days == 1 else "s")
    return f"{hours} hours"
