"""The things a question names: nodes, hostlists, jobs, runs, steps, windows, fault kinds,
racks, switches, software components. No I/O: what the site knows (its node names, racks,
switches, runs) comes in a `Vocabulary` the caller builds from the inventory.

Node names are matched in the site's own pattern, forgiving how people shorten them
(`gpu42`, `GPU-042` for `gpu-0042`); fault kinds by the check table's codes, words and filter
words, a typo or two included (difflib, against the known words only).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import hostlist

from bot.ask.models import Entities
from bot.triage.job_ids import BadJobId, check_job_id
from bot.triage.vocabulary import FAMILIES, PHRASES, number_index

# A node written loosely: letters, an optional separator, digits (gpu-0042, gpu42, dgx_7).
_LOOSE_NODE = re.compile(r"\b([a-z][a-z]*?)[-_.]?(\d{1,6})\b")
_HOSTLIST = re.compile(r"\b[A-Za-z][\w.-]*\[[\d,\-]+\][\w.-]*")
_JOB = re.compile(r"(?:\bjob(?:\s*(?:id|#|no\.?|number))?\s*[:#]?\s*|#)(\d{3,12}(?:_\d{1,6})?)\b")
_BARE_JOB = re.compile(r"(?<![\w.-])(\d{5,12})(?![\w.-])")
# A Kubernetes job as the adapter names it, namespace/kind/name: the kind is a workload's (a
# word with "job" in it, or a set or deployment), so a path in a pasted link is not a job.
_KUBE_JOB = re.compile(
    r"(?<![\w./-])([a-z0-9][a-z0-9-]{0,62}/"
    r"(?:[a-z0-9]*job[a-z0-9]*|jobset|statefulset|replicaset|deployment)/"
    r"[a-z0-9][a-z0-9.-]{0,252})(?![\w/])"
)
_STEPS = re.compile(
    r"\b(?:steps?|ckpts?|checkpoints?)\s*(\d{1,9})((?:\s*(?:,|and|&|vs\.?|versus|or|to)\s*"
    r"(?:step\s*)?\d{1,9})*)"
)
_NUMBER = re.compile(r"\d{1,9}")
# Quotes as typed or as Slack's clients curl them (\u2018 \u2019 \u201c \u201d).
_QUOTES = "\"'\u2018\u2019\u201c\u201d"
_INSIDE = _QUOTES.replace("'", "")  # an apostrophe may stand inside: 'what's up'
_QUOTED = re.compile(rf"(?<!\w)[{_QUOTES}]([^{_INSIDE}]{{2,2000}}?)[{_QUOTES}](?!\w)")
_RACK = re.compile(r"\brack\s*[-#]?\s*(\d{1,4})\b")
_SWITCH = re.compile(r"\b(?:leaf|switch|leaf\s+switch|tor)\s*[-#]?\s*(\d{1,4})\b")
_SLACK_MARKUP = re.compile(r"<[@#!][^>]*>")
_SLACK_LINK = re.compile(r"<(?:https?|mailto):[^|>]*\|([^>]*)>|<(?:https?|mailto):[^>]*>")

_WORD_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "ten": 10, "twelve": 12, "couple": 2, "few": 3,
}  # fmt: skip
_WORDNUM = "|".join(_WORD_NUMBERS)
_WINDOW = re.compile(
    r"\b(?:(?:last|past|previous|over the last|in the last|within)\s+"
    rf"(?:(\d{{1,4}}|{_WORDNUM})\s+)?|(\d{{1,4}})\s*|({_WORDNUM})\s+)"
    r"(h|hrs?|hours?|d|days?|w|wks?|weeks?|nights?)\b"
)
_NAMED_WINDOWS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bday before yesterday\b"), "3d"),
    (re.compile(r"\b(?:since |from )?yesterday\b"), "2d"),
    (re.compile(r"\b(?:last night|overnight|this morning|tonight)\b"), "12h"),
    (re.compile(r"\b(?:today|this afternoon)\b"), "24h"),
    (re.compile(r"\b(?:this week|last week|past week|the week)\b"), "7d"),
    (re.compile(r"\b(?:this weekend|over the weekend|the weekend)\b"), "3d"),
    (re.compile(r"\b(?:last|past|this) month\b"), "30d"),
    (re.compile(r"\b(?:an|the last|the past) hour\b"), "1h"),
)

_MINE = re.compile(
    r"\b(?:my|mine|our)\s+(?:\w+\s+)?(?:jobs?|runs?|training|trainings|workload|experiments?)\b"
    r"|\bmine\b"
)
_REPEAT = re.compile(
    r"\b(?:repeat|repeats|repeated|repeatedly|recurring|recurrent|again and again|keeps? "
    r"(?:failing|coming back|breaking|crashing)|offenders?|flaky|chronic)\b"
)
_LAST_WEEK = re.compile(r"\b(?:last|previous|past) week'?s?\b")
_STATS = re.compile(r"\b(?:stats|statistics|totals?|top (?:channels|authors|posters))\b")

# Software components as people write them (bot/regressions/ask.py reads the command's).
_COMPONENT_WORDS: dict[str, str] = {
    "drivers": "driver",
    "nvidia driver": "driver",
    "gpu driver": "driver",
    "kernels": "kernel",
    "linux": "kernel",
    "vbios": "firmware",
    "fw": "firmware",
    "firmwares": "firmware",
}


def clean(text: str) -> str:
    """The question without Slack's markup (mentions, links) and with one space between
    words, in lower case."""
    text = _SLACK_MARKUP.sub(" ", text)
    text = _SLACK_LINK.sub(lambda m: m.group(1) or " ", text)
    text = text.replace("`", " ").replace("*", " ").replace("&amp;", "&")
    text = text.replace("&lt;", "<").replace("&gt;", ">")
    return " ".join(text.split())


@dataclass(frozen=True)
class Vocabulary:
    """What the site knows, for reading names: built once per inventory load by the caller."""

    nodes: frozenset[str] = frozenset()
    racks: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    components: tuple[str, ...] = ("driver", "kernel", "firmware")
    # node -> (rack, leaf switch), for "its neighbours"
    places: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # (letters of the name's prefix, its number) -> the node's name
    by_number: Mapping[tuple[str, int], str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        nodes: Iterable[str],
        places: Mapping[str, tuple[str, str]] | None = None,
        runs: Sequence[str] = (),
        components: Sequence[str] = ("driver", "kernel", "firmware"),
    ) -> Vocabulary:
        names = frozenset(nodes)
        by_number = number_index(names)
        places = dict(places or {})
        racks = tuple(sorted({r for r, _ in places.values() if r}))
        switches = tuple(sorted({s for _, s in places.values() if s}))
        return cls(names, racks, switches, tuple(runs), tuple(components), places, by_number)

    def neighbours(self, node: str) -> list[str]:
        """The other nodes under the node's leaf switch (else in its rack), sorted."""
        rack, leaf = self.places.get(node, ("", ""))
        if leaf:
            return sorted(n for n, (_, s) in self.places.items() if s == leaf and n != node)
        if rack:
            return sorted(n for n, (r, _) in self.places.items() if r == rack and n != node)
        return []

    def in_rack(self, rack: str) -> list[str]:
        return sorted(n for n, (r, _) in self.places.items() if r == rack)

    def on_switch(self, switch: str) -> list[str]:
        return sorted(n for n, (_, s) in self.places.items() if s == switch)


def kind_vocabulary() -> dict[str, str]:
    """Every phrase that names a fault kind or a family, -> what `/hw-faults` takes for it:
    the one vocabulary every command reads too (bot/triage/vocabulary.py)."""
    return dict(PHRASES)


KINDS = kind_vocabulary()
_FAMILY_NAMES = {"infiniband": "ib"}  # the same family under two words: said one way
# Single words worth a typo match: long enough that a near miss is not another word.
_KIND_TYPO_WORDS = sorted(w for w in KINDS if " " not in w and len(w) >= 5)
_NOT_KIND_WORDS = {"health", "healthy", "network", "memory", "power", "missing", "nodes"}


def _family(words: Sequence[str]) -> str | None:
    """A family word typed ("ib", "nic"): what the person asked about, broader than a kind."""
    return next((w for w in words if w in FAMILIES and w not in _NOT_KIND_WORDS), None)


def _find_kind(text: str, words: Sequence[str], component: str | None = None) -> str | None:
    """The fault kind named; a software component's word ("the new kernel") is not one, so
    another kind in the question is looked for ("is the kernel behind the reboots?")."""
    if component is not None:
        words = [w for w in words if KINDS.get(w) != component]
    for phrase in sorted(KINDS, key=len, reverse=True):
        several = " " in phrase or "-" in phrase or "_" in phrase
        if several and re.search(rf"(?<![\w-]){re.escape(phrase)}s?(?![\w-])", text):
            found = KINDS[phrase]
            family = _family(words)
            # "infiniband links down": a family typed beside words of one of its kinds reads as
            # the family; "ib link down", the kind's own name, as the kind.
            if family is not None and family not in phrase and found in FAMILIES[family]:
                return _FAMILY_NAMES.get(family, family)
            return found
    for word in words:
        if word in KINDS and word not in _NOT_KIND_WORDS:
            return KINDS[word]
    for word in words:
        # Plurals and -ing forms of a kind's words: "unexpected reboots".
        stem = re.sub(r"(?:s|es|ing)$", "", word)
        if stem != word and stem in KINDS and stem not in _NOT_KIND_WORDS:
            return KINDS[stem]
    for word in words:
        if len(word) >= 5 and word not in _NOT_KIND_WORDS:
            close = difflib.get_close_matches(word, _KIND_TYPO_WORDS, n=1, cutoff=0.84)
            if close and close[0] not in _NOT_KIND_WORDS:
                return KINDS[close[0]]
    for word in words:  # family words that also mean other things, last
        if word in ("network", "memory", "missing") and word in KINDS:
            return KINDS[word]
    return None


