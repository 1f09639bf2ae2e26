"""The optional language model's part: when the deterministic reading is unsure, it picks one
intent and fills the entities, from closed lists, as JSON. It never answers the question: the
answer always comes from meowbot's own services, with their evidence. No I/O here: the prompt,
and the reading of the model's answer, where anything off (not JSON, an intent not offered, a
node the site does not have, a field not asked for) is no answer at all.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.ask.entities import Vocabulary
from bot.ask.models import Entities, Intent

MAX_QUESTION = 500

SYSTEM = (
    "You route questions for meowbot, a GPU cluster triage bot. You never answer them. "
    "Reply with one JSON object and nothing else: "
    '{"intent": <one of the offered intents>, "entities": {<only fields named in the question>}}. '
    "Entity fields: nodes (list of node names), hostlist, job (digits), mine (true for "
    "the asker's own job), run, steps (list of integers), prompt, since (like 24h or 3d), "
    "kind (a fault kind), rack, switch, component (driver, kernel, firmware, ...), repeat "
    "(true for repeat offenders)."
)


class ModelAnswer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: Intent
    entities: Entities = Entities()


def prompt_for(question: str, offered: tuple[Intent, ...]) -> str:
    """The user turn: the offered intents, then the question (cut, and quoted as data)."""
    intents = ", ".join(i.value for i in offered)
    return f"Offered intents: {intents}.\nQuestion: {json.dumps(question[:MAX_QUESTION])}"


def read_answer(text: str, offered: tuple[Intent, ...], vocab: Vocabulary) -> ModelAnswer | None:
    """The model's pick, held to the closed lists; None for anything else."""
    m = re.search(r"\{.*\}", text, flags=re.DOTALL)
    if m is None:
        return None
    try:
        answer = ModelAnswer.model_validate_json(m.group(0))
    except ValidationError:
        return None
    if answer.intent not in offered:
        return None
    e = answer.entities
    if any(n not in vocab.nodes for n in e.nodes):
        return None
    if e.rack is not None and e.rack not in vocab.racks:
        return None
    if e.switch is not None and e.switch not in vocab.switches:
        return None
    return answer
