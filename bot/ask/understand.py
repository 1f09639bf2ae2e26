"""A question in plain words -> the command it amounts to, or one short question back, or the
menu of what meowbot answers. Deterministic and without I/O: the same question reads the same
way every time, and a thread's follow-ups read against what the thread asked before.

The caller (handlers/ask.py) runs the route through the one command table, so a question is
answered exactly as the command would be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import hostlist

from bot.ask.entities import Vocabulary, clean, extract
from bot.ask.intents import CANNOT, scores
from bot.ask.models import (
    DrainAsk,
    Entities,
    Intent,
    Menu,
    MyJob,
    Route,
    Understanding,
    Unsure,
)
from bot.models import FaultKind
from bot.triage.checks import CHECKS

MIN_SCORE = 1.5  # below this, no intent was asked for
MARGIN = 1.0  # a runner-up this close makes the reading unsure
WEAK_SCORE = 0.5  # below MIN_SCORE but above this, a reading worth offering
MAX_CANDIDATES = 3
_FAULTS_MAX_DAYS = 7
_REGRESSIONS_MAX_DAYS = 30

_FOLLOW_UP = re.compile(
    r"^(?:and|also|ok and|okay and|what about|how about|same for|same (?:thing )?(?:with|on)"
    r"|now|then|and what about|and how about|and for|for|only|just|but|ok|okay|so)\b"
)
# A word standing for something said before, as a DM's follow-up uses it ("drain it", "what
# about its neighbours?", "is that one ok?"); "there" is left out: "are there any faults?".
_POINTS_BACK = re.compile(r"\b(?:it|its|it's|them|those|that one|that node|the same)\b")
# How a whole new question starts; a follow-up leaves it out ("yesterday?", "gpu-0043?").
_ASKS_AFRESH = re.compile(
    r"^(?:is|are|was|were|what|which|who|how|why|when|where|does|do|did|can|could|should|will|"
    r"any|show|list|tell|give|compare|check|run|find|has|have|please)\b"
)
FOLLOW_UP_WORDS = 8  # a follow-up is short: a longer message asks something of its own
_NEIGHBOURS = re.compile(
    r"\b(?:neighbou?rs?|neighbou?ring|same (?:rack|switch|leaf)|(?:other|rest of the) (?:nodes|"
    r"rack|switch)|nodes? next to it|around it|its peers|peers)\b"
)
_DRAIN = re.compile(r"\b(?:drain|dran|drian|cordon|take (?:it|\S+) out)\b")
_REFERS_BACK = re.compile(r"\b(?:it|its|that|this|the same|there|that one|that node|them)\b")


@dataclass(frozen=True)
class Context:
    """What a thread asked last: its intent and entities (kept per thread by the caller)."""

    intent: Intent
    entities: Entities


def _compress(names: list[str]) -> str:
    return str(hostlist.collect_hostlist(names)) if names else ""


def _target(e: Entities, vocab: Vocabulary) -> str:
    """The nodes a question is about, as one hostlist ("" when it names none)."""
    if e.hostlist:
        return e.hostlist
    if e.nodes:
        return _compress(list(e.nodes))
    if e.rack:
        return _compress(vocab.in_rack(e.rack))
    if e.switch:
        return _compress(vocab.on_switch(e.switch))
    return ""


def _days(since: str | None, cap: int) -> str | None:
    if since is None:
        return None
    n, unit = int(since[:-1]), since[-1]
    if unit == "d" and n > cap:
        return f"{cap}d"
    return since


def precursor_kind(word: str) -> str | None:
    """The one fault kind `/hw-faults why` takes for a word: the code itself, else the first
    kind of the check table the word stands for."""
    if word in {k.value for k in FaultKind}:
        return word
    return next((c.kind.value for c in CHECKS if word in c.filters), None)


def route_for(intent: Intent, e: Entities, vocab: Vocabulary) -> Route | MyJob | Menu | None:
    """The command `intent` with these entities amounts to; None when it lacks what it needs."""
    if intent is Intent.HELP:
        return Menu(e, asked=True)
    if intent is Intent.NODE_HEALTH:
        target = _target(e, vocab)
        return Route(intent, "/node-health", target, e) if target else None
    if intent is Intent.FAULTS:
        parts = ["repeat"] if e.repeat else []
        parts += [p for p in (e.kind, _target(e, vocab)) if p]
        since = _days(e.since, _FAULTS_MAX_DAYS)
        parts += ["--since", since] if since else []
        return Route(intent, "/hw-faults", " ".join(parts), e)
    if intent is Intent.SLOW_JOB:
        if e.job:
            return Route(intent, "/job-slow", e.job, e)
        return MyJob(intent, e)
    if intent is Intent.REGRESSIONS:
        parts = [e.component] if e.component else []
        since = _days(e.since, _REGRESSIONS_MAX_DAYS)
        if since and not (since.endswith("h") and int(since[:-1]) < 6):
            parts += ["--since", since]
        return Route(intent, "/regressions", " ".join(parts), e)
    if intent is Intent.PRECURSORS:
        kind = precursor_kind(e.kind) if e.kind else None
        if kind is None:
            return None
        parts = ["why", kind]
        target = _target(e, vocab)
        parts += [target] if target else []
        since = _days(e.since, _FAULTS_MAX_DAYS)
        parts += ["--since", since] if since else []
        return Route(intent, "/hw-faults", " ".join(parts), e)
    if intent is Intent.PLAYGROUND:
        if e.run and e.prompt:
            steps = ["--steps", ",".join(str(s) for s in e.steps)] if e.steps else []
            return Route(intent, "/playground", " ".join([e.run, *steps, e.prompt]), e)
        return Route(intent, "/playground", "help", e)
    if intent is Intent.HIGHLIGHTS:
        sub = "stats" if e.stats else "last-week" if e.last_week else ""
        return Route(intent, "/highlights", sub, e)
    return None


def _by_entities(e: Entities) -> Intent | None:
    """What a question that names something but asks nothing in words is most likely about."""
    if e.nodes or e.hostlist:
        return Intent.NODE_HEALTH
    if e.job:
        return Intent.SLOW_JOB
    if e.kind or e.rack or e.switch or e.repeat:
        return Intent.FAULTS
    if e.component:
        return Intent.REGRESSIONS
    if e.steps or e.prompt:
        return Intent.PLAYGROUND
    return None


def _merge(old: Entities, new: Entities) -> Entities:
    """A follow-up's entities over the thread's: what it names replaces, the rest stays."""
    given = {k: v for k, v in new.model_dump().items() if v not in (None, (), False)}
    if given.get("nodes") or given.get("hostlist") or given.get("rack") or given.get("switch"):
        # A new place replaces the old one whole: "and rack 3?" is not about gpu-0042 too.
        given = {"nodes": (), "hostlist": None, "rack": None, "switch": None, **given}
    return old.model_copy(update=given)


def _as_route(found: Route | MyJob) -> Route:
    """A reading as a button runs it: "my job" is /job-slow alone (a pick of one's jobs)."""
    return (
        found if isinstance(found, Route) else Route(found.intent, "/job-slow", "", found.entities)
    )


def _decide(text: str, e: Entities, vocab: Vocabulary) -> Understanding:
    ranked = sorted(scores(text, e).items(), key=lambda kv: kv[1], reverse=True)
    usable: list[tuple[float, Route | MyJob | Menu]] = []
    for intent, score in ranked:
        if score < MIN_SCORE:
            break
        found = route_for(intent, e, vocab)
        if found is not None:
            usable.append((score, found))
    if not usable:
        fallback = _by_entities(e)
        found = route_for(fallback, e, vocab) if fallback else None
        if found is not None:
            return found
        # Vague ("something is off with tiny-zen"): the readings that have some weight.
        weak = [
            r
            for intent, score in ranked
            if score >= WEAK_SCORE
            for r in (route_for(intent, e, vocab),)
            if isinstance(r, Route | MyJob)
        ][:MAX_CANDIDATES]
        if len(weak) >= 2:
            return Unsure(tuple(_as_route(r) for r in weak), e)
        return Menu(e)
    top_score, top = usable[0]
    close = [r for s, r in usable[1:MAX_CANDIDATES] if top_score - s < MARGIN]
    if close and not isinstance(top, Menu):
        candidates = tuple(r for r in (top, *close) if isinstance(r, Route | MyJob))
        routes = tuple(_as_route(r) for r in candidates)
        if len(routes) > 1:
            return Unsure(routes, e)
    return top


def reads_as_follow_up(question: str) -> bool:
    """Whether a message at the top of a DM goes on from the one before: short, and either
    opened as a follow-up ("and yesterday?", "what about rack 4?"), or pointing back ("drain
    it"), or elliptic (no question of its own: "yesterday?", "gpu-0043?")."""
    text = clean(question).lower()
    if len(text.split()) > FOLLOW_UP_WORDS:
        return False
    if _FOLLOW_UP.search(text) or _POINTS_BACK.search(text):
        return True
    return not _ASKS_AFRESH.search(text) and max(scores(text, Entities()).values()) < MIN_SCORE


def carried(question: str, context: Context | None, *, in_thread: bool) -> Context | None:
    """The context `question` is read against: a thread's always (a conversation is a
    thread); the last one at the top of a DM only while the message reads as a follow-up."""
    if context is None or in_thread:
        return context
    return context if reads_as_follow_up(question) else None


def _drain(text: str, e: Entities, old: Entities) -> DrainAsk | None:
    """ "drain it": the one node named, else the thread's; none or several: which one?"""
    if not _DRAIN.search(text):
        return None
    nodes = e.nodes or old.nodes
    if len(nodes) == 1:
        return DrainAsk(nodes[0], _merge(old, e))
    if not (e.hostlist or e.rack or e.switch):
        return DrainAsk(None, _merge(old, e))
    return None


def understand(question: str, vocab: Vocabulary, context: Context | None = None) -> Understanding:
    """What `question` asks, read against the thread's `context` when it has one."""
    text = clean(question).lower()
    e = extract(question, vocab)
    if CANNOT.search(text) and not _DRAIN.search(text):
        return Menu(e)
    if context is None:
        drain = _drain(text, e, Entities())
        return drain if drain is not None else _decide(text, e, vocab)
    old = context.entities
    drain = _drain(text, e, old)
    if drain is not None:
        return drain
    if _NEIGHBOURS.search(text):
        nodes = e.nodes or old.nodes
        if len(nodes) == 1:
            near = vocab.neighbours(nodes[0])
            if near:
                # The node stays the thread's ("drain it" still means it); the hostlist is asked.
                merged = old.model_copy(
                    update={"nodes": tuple(nodes), "hostlist": _compress(near), "rack": None}
                )
                about = Intent.FAULTS if context.intent is Intent.FAULTS else Intent.NODE_HEALTH
                found = route_for(about, merged, vocab)
                if isinstance(found, Route):
                    return found
    best = max(scores(text, e).values())
    follows = bool(_FOLLOW_UP.search(text)) or bool(_REFERS_BACK.search(text)) or best < MIN_SCORE
    if not follows:
        # A question of its own, in the same conversation: it keeps the thread's window when it
        # names none ("what precedes the reboots?" after "did last week's rollout cost us?").
        if e.since is None and old.since is not None:
            e = e.model_copy(update={"since": old.since})
        return _decide(text, e, vocab)
    merged = _merge(old, e)
    # A follow-up keeps the thread's intent unless its own words ask for another one.
    words_only = scores(text, Entities())
    intent, weight = max(words_only.items(), key=lambda kv: kv[1])
    if weight >= MIN_SCORE and intent is not context.intent:
        found = route_for(intent, merged, vocab)
        if isinstance(found, Route | MyJob):
            return found
    found = route_for(context.intent, merged, vocab)
    return found if found is not None else _decide(text, merged, vocab)
