"""manifest.yaml is valid for Slack and matches what the code registers and calls, both ways."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bot.app import create_bot
from bot.config import load_settings
from handlers.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
# Slack's published schema: ../shared's copy where it is beside the checkout (as in CI), else
# the copy kept in tests/data (MIT, with its licence) so a clone anywhere still checks.
_SHARED = ROOT.parent / "shared" / "slack-manifest-schema" / "schemas"
SCHEMAS = _SHARED if _SHARED.is_dir() else ROOT / "tests" / "data" / "slack-manifest-schema"

# Web API methods (as slack_sdk method names) -> the bot scope each needs (None: no scope).
METHOD_SCOPES: dict[str, str | tuple[str, ...] | None] = {
    "chat_postMessage": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_update": "chat:write",
    "chat_delete": "chat:write",
    "views_open": None,
    "views_update": None,
    "views_publish": None,
    "auth_test": None,
    "users_info": ("users:read", "users:read.email"),  # the email maps to a cluster user
    # A job owner on Slack, from the cluster user (bot/backends/slack_owners.py), and the DM.
    "users_list": ("users:read", "users:read.email"),
    "users_lookupByEmail": "users:read.email",
    "conversations_open": "im:write",
    "usergroups_users_list": "usergroups:read",
    "usergroups_list": "usergroups:read",
    # Public and private channels: a private channel's visibility and its own digest.
    "conversations_info": ("channels:read", "groups:read"),
    "conversations_list": "channels:read",  # the backfill walks public channels only
    "conversations_history": ("channels:history", "groups:history"),
    "conversations_replies": "channels:history",
    "reactions_get": "reactions:read",
    "chat_getPermalink": None,
    "files_upload_v2": "files:write",
}


# Events (as the manifest names them) -> the bot scope each needs.
EVENT_SCOPES: dict[str, str | None] = {
    "app_home_opened": None,
    "app_mention": "app_mentions:read",
    "reaction_added": "reactions:read",
    "reaction_removed": "reactions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
}


def _listened(event: str) -> str:
    """`message.channels` is the manifest's name of a `message` event in a public channel."""
    return event.split(".", 1)[0]


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "manifest.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_manifest_validates_against_slacks_schema(manifest: dict[str, Any]) -> None:
    major = manifest["_metadata"]["major_version"]
    schema = json.loads((SCHEMAS / f"manifest.schema.{major}.0.0.json").read_text())
    jsonschema.Draft7Validator(schema).validate(manifest)


def test_schema_check_is_not_vacuous(manifest: dict[str, Any]) -> None:
    schema = json.loads((SCHEMAS / "manifest.schema.1.0.0.json").read_text())
    broken = json.loads(json.dumps(manifest))
    broken["features"]["slash_commands"][0]["command"] = "no-slash"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(broken)


async def test_manifest_and_listeners_agree_both_ways(manifest: dict[str, Any]) -> None:
    bot = await create_bot(load_settings(SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="x"))
    try:
        registered = bot.registered
    finally:
        await bot.close()
    listed = {c["command"] for c in manifest["features"]["slash_commands"]}
    assert listed == registered.commands == {c.name for c in COMMANDS}
    for entry in manifest["features"]["slash_commands"]:
        cmd = next(c for c in COMMANDS if c.name == entry["command"])
        assert entry["description"] == cmd.description
        assert entry["usage_hint"] == cmd.usage_hint
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert {_listened(e) for e in events} == registered.events
    interactive = bool(registered.actions or registered.views)
    assert manifest["settings"]["interactivity"]["is_enabled"] is interactive
    if "app_home_opened" in registered.events:
        assert manifest["features"]["app_home"]["home_tab_enabled"] is True


def test_scopes_are_exactly_those_the_code_needs(manifest: dict[str, Any]) -> None:
    source = "\n".join(
        p.read_text()
        for d in ("bot", "handlers")
        for p in (ROOT / d).rglob("*.py")
        if "emulator" not in p.relative_to(ROOT).parts
    )
    used = set(re.findall(r"\bclient\.([a-z]+_[A-Za-z0-9_]+)\(", source))
    unknown = used - METHOD_SCOPES.keys()
    assert not unknown, f"add the scope of {unknown} to METHOD_SCOPES"
    needed: set[str] = {"commands"}
    for method in used:
        scopes = METHOD_SCOPES[method]
        needed.update((scopes,) if isinstance(scopes, str) else scopes or ())
    for event in manifest["settings"]["event_subscriptions"]["bot_events"]:
        scope = EVENT_SCOPES[event]
        needed.update((scope,) if scope else ())
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed
