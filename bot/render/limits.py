"""Slack's Block Kit limits, in one place.

Every number here is a limit Slack enforces by rejecting the request (`invalid_blocks`,
`msg_blocks_too_long`, ...). The builders in `bot.render.blocks` keep them by truncating
visibly; nothing else in meowbot should hard-code them.

Lengths are measured with `bot.mrkdwn.text_length`, which counts UTF-16 code units: never
fewer than the characters Slack counts, so a string that fits by our count fits by Slack's.
"""

from __future__ import annotations

from typing import Final

# Blocks per surface.
MAX_MESSAGE_BLOCKS: Final = 50
MAX_VIEW_BLOCKS: Final = 100  # modals and the home tab

# Message text (the fallback `text` of chat.postMessage).
MAX_MESSAGE_TEXT: Final = 40_000
MAX_ATTACHMENTS: Final = 100  # legacy attachments on one message

# Undocumented: Slack answers `msg_blocks_too_long` when the text in all blocks of one message
# passes roughly 12,000 characters. We stay well under it.
MSG_BLOCKS_TEXT_LIMIT: Final = 12_000
MSG_BLOCKS_TEXT_BUDGET: Final = 11_000

# Section block.
MAX_SECTION_TEXT: Final = 3000
MAX_SECTION_FIELDS: Final = 10
MAX_FIELD_TEXT: Final = 2000

# Header block (plain_text).
MAX_HEADER_TEXT: Final = 150

# Context block.
MAX_CONTEXT_ELEMENTS: Final = 10
MAX_CONTEXT_ELEMENT_TEXT: Final = 2000  # not documented; the field limit is the safe bet

# Actions block.
MAX_ACTIONS_ELEMENTS: Final = 25

# Markdown block: its text, and the sum over all markdown blocks of one message.
MAX_MARKDOWN_TEXT: Final = 12_000

# Video block title ("less than 200 characters").
MAX_VIDEO_TITLE: Final = 199

# Button element.
MAX_BUTTON_TEXT: Final = 75
MAX_ACCESSIBILITY_LABEL: Final = 75
MAX_BUTTON_VALUE: Final = 2000
MAX_URL: Final = 3000

# Identifiers.
MAX_ACTION_ID: Final = 255
MAX_BLOCK_ID: Final = 255
MAX_CALLBACK_ID: Final = 255

# Selects and their options.
MAX_SELECT_OPTIONS: Final = 100
MAX_OPTION_TEXT: Final = 75
MAX_OPTION_VALUE: Final = 150
MAX_OPTION_DESCRIPTION: Final = 75
MAX_OPTION_GROUPS: Final = 100
MAX_OPTION_GROUP_LABEL: Final = 75
MAX_PLACEHOLDER: Final = 150
MAX_OVERFLOW_OPTIONS: Final = 5
MAX_CHOICE_OPTIONS: Final = 10  # checkboxes, radio buttons

# Confirmation dialog on a button or select.
MAX_CONFIRM_TITLE: Final = 100
MAX_CONFIRM_TEXT: Final = 300
MAX_CONFIRM_BUTTON: Final = 30

# Image block / element.
MAX_IMAGE_ALT: Final = 2000
MAX_IMAGE_TITLE: Final = 2000

# Input block (modals, home tab).
MAX_INPUT_LABEL: Final = 2000
MAX_INPUT_HINT: Final = 2000
MAX_TEXT_INPUT_LENGTH: Final = 3000

# Views (modal, home tab).
MAX_VIEW_TITLE: Final = 24
MAX_VIEW_SUBMIT: Final = 24
MAX_VIEW_CLOSE: Final = 24
MAX_PRIVATE_METADATA: Final = 3000
MAX_EXTERNAL_ID: Final = 255
