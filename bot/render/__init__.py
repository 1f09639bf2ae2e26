"""Slack rendering: Block Kit builders that keep Slack's limits (the mrkdwn text helpers are
bot/mrkdwn.py).

The usual imports::

    from bot.render import Message, button, select, error, usage, working
    from bot.mrkdwn import escape, code
"""

from bot.render.blocks import (
    HomeTab,
    Message,
    Modal,
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

__all__ = [
    "HomeTab",
    "Message",
    "Modal",
    "action_id_pattern",
    "base_action_id",
    "button",
    "confirm_dialog",
    "error",
    "image_element",
    "option",
    "plain_text_input",
    "select",
    "success",
    "usage",
    "working",
]
