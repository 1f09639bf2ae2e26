"""The DM a job's owner gets when meowbot takes the job's node out, and the answers to its
"Stop these messages" and "Turn them back on" buttons."""

from __future__ import annotations

from bot.mrkdwn import code, escape
from bot.render.blocks import Message, button
from bot.slack_message import SlackMessage
from bot.triage.notice import JobNotice

JOB_NOTICE_STOP_ACTION = "meowbot_job_notice_stop"
JOB_NOTICE_RESUME_ACTION = "meowbot_job_notice_resume"


def render_job_notice(n: JobNotice) -> SlackMessage:
    went = "set down" if n.stopped else "drained"
    icon = ":octagonal_sign:" if n.stopped else ":hourglass_flowing_sand:"
    name = f" ({escape(n.job_name)})" if n.job_name else ""
    runs = "ran" if n.stopped else "runs"
    if n.by_you:
        # The owner pressed Drain: not news that someone took the node, but what it does to
        # their own job.
        verb = "set" if n.stopped else "drained"
        node = f"{code(n.node)} down" if n.stopped else code(n.node)
        head = f"Your job {n.job_id}{name}: you {went} node {n.node}, where it {runs}"
        said = f"{icon} You {verb} {node}, where your job {code(n.job_id)}{name} {runs}."
        why = "You get this because the job is yours: what the drain does to it."
    else:
        head = f"Your job {n.job_id}{name}: node {n.node} was {went}"
        said = (
            f"{icon} Your job {code(n.job_id)}{name} {runs} on {code(n.node)}, which meowbot "
            f"{went}."
        )
        why = (
            "You get this because the job is yours. Drains and node faults are said "
            "in the cluster's alerts channel."
        )
    return (
        Message(f"{head}. {n.what_happens}")
        .section(
            f"{said}\n*Why:* {escape(n.why)}\n*Your job:* {escape(n.what_happens)}",
            block_id="job_notice",
        )
        .context(why)
        .actions(button("Stop these messages", JOB_NOTICE_STOP_ACTION, "stop"))
        .build()
    )


def render_stopped() -> SlackMessage:
    text = "You will not be told again when meowbot drains a node your jobs run on."
    return (
        Message(text)
        .section(f":white_check_mark: {text}")
        .actions(button("Turn them back on", JOB_NOTICE_RESUME_ACTION, "resume"))
        .build()
    )


def render_resumed() -> SlackMessage:
    text = "You will be told again when meowbot drains a node your jobs run on."
    return (
        Message(text)
        .section(f":white_check_mark: {text}")
        .actions(button("Stop these messages", JOB_NOTICE_STOP_ACTION, "stop"))
        .build()
    )
