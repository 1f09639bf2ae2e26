"""What Block Kit accepts where: the block types, the element types each place takes, and
the properties of the common blocks, elements and views (anything else is an "invalid
additional property", as Slack says)."""

from __future__ import annotations

BLOCK_TYPES = frozenset(
    {
        "section",
        "header",
        "context",
        "divider",
        "actions",
        "image",
        "input",
        "rich_text",
        "markdown",
        "file",
        "video",
    }
)
SELECTS = frozenset(
    {
        "static_select",
        "external_select",
        "users_select",
        "conversations_select",
        "channels_select",
    }
)
MULTI_SELECTS = frozenset(f"multi_{s}" for s in SELECTS)
ACTIONS_ELEMENTS = (
    frozenset(
        {
            "button",
            "checkboxes",
            "datepicker",
            "datetimepicker",
            "overflow",
            "radio_buttons",
            "timepicker",
            "workflow_button",
        }
    )
    | SELECTS
    | MULTI_SELECTS
)
ACCESSORY_ELEMENTS = (
    frozenset(
        {
            "button",
            "checkboxes",
            "datepicker",
            "image",
            "overflow",
            "radio_buttons",
            "timepicker",
            "workflow_button",
        }
    )
    | SELECTS
    | MULTI_SELECTS
)
INPUT_ELEMENTS = (
    frozenset(
        {
            "checkboxes",
            "datepicker",
            "datetimepicker",
            "email_text_input",
            "file_input",
            "number_input",
            "plain_text_input",
            "radio_buttons",
            "rich_text_input",
            "timepicker",
            "url_text_input",
        }
    )
    | SELECTS
    | MULTI_SELECTS
)
BLOCK_PROPS: dict[str, frozenset[str]] = {
    "section": frozenset({"type", "block_id", "text", "fields", "accessory", "expand"}),
    "header": frozenset({"type", "block_id", "text"}),
    "divider": frozenset({"type", "block_id"}),
    "context": frozenset({"type", "block_id", "elements"}),
    "actions": frozenset({"type", "block_id", "elements"}),
    "input": frozenset(
        {"type", "block_id", "label", "element", "dispatch_action", "hint", "optional"}
    ),
    "markdown": frozenset({"type", "block_id", "text"}),
}
BUTTON_PROPS = frozenset(
    {"type", "text", "action_id", "url", "value", "style", "confirm", "accessibility_label"}
)
OPTION_PROPS = frozenset({"text", "value", "description", "url"})
VIEW_PROPS = frozenset(
    {
        "type",
        "title",
        "blocks",
        "close",
        "submit",
        "private_metadata",
        "callback_id",
        "clear_on_close",
        "notify_on_close",
        "external_id",
        "submit_disabled",
    }
)
