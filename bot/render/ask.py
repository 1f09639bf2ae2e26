"""What meowbot says in a thread when a question is not one command's answer yet: the menu
of what it answers, one short question with a button per reading, a choice of the asker's
jobs, the Drain button offered."""

from __future__ import annotations

from collections.abc import Sequence

from bot.ask.models import Intent, Route
from bot.models import Job
from bot.mrkdwn import code, escape
from bot.render.blocks import Message, button
from bot.render.picks import ASK_PICK_ACTION, pick_value
from bot.render.triage import drain_button
from bot.slack_message import SlackMessage

# What a person can ask, as they would ask it: the menu's examples.
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Is a node fit to run work?", "is gpu-0042 ok?"),
    ("Faults across the fleet", "what's broken on rack 7?  /  any xid errors since yesterday?"),
    ("Why a job is slow", "my job seems slower than yesterday  /  why is job 4100123 slow?"),
    ("Which rollout slowed training", "did the new driver make training slower?"),
    ("What came before a fault", "what happened before the reboots last week?"),
    ("Checkpoints side by side", "compare step 400 and 500 of tiny-zen on 'Once upon a time'"),
    ("The highlights", "show me this week's highlights"),
)

SAID: dict[Intent, str] = {
    Intent.NODE_HEALTH: "the health of {text}",
    Intent.FAULTS: "hardware faults {text}",
    Intent.SLOW_JOB: "why job {text} is slow",
    Intent.REGRESSIONS: "rollouts that slowed training {text}",
    Intent.PRECURSORS: "what preceded the faults {text}",
    Intent.PLAYGROUND: "the playground {text}",
    Intent.HIGHLIGHTS: "the highlights {text}",
    Intent.HELP: "what I can do",
}


def _label(route: Route) -> str:
    if route.intent is Intent.SLOW_JOB and not route.text:
        return "why my job is slow"
    said = SAID[route.intent].format(text=route.text if route.text != "help" else "").strip()
    return said.replace("--since ", "over ")


HELP_LEAD = "Ask me in plain words, in a channel (mention me) or here. For example:"


def render_menu(sentence: str | None = None) -> SlackMessage:
    """Everything meowbot answers, with phrasings to copy: for a question it cannot answer."""
    lead = sentence or "I can't answer that one, but here is what I can do. Ask me like this:"
    msg = Message("What I can answer").section(escape(lead))
    msg.lines([f"*{escape(what)}*: _{escape(ex)}_" for what, ex in EXAMPLES])
    msg.context(
        "Mention me in a channel or write to me here; I answer in the thread. "
        "`/node-health`, `/hw-faults`, `/job-slow`, `/regressions`, `/playground`, "
        "`/highlights` do the same as commands."
    )
    return msg.build()


def render_unsure(routes: Sequence[Route]) -> SlackMessage:
    """One short question, a button per reading; each runs as its command would."""
    msg = Message("Which did you mean?").section("Did you mean…")
    buttons = [
        button(_label(r)[:70], ASK_PICK_ACTION, pick_value(r.command, r.text)) for r in routes
    ]
    msg.actions(*buttons)
    msg.context(" · ".join(code(r.typed) for r in routes))
    return msg.build()


def render_job_choice(jobs: Sequence[Job]) -> SlackMessage:
    """The asker runs several jobs: which one."""
    msg = Message("Which of your jobs?").section("You have several running jobs. Which one?")
    for j in jobs[:10]:
        msg.section(
            f"{code(j.job_id)} {escape(j.name)} on {len(j.nodes)} nodes since "
            f"{j.start:%Y-%m-%d %H:%M} UTC",
            accessory=button("Why slow?", ASK_PICK_ACTION, pick_value("/job-slow", j.job_id)),
        )
    return msg.build()


def render_which_job(job: Job, *, running: bool) -> SlackMessage:
    """Which job "my job" was read as, said before its answer."""
    if running:
        text = f"Your running job is {code(job.job_id)} {escape(job.name)}; looking at it."
    else:
        ended = f" (ended {job.end:%Y-%m-%d %H:%M} UTC)" if job.end else ""
        text = (
            f"You have no running job, so I am looking at the last one that finished: "
            f"{code(job.job_id)} {escape(job.name)}{ended}."
        )
    return Message(text).context(text).build()


def render_no_job(note: str) -> SlackMessage:
    text = f"I could not find your jobs ({note}). Give me a job id: _is job 4100123 slow?_"
    return Message(text).section(escape(text)).build()


def render_drain_offer(node: str, reason: str) -> SlackMessage:
    """ "drain it": the Drain button, which only someone allowed may press (bot/authz.py)."""
    text = f"Draining {node} takes a press of this button by someone allowed to drain nodes."
    msg = Message(text).section(
        f"Draining {code(node)} takes a press of this button by someone "
        "allowed to drain nodes; I never drain on a message alone."
    )
    msg.actions(drain_button(node, reason))
    return msg.build()


def render_drain_which(nodes: Sequence[str] = ()) -> SlackMessage:
    """ "drain it" with no one node named in the question or its thread: which node? (of
    `nodes`, the several it could be)."""
    example = nodes[0] if nodes else "gpu-0042"
    among = f" ({', '.join(code(n) for n in nodes[:5])}{', …' if len(nodes) > 5 else ''})"
    text = (
        f"Drain which node{among if nodes else ''}? Name one, e.g. _drain {escape(example)}_, "
        "and I show its Drain button."
    )
    return Message(text).section(text).build()
