"""Slack rendering: Block Kit builders that keep Slack's limits, mrkdwn helpers, terminal view.

The usual imports::

    from bot.render import Message, button, select, error, usage, working
    from bot.mrkdwn import escape, code
"""

from bot.mrkdwn import code, code_block, escape, truncate
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
    "code",
    "code_block",
    "confirm_dialog",
    "error",
    "escape",
    "image_element",
    "option",
    "plain_text_input",
    "render_message",
    "render_terminal",
    "render_view",
    "select",
    "success",
    "truncate",
    "usage",
    "working",
]
