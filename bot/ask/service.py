"""Reading a question: the deterministic pass, then, only when it is unsure and a model is
configured, the model's pick within a deadline. Any failure of the model leaves the
deterministic question with its buttons. No I/O but through the ports."""

from __future__ import annotations

import logging

from bot.ask.entities import Vocabulary
from bot.ask.model_pick import SYSTEM, prompt_for, read_answer
from bot.ask.models import Entities, Intent, Menu, MyJob, Route, Understanding, Unsure
from bot.ask.ports import Picker
from bot.ask.understand import Context, route_for, understand
from bot.errors import BackendError

log = logging.getLogger(__name__)

DEFAULT_DEADLINE_S = 4.0


async def read_question(
    question: str,
    vocab: Vocabulary,
    context: Context | None = None,
    picker: Picker | None = None,
    *,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> Understanding:
    found = understand(question, vocab, context)
    if picker is None or not isinstance(found, Unsure):
        return found
    offered = tuple(dict.fromkeys(r.intent for r in found.candidates))
    try:
        text = await picker.complete(SYSTEM, prompt_for(question, offered), deadline_s=deadline_s)
    except BackendError as exc:
        log.info("the model gave no pick", extra={"error": exc.user_text()})
        return found
    answer = read_answer(text, offered, vocab)
    if answer is None:
        log.info("the model's pick was unusable", extra={"answer": text[:200]})
        return found
    # The model picks; the entities it adds only fill what the deterministic pass left empty,
    # so what the question names in so many words is never overridden.
    ours = found.entities.model_dump()
    theirs = {k: v for k, v in answer.entities.model_dump().items() if ours.get(k) in (None, ())}
    merged = Entities.model_validate({**ours, **{k: v for k, v in theirs.items() if v}})
    picked = route_for(answer.intent, merged, vocab)
    if isinstance(picked, Route | MyJob):
        return picked
    return found if not isinstance(picked, Menu) or answer.intent is not Intent.HELP else picked
