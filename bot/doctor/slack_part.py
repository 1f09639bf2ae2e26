"""The doctor's Slack lines: who the token is, the scopes it was granted against the ones
manifest.yaml asks for, how Slack reaches the bot, and the channels it posts to."""

from __future__ import annotations

from collections.abc import Sequence

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.doctor.report import Line, Status
from bot.slack_scopes import BOT_SCOPES

PART = "Slack"

WHAT_NEEDS: dict[str, str] = {
    "chat:write": "no alert, answer or digest can be posted",
    "commands": "the slash commands do not reach meowbot",
    "app_mentions:read": "mentions go unanswered",
    "im:history": "DMs go unanswered",
    "reactions:read": "highlights are not counted",
    "users:read.email": "job owners cannot be told (users are matched by e-mail)",
    "files:write": "charts cannot be posted",
}


def scope_lines(granted: Sequence[str] | None) -> list[Line]:
    """The granted scopes against the manifest's: missing ones fail with what they stop."""
    if granted is None:
        return [
            Line(
                PART,
                "scopes",
                Status.WARN,
                "Slack did not say which scopes the token has",
                "compare the app's OAuth & Permissions page with manifest.yaml",
            )
        ]
    missing = [s for s in BOT_SCOPES if s not in set(granted)]
    if not missing:
        return [Line(PART, "scopes", Status.PASS, f"all {len(BOT_SCOPES)} of manifest.yaml's")]
    stops = "; ".join(f"{s}: {WHAT_NEEDS[s]}" for s in missing if s in WHAT_NEEDS)
    return [
        Line(
            PART,
            "scopes",
            Status.FAIL,
            f"missing {', '.join(missing)}" + (f" ({stops})" if stops else ""),
            "add them under OAuth & Permissions (or install the app from manifest.yaml), "
            "then reinstall it to the workspace",
        )
    ]


def transport_line(settings: Settings) -> Line:
    if settings.slack_app_token is not None:
        return Line(PART, "how Slack reaches meowbot", Status.PASS, "Socket Mode (SLACK_APP_TOKEN)")
    if settings.slack_signing_secret is not None:
        return Line(
            PART,
            "how Slack reaches meowbot",
            Status.PASS,
            f"HTTP on port {settings.port}, requests checked with SLACK_SIGNING_SECRET",
        )
    return Line(
        PART,
        "how Slack reaches meowbot",
        Status.FAIL,
        "neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set",
        "set SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP events)",
    )


async def _channel_line(client: AsyncWebClient, what: str, channel: str) -> Line:
    try:
        answer = await client.conversations_info(channel=channel)
    except SlackApiError as exc:
        error = exc.response.get("error", "error")
        fix = (
            "check the channel id (a C..., not its name)"
            if error == "channel_not_found"
            else f"Slack said {error}"
        )
        return Line(PART, what, Status.FAIL, f"{channel}: {error}", fix)
    info = answer.get("channel") or {}
    name = f"#{info.get('name')}" if info.get("name") else channel
    if info.get("is_archived"):
        return Line(PART, what, Status.FAIL, f"{name} is archived", "point it at a live channel")
    if not info.get("is_member"):
        return Line(
            PART, what, Status.FAIL, f"meowbot is not in {name}", f"/invite @meowbot in {name}"
        )
    return Line(PART, what, Status.PASS, f"{name}, meowbot is a member")


async def slack_lines(settings: Settings, client: AsyncWebClient | None) -> list[Line]:
    if client is None or settings.slack_bot_token is None:
        return [
            Line(
                PART,
                "bot token",
                Status.OFF,
                "SLACK_BOT_TOKEN is not set: meowbot runs as the terminal shell",
            )
        ]
    try:
        me = await client.auth_test()
    except SlackApiError as exc:
        error = exc.response.get("error", "error")
        return [
            Line(
                PART,
                "bot token",
                Status.FAIL,
                f"Slack refused it: {error}",
                "copy the Bot User OAuth Token (xoxb-...) of the installed app",
            )
        ]
    except (OSError, TimeoutError, aiohttp.ClientError) as exc:
        said = f"Slack unreachable: {exc or type(exc).__name__}"
        return [Line(PART, "bot token", Status.FAIL, said, "check SLACK_API_URL and egress")]
    header = me.headers.get("x-oauth-scopes") if me.headers else None
    granted = [s.strip() for s in header.split(",")] if isinstance(header, str) else None
    lines = [
        Line(
            PART,
            "bot token",
            Status.PASS,
            f"@{me.get('user')} ({me.get('user_id')}) in {me.get('team')} ({me.get('team_id')})",
        ),
        *scope_lines(granted),
        transport_line(settings),
    ]
    for what, channel in (
        ("alert channel", settings.alert_channel),
        ("digest channel", settings.digest_channel),
        ("regressions channel", settings.regressions_channel),
    ):
        if channel:
            lines.append(await _channel_line(client, what, channel))
        elif what == "alert channel":
            lines.append(
                Line(
                    PART,
                    what,
                    Status.WARN,
                    "MEOWBOT_ALERT_CHANNEL is not set: faults found by the sweep are not posted",
                    "set MEOWBOT_ALERT_CHANNEL to the channel's id",
                )
            )
    return lines
