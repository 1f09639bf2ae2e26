"""Slack rendering: Block Kit builders that keep Slack's limits, mrkdwn helpers.

The usual imports::

    from bot.render import Message, button, select, error, usage, working
    from bot.render.mrkdwn import escape, code
"""

from bot.render.blocks import (
    HomeTab,
    Message,
    Modal,
    SlackMessage,
    action_id_pattern,
    base_action_id,
    button,
    confirm_dialog,
    error,
    image_element,
    option,
    plain_text_input,
    select,
    success,
    usage,
    working,
)
from bot.render.mrkdwn import code, code_block, escape, truncate

__all__ = [
    "HomeTab",
    "Message",
    "Modal",
    "SlackMessage",
    "action_id_pattern",
    "base_action_id",
    "button",
    "code",
    "code_block",
    "confirm_dialog",
    "error",
    "escape",
    "image_element",
    "option",
    "plain_text_input",
    "select",
    "success",
    "truncate",
    "usage",
    "working",
]
