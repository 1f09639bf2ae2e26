"""/regressions' text: components by name or alias, one window, and a sentence for the rest."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.regressions.ask import BUILT_IN, MAX_WINDOW, AskError, parse_ask, parse_window

KNOWN = (*BUILT_IN, "image")


def test_alone_every_component_over_a_week() -> None:
    ask = parse_ask("", KNOWN)
    assert ask.components == KNOWN and ask.window == timedelta(days=7) and not ask.named


@pytest.mark.parametrize(
    ("text", "components", "window"),
    [
        ("kernel", ("kernel",), timedelta(days=7)),
        ("KERNEL --since 14d", ("kernel",), timedelta(days=14)),
        ("--since=36h vbios", ("firmware",), timedelta(hours=36)),
        ("image driver image", ("image", "driver"), timedelta(days=7)),
        ("all --since 2w", KNOWN, timedelta(days=14)),
        ("since 30d", KNOWN, MAX_WINDOW),
    ],
)
def test_components_and_window(text: str, components: tuple[str, ...], window: timedelta) -> None:
    ask = parse_ask(text, KNOWN)
    assert (ask.components, ask.window) == (components, window)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "kernal",
            "I don't know a component `kernal`: I watch driver, kernel, firmware, image. "
            "Did you mean `kernel`?",
        ),
        ("nccl", "I don't know a component `nccl`"),
        ("--since", "`--since` needs a window"),
        ("--since 90d", "at most 30 days"),
        ("--since 2h", "at least 6 hours"),
        ("--since yesterday", "`yesterday` is not a window"),
        ("--since 7d --since 3d", "Give `--since` once"),
        ("--verbose", "the one option is `--since 7d`"),
        ("all kernel", "not both"),
    ],
)
def test_bad_text_gets_a_sentence(text: str, said: str) -> None:
    with pytest.raises(AskError) as caught:
        parse_ask(text, KNOWN)
    assert said in str(caught.value)


def test_a_configured_component_is_asked_for_by_its_name() -> None:
    assert parse_ask("nccl", (*BUILT_IN, "nccl")).components == ("nccl",)


def test_a_huge_number_is_refused_not_overflowed() -> None:
    with pytest.raises(AskError, match="at most"):
        parse_window("99999w")
