"""Which of meowbot's answers a question asks for, from its words. No I/O.

Each intent has cue words and phrases with weights; a word that is not known is matched to a
known one within a small edit distance (difflib), so "helth", "slowr", "regresion" still count.
The entities the question names add their own weight (a job id leans to "slow job", a kind of
fault to "faults"), and word order does not matter. The scores are read in bot/ask/understand.py.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from bot.ask.models import Entities, Intent

# Cue -> weight, per intent. Phrases (with a space) are matched in the text, words per word.
CUES: Mapping[Intent, Mapping[str, float]] = {
    Intent.NODE_HEALTH: {
        "ok": 1.0, "okay": 1.0, "healthy": 2.0, "health": 1.5, "unhealthy": 2.0, "fine": 1.0,
        "alright": 1.0, "good": 0.5, "sick": 1.5, "status": 1.0, "state": 0.5, "check": 1.0,
        "verdict": 1.5, "fit": 1.0, "usable": 1.5, "safe": 1.0, "dead": 1.0, "alive": 1.5,
        "wrong with": 2.0, "going on with": 1.5, "up": 0.5, "working": 1.0, "bad": 1.0,
        "schedulable": 1.5, "drained": 1.0, "look at": 1.0, "how is": 1.5, "how's": 1.5,
        "is it": 0.5, "neighbours": 1.0, "neighbors": 1.0, "broken": 0.5,
    },
    Intent.FAULTS: {
        "fault": 2.0, "faults": 2.0, "failing": 1.5, "failures": 1.5, "failure": 1.5,
        "errors": 1.5, "error": 1.0, "broken": 1.5, "broke": 1.5, "hardware": 1.5, "hw": 1.5,
        "happening": 0.5, "wrong": 0.5, "problems": 1.5, "problem": 1.0, "alerts": 1.0,
        "incidents": 1.5, "outage": 1.5, "trouble": 1.0, "dying": 1.0, "flaky": 1.5,
        "repeat": 1.5, "offenders": 2.5, "fleet": 1.0, "cluster": 0.5, "which nodes": 1.5,
        "what nodes": 1.5, "any nodes": 1.0, "bad nodes": 2.0, "what broke": 2.0,
        "on fire": 1.5, "misbehaving": 1.5, "how many": 1.0, "list": 0.5, "off": 0.5,
    },
    Intent.SLOW_JOB: {
        "slow": 2.5, "slower": 3.0, "slowly": 2.0, "slowed": 2.5, "slowdown": 2.5,
        "sluggish": 2.5, "crawling": 2.0, "straggler": 3.0, "stragglers": 3.0, "lagging": 2.0,
        "throughput": 2.0, "step time": 2.5, "steptime": 2.5, "tokens per second": 2.5,
        "tok/s": 2.0, "mfu": 2.0, "speed": 1.5, "faster": 1.5, "taking forever": 2.5,
        "takes forever": 2.5, "stuck": 1.5, "hanging": 1.5, "job": 1.0, "jobs": 0.5,
        "training": 0.5, "iteration": 1.0, "performance": 1.0, "perf": 1.5, "dropped": 1.0,
        "off": 0.5,
    },
    Intent.REGRESSIONS: {
        "regression": 3.0, "regressions": 3.0, "regressed": 3.0, "rollout": 3.0,
        "rollouts": 3.0, "upgrade": 2.5, "upgrades": 2.5, "update": 1.5, "updates": 1.5,
        "software": 1.5, "version": 1.5, "versions": 1.5, "rolled out": 3.0,
        "new driver": 3.0, "new kernel": 3.0, "new firmware": 3.0, "since the": 0.5,
        "which change": 2.5, "what change": 2.0, "changed": 1.0, "cost": 1.0,
        "gpu-days": 1.5, "fleet-wide": 1.0, "everyone": 1.0, "all jobs": 1.5,
        "everything": 1.0,
    },
    Intent.PRECURSORS: {
        "before": 2.5, "preceded": 3.0, "precede": 3.0, "precursor": 3.5, "precursors": 3.5,
        "leading up": 3.0, "lead up": 3.0, "warning signs": 3.5, "warning sign": 3.5,
        "early warning": 3.5, "predict": 3.0, "predicts": 3.0, "foresee": 3.0,
        "precedes": 3.0, "preceding": 3.0, "leads up": 3.0, "leads to": 2.0, "lead to": 2.0,
        "signal": 1.5, "signals": 1.5, "what causes": 2.0, "what caused": 2.0,
        "why do": 1.5, "why does": 1.5, "why are": 1.0, "root cause": 3.0, "beforehand": 3.0,
        "ahead of": 2.5, "prior to": 3.0, "in the minutes": 2.0,
        "cause": 2.0, "causes": 2.0, "causing": 2.0, "caused": 2.0, "behind the": 2.5,
        "trigger": 2.5, "triggers": 2.5, "triggering": 2.5, "triggered": 2.5, "set off": 2.5,
        "sets off": 2.5, "is it the": 1.5, "comes before": 2.0, "come before": 2.0,
    },
    Intent.PLAYGROUND: {
        "playground": 4.0, "prompt": 2.5, "checkpoint": 3.0, "checkpoints": 3.0, "ckpt": 3.0,
        "compare": 1.5, "generate": 2.5, "completion": 2.0, "sample": 2.0, "samples": 2.0,
        "outputs": 1.5, "output": 1.0, "try": 1.0, "say": 1.5, "write": 1.0, "answer": 0.5,
        "model": 1.0, "step": 1.0, "steps": 1.0, "side by side": 2.5, "watches": 2.0,
    },
    Intent.HIGHLIGHTS: {
        "highlights": 4.0, "highlight": 3.5, "digest": 3.5, "meow_party": 4.0,
        "best posts": 3.5, "top posts": 3.5, "opt out": 3.0, "opt-out": 3.0, "opt in": 3.0,
        "opt-in": 3.0, "popular": 2.0, "reactions": 2.0, "fun": 1.0, "celebrate": 2.0,
    },
    Intent.HELP: {
        "help": 3.0, "commands": 2.5, "what can you do": 4.0, "what do you do": 3.5,
        "how do i use": 3.0, "how to use": 3.0, "usage": 2.5, "hello": 1.5, "hi": 1.0,
        "hey": 1.0, "who are you": 3.0, "options": 1.5, "menu": 2.5,
    },
}  # fmt: skip

# A question about a cause: "is X behind the Xids", "do I cause a panic when I send ...", "is
# it the driver?". With a fault kind named it asks what precedes that fault (/hw-faults why),
# even when it names a kernel, a driver or a rate: the component is a suspect, not a rollout.
_CAUSAL = re.compile(
    r"\b(?:caus(?:e|es|ed|ing)|behind (?:the|these|those|our|all)|trigger(?:s|ed|ing)?|"
    r"sets? off|is it the|is it because|"
    r"makes? (?:the |a |my |our )?\w+ (?:reboot|crash|panic|fail|throttle|overheat|flap|drop))"
    r"\b"
)
# "when we push more than 25 Gbps", "if a job draws 700 W": a condition on what a job does.
_CONDITION = re.compile(
    r"\b(?:when|whenever|if|once)\s+(?:i|we|you|they|a job|jobs|the job|nodes?|it)\b"
)
_RATE = re.compile(
    r"\d+(?:\.\d+)?\s*(?:gbps|gb/s|gbit/s|gbits?|mbps|mb/s|tb/s|watts?|w|degrees|°c|c|%|"
    r"percent)(?![a-z])"
)

_NOT_PRECURSORS = re.compile(
    r"\b(?:than before|fine before|worked before|ok before|before the (?:upgrade|rollout|update))"
)
# What meowbot does not do, whatever else the question names: it reads, it does not act.
CANNOT = re.compile(
    r"\b(?:submit|resubmit|cancel|scancel|kill|requeue|extend|book|order|reserve|quota|"
    r"allocate|install|delete|email|priority|prioriti[sz]e|bump)\b"
)

WORDS: frozenset[str] = frozenset(w for cues in CUES.values() for w in cues if " " not in w)
# Words too common or too short to stand for a typo of a cue.
_STOP = frozenset(
    {
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "of",
        "on",
        "in",
        "at",
        "to",
        "for",
        "and",
        "or",
        "but",
        "with",
        "my",
        "our",
        "me",
        "i",
        "you",
        "your",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "why",
        "how",
        "when",
        "where",
        "there",
        "any",
        "some",
        "all",
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "please",
        "thanks",
        "because",
        "paused",
        "thank",
        "hey",
        "hi",
        "yo",
        "pls",
        "plz",
        "just",
        "now",
        "today",
        "yesterday",
        "since",
        "last",
        "past",
        "week",
        "day",
        "days",
        "hours",
        "hour",
        "node",
        "nodes",
        "gpu",
        "gpus",
    }
)


def words_of(text: str) -> list[str]:
    """The question's words, each replaced by the cue it is a typo of (if any)."""
    out = []
    for word in re.findall(r"[a-z][a-z'/_-]*", text.lower()):
        if word in WORDS or word in _STOP or len(word) < 4:
            out.append(word)
            continue
        close = difflib.get_close_matches(word, WORDS, n=1, cutoff=0.8)
        out.append(close[0] if close else word)
    return out


