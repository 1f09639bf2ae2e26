"""Slack rendering: Block Kit builders that keep Slack's limits, and the terminal view (the
mrkdwn text helpers are bot/mrkdwn.py).

The usual imports::

    from bot.render import Message, button, select, error, usage, working
    from bot.mrkdwn import escape, code
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
from bot.render.terminal import button_targets, render_message, render_terminal, render_view

__all__ = [
    "HomeTab",
    "Message",
    "Modal",
    "SlackMessage",
    "action_id_pattern",
    "base_action_id",
    "button",
    "button_targets",
    "confirm_dialog",
    "error",
    "image_element",
    "option",
    "plain_text_input",
    "render_message",
    "render_terminal",
    "render_view",
    "select",
    "success",
    "usage",
    "working",
]
