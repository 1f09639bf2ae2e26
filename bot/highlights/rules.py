"""Which reactions count: the configured emoji (skin tones folded), people not bots, not self."""

from __future__ import annotations

from collections.abc import Iterable


def base_emoji(name: str) -> str:
    """`meow_party::skin-tone-3` and `:meow_party:` are both `meow_party`."""
    return name.strip().strip(":").split("::", 1)[0].lower()


def emoji_list(raw: str | Iterable[str]) -> tuple[str, ...]:
    """`meow_party, :tada:` -> ("meow_party", "tada"), in order, without repeats or blanks."""
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    names = [base_emoji(item) for item in items]
    return tuple(dict.fromkeys(n for n in names if n))


def is_tracked(name: str, emoji: Iterable[str]) -> bool:
    return base_emoji(name) in set(emoji)