def _window(text: str) -> str | None:
    m = _WINDOW.search(text)
    if m:
        amount = m.group(1) or m.group(2) or m.group(3)
        n = 1 if amount is None else int(_WORD_NUMBERS.get(amount, amount) or 1)
        unit = m.group(4)
        if unit.startswith("w"):
            return f"{7 * n}d"
        if unit.startswith("n"):
            return f"{12 * n}h" if n == 1 else f"{n}d"
        if unit.startswith("h"):
            return f"{n}h"
        return f"{n}d"
    for pattern, window in _NAMED_WINDOWS:
        if pattern.search(text):
            return window
    return None


def _nodes(text: str, vocab: Vocabulary) -> tuple[list[str], str | None, str]:
    """The nodes named, a hostlist given, and the text without them."""
    found: list[str] = []
    given: str | None = None
    for m in _HOSTLIST.finditer(text):
        try:
            expanded = hostlist.expand_hostlist(m.group(0))
        except hostlist.BadHostlist:
            continue
        if len(expanded) > 1:
            given = m.group(0)
            text = text.replace(m.group(0), " ")
    for token in re.findall(r"[a-z0-9][a-z0-9._-]*[a-z0-9]", text):
        if token in vocab.nodes:
            found.append(token)
            text = re.sub(rf"(?<![\w-]){re.escape(token)}(?![\w-])", " ", text)
    for m in _LOOSE_NODE.finditer(text):
        name = vocab.by_number.get((m.group(1), int(m.group(2))))
        if name is not None:
            found.append(name)
            text = text.replace(m.group(0), " ", 1)
    return list(dict.fromkeys(found)), given, text