def scores(text: str, entities: Entities) -> dict[Intent, float]:
    """Each intent's weight for the question: its cues found, then what its entities say."""
    words = words_of(text)
    joined = " " + " ".join(words) + " "
    lowered = " " + " ".join(text.lower().split()) + " "
    out: dict[Intent, float] = {}
    for intent, cues in CUES.items():
        total = 0.0
        for cue, weight in cues.items():
            if " " in cue or "/" in cue:
                if f" {cue} " in joined or f" {cue}" in lowered:
                    total += weight
            elif cue in words:
                total += weight
        out[intent] = total
    e = entities
    named_nodes = bool(e.nodes or e.hostlist)
    if named_nodes:
        out[Intent.NODE_HEALTH] += 2.0
        out[Intent.PLAYGROUND] -= 2.0
        out[Intent.HIGHLIGHTS] -= 2.0
    if e.rack or e.switch:
        out[Intent.FAULTS] += 1.5
        out[Intent.NODE_HEALTH] += 1.0
    if e.job or e.mine:
        # "my job runs on gpu-0077, is that node ok?" asks about the node.
        out[Intent.SLOW_JOB] += 1.0 if named_nodes else 2.5
    else:
        # Slow without a job of one's own: as likely the fleet (a rollout) as one's job.
        out[Intent.SLOW_JOB] -= 1.5
    lowered_text = text.lower()
    if e.kind:
        out[Intent.FAULTS] += 2.0
        out[Intent.PRECURSORS] += 0.5
        out[Intent.PRECURSORS] += 1.5 * bool(_CONDITION.search(lowered_text))
        out[Intent.PRECURSORS] += 1.5 * bool(_RATE.search(lowered_text))
        if named_nodes:
            out[Intent.FAULTS] += 1.0  # "xid on gpu-0042": that kind's faults, on that node
        else:
            out[Intent.NODE_HEALTH] -= 0.5
        if out[Intent.PRECURSORS] >= 3.0:
            out[Intent.PRECURSORS] += 1.5  # "before" with a kind of fault: what preceded it
        # "do we get panics when jobs run hot?" asks a cause too, unless it names a rollout.
        rollout_words = out[Intent.REGRESSIONS] >= 2.5  # only cue words counted so far
        conditional = bool(_CONDITION.search(lowered_text)) and not rollout_words
        if _CAUSAL.search(lowered_text) or conditional:
            out[Intent.PRECURSORS] += 3.0  # what causes that fault: what precedes it
            if e.component:
                out[Intent.REGRESSIONS] -= 3.0
    if e.repeat:
        out[Intent.FAULTS] += 1.0
    if e.component:
        out[Intent.REGRESSIONS] += 2.0
    if e.steps or e.prompt:
        out[Intent.PLAYGROUND] += 2.5
    if e.run and not e.job:
        out[Intent.PLAYGROUND] += 1.0
    if e.stats or e.last_week:
        out[Intent.HIGHLIGHTS] += 0.5
    if _NOT_PRECURSORS.search(lowered_text):
        out[Intent.PRECURSORS] -= 2.5  # "slower than before", "was fine before"
    return out
