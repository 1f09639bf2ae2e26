"""The reading of plain-word questions, scored on the corpus (tests/data/ask_corpus.yaml):
routing accuracy and entity accuracy, each at least 95 %; on the phrasings written before the
reader was tuned for them (ask_heldout2.yaml, 70.6 % untuned) at least 95 % too; on those never
tuned on (ask_heldout.yaml) at least 85 %."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.ask.entities import Vocabulary
from bot.ask.models import DrainAsk, Menu, MyJob, Route, Understanding, Unsure
from bot.ask.understand import Context, carried, understand

CORPUS = Path(__file__).resolve().parents[1] / "data" / "ask_corpus.yaml"
HELD_OUT = Path(__file__).resolve().parents[1] / "data" / "ask_heldout.yaml"
# Written before the reader was tuned for them (causes, threads, DMs), then tuned on.
HELD_OUT_2 = Path(__file__).resolve().parents[1] / "data" / "ask_heldout2.yaml"
NEEDED = 0.95
# Phrasings the reader was never tuned on: what to expect of questions nobody wrote down yet.
NEEDED_HELD_OUT = 0.85


def site() -> Vocabulary:
    """The corpus's site: gpu-0001..gpu-0512, 32 a rack under one leaf each, three runs."""
    names = [f"gpu-{i:04d}" for i in range(1, 513)]
    places = {
        n: (f"rack-{i // 32 + 1:02d}", f"leaf-{i // 32 + 1:02d}") for i, n in enumerate(names)
    }
    return Vocabulary.build(names, places, runs=("tiny-zen", "tiny-gpt", "llama-7b-sft"))


def said(found: Understanding) -> str:
    if isinstance(found, Route):
        return found.typed
    if isinstance(found, MyJob):
        return "myjob"
    if isinstance(found, Menu):
        return "menu"
    if isinstance(found, Unsure):
        return "unsure"
    assert isinstance(found, DrainAsk)
    return f"drain {found.node or 'which'}"


def read(entry: dict[str, Any], vocab: Vocabulary) -> Understanding:
    """`q` read alone, after `after` in its thread, or after `dm_after` at the top of a DM
    (where the context carries only if `q` reads as a follow-up)."""
    context = None
    earlier = entry.get("after") or entry.get("dm_after")
    if earlier:
        before = understand(earlier, vocab)
        assert isinstance(before, Route | MyJob), earlier
        context = carried(
            entry["q"], Context(before.intent, before.entities), in_thread="after" in entry
        )
    return understand(entry["q"], vocab, context)


def entities_match(found: Understanding, expected: dict[str, Any]) -> bool:
    got = found.entities.model_dump()
    for field, want in expected.items():
        value = got[field]
        if isinstance(want, list):
            want = tuple(want)
        if value != want:
            return False
    return True


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    entries = yaml.safe_load(CORPUS.read_text())
    assert isinstance(entries, list)
    return entries


def test_the_corpus_is_big_and_varied(corpus: list[dict[str, Any]]) -> None:
    assert len(corpus) >= 150
    routes = [e["route"] for e in corpus]
    assert sum(r == "menu" for r in routes) >= 15  # unanswerable questions and help
    assert sum(r == "unsure" for r in routes) >= 2
    assert sum("after" in e for e in corpus) >= 10  # follow-ups
    assert sum("dm_after" in e for e in corpus) >= 4  # a DM's next message, follow-up or not
    assert sum(len(e.get("entities", {}).get("nodes", [])) >= 2 for e in corpus) >= 3


def accuracy(entries: list[dict[str, Any]], name: str) -> tuple[float, float, list[str]]:
    """Routing and entity accuracy over `entries`, printed with what went wrong."""
    vocab = site()
    routed = entity_ok = with_entities = 0
    wrong: list[str] = []
    for entry in entries:
        found = read(entry, vocab)
        if said(found) == entry["route"]:
            routed += 1
        else:
            wrong.append(f"route {entry['q']!r}: {said(found)!r}, wanted {entry['route']!r}")
        expected = entry.get("entities") or {}
        if expected:
            with_entities += 1
            if entities_match(found, expected):
                entity_ok += 1
            else:
                wrong.append(f"entities {entry['q']!r}: {found.entities!r}, wanted {expected}")
    routing = routed / len(entries)
    entities = entity_ok / with_entities
    print(
        f"\n{name}: {len(entries)} questions; routing {routing:.1%} ({routed}), "
        f"entities {entities:.1%} ({entity_ok} of {with_entities})"
    )
    for line in wrong:
        print("  " + line)
    return routing, entities, wrong


def test_routing_and_entity_accuracy(corpus: list[dict[str, Any]]) -> None:
    routing, entities, wrong = accuracy(corpus, "ask corpus")
    assert routing >= NEEDED, wrong
    assert entities >= NEEDED, wrong


def test_routing_and_entity_accuracy_on_held_out_phrasings() -> None:
    held_out = yaml.safe_load(HELD_OUT.read_text())
    routing, entities, wrong = accuracy(held_out, "held out")
    assert routing >= NEEDED_HELD_OUT, wrong
    assert entities >= NEEDED_HELD_OUT, wrong


def test_routing_on_phrasings_written_before_tuning() -> None:
    """51 phrasings written before the reader was changed for causes, threads and DMs: 70.6 %
    routed right untuned; held to 95 % since."""
    written = yaml.safe_load(HELD_OUT_2.read_text())
    assert len(written) >= 40
    routing, entities, wrong = accuracy(written, "written before tuning")
    assert routing >= NEEDED, wrong
    assert entities >= NEEDED, wrong


def test_every_question_gets_an_answer(corpus: list[dict[str, Any]]) -> None:
    """Nothing is met with silence: every reading is one of the answers the thread gets."""
    vocab = site()
    for entry in corpus:
        assert isinstance(read(entry, vocab), Route | MyJob | Menu | Unsure | DrainAsk)