def _numbered(pattern: re.Pattern[str], text: str, known: Sequence[str]) -> str | None:
    m = pattern.search(text)
    if m is None:
        return None
    number = int(m.group(1))
    for name in known:
        tail = re.search(r"(\d+)$", name)
        if tail and int(tail.group(1)) == number:
            return name
    return None


def _named(text: str, known: Sequence[str]) -> str | None:
    for name in known:
        if re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", text):
            return name
    return None


def _run(text: str, words: Sequence[str], runs: Sequence[str]) -> str | None:
    by_lower = {r.lower(): r for r in runs}
    for word in words:
        if word in by_lower:
            return by_lower[word]
    for word in words:
        if "-" in word or "_" in word:
            close = difflib.get_close_matches(word, list(by_lower), n=1, cutoff=0.8)
            if close:
                return by_lower[close[0]]
    # A run the site did not list: the word after "of"/"run" beside steps or checkpoints.
    m = re.search(r"\b(?:run|model|of|from)\s+([a-z][\w.@:+/-]*-[\w.@:+/-]+)", text)
    return m.group(1) if m else None


def _component(text: str, words: Sequence[str], components: Sequence[str]) -> str | None:
    # "a kernel panic" is a fault, not the kernel's software.
    text = re.sub(r"\bkernel panic\w*", " ", text)
    words = re.findall(r"[a-z][a-z0-9_-]*", text)
    for phrase, comp in _COMPONENT_WORDS.items():
        if " " in phrase and phrase in text:
            return comp
    known = {c.lower(): c for c in components}
    for word in words:
        if word in known:
            return known[word]
        if word in _COMPONENT_WORDS:
            return _COMPONENT_WORDS[word]
    for word in words:
        if len(word) >= 5:
            close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.84)
            if close:
                return known[close[0]]
    return None


def _kube_job(text: str) -> str | None:
    found = _KUBE_JOB.search(text)
    if found is None:
        return None
    try:
        return check_job_id(found.group(1))
    except BadJobId:
        return None


def extract(question: str, vocab: Vocabulary) -> Entities:
    """Every entity the question names."""
    raw = clean(question)
    prompt_match = _QUOTED.search(raw)
    prompt = prompt_match.group(1).strip() if prompt_match else None
    text = raw.lower()
    if prompt_match:
        text = text.replace(prompt_match.group(0).lower(), " ")
    nodes, given, rest = _nodes(text, vocab)
    steps: list[int] = []
    m = _STEPS.search(rest)
    if m:
        steps = [int(m.group(1)), *(int(n) for n in _NUMBER.findall(m.group(2) or ""))]
        rest = rest.replace(m.group(0), " ")
    job = _kube_job(rest)
    if job is None:
        job_match = _JOB.search(rest) or _BARE_JOB.search(rest)
        job = job_match.group(1) if job_match else None
    words = re.findall(r"[a-z][a-z0-9_-]*", rest)
    rack = _numbered(_RACK, rest, vocab.racks) or _named(rest, vocab.racks)
    switch = _numbered(_SWITCH, rest, vocab.switches) or _named(rest, vocab.switches)
    run = _run(rest, words, vocab.runs)
    if run is not None and (run in vocab.racks or run in vocab.switches):
        run = None
    kind_text = rest.replace(run.lower(), " ") if run else rest
    kind_words = [w for w in words if w != (run or "").lower()]
    component = _component(rest, words, vocab.components)
    kind = _find_kind(kind_text, kind_words, component)
    if component is not None and kind == component:
        kind = None  # "the new driver": a rollout, not drift from the fleet
    return Entities(
        nodes=tuple(nodes),
        hostlist=given,
        job=job,
        mine=bool(_MINE.search(text)),
        run=run,
        steps=tuple(dict.fromkeys(steps)),
        prompt=prompt,
        since=_window(rest),
        kind=kind,
        rack=rack,
        switch=switch,
        component=component,
        repeat=bool(_REPEAT.search(rest)),
        last_week=bool(_LAST_WEEK.search(rest)),
        stats=bool(_STATS.search(rest)),
    )
