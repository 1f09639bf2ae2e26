"""manifest.yaml's bot scopes and the one each Web API method needs: what the doctor finds
missing (bot/doctor/slack_part.py) and what the Slack emulator refuses without
(bot/shell/emulator/web_api.py). tests/unit/test_doctor.py holds BOT_SCOPES to the manifest."""

from __future__ import annotations

BOT_SCOPES: tuple[str, ...] = (
    "app_mentions:read",
    "commands",
    "chat:write",
    "channels:history",
    "channels:read",
    "files:write",
    "groups:history",
    "groups:read",
    "im:history",
    "im:write",
    "reactions:read",
    "usergroups:read",
    "users:read",
    "users:read.email",
)
"""manifest.yaml's bot scopes."""

NEEDS_SCOPE: dict[str, str] = {
    "chat.delete": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "conversations.history": "channels:history",
    "conversations.info": "channels:read",
    "conversations.list": "channels:read",
    "conversations.members": "channels:read",
    "conversations.open": "im:write",
    "conversations.replies": "channels:history",
    "files.completeUploadExternal": "files:write",
    "files.getUploadURLExternal": "files:write",
    "reactions.get": "reactions:read",
    "usergroups.list": "usergroups:read",
    "usergroups.users.list": "usergroups:read",
    "users.info": "users:read",
    "users.list": "users:read",
    "users.lookupByEmail": "users:read.email",
}
"""The bot scope each method needs, as Slack's method pages list them (for a public channel;
the emulator does not tell public from private channels here)."""
