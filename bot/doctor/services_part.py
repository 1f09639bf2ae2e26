"""The doctor's lines for Alertmanager (reachable, its version, silences readable), the
playground's checkpoint servers (each one's `/v1/models`) and the weekly posts' schedules.
Reads only: no silence is made, no completion asked for."""

from __future__ import annotations

from datetime import datetime

from bot.backends.alertmanager import AlertmanagerClient
from bot.backends.openai_compat import CheckpointServers
from bot.config import Settings
from bot.doctor.report import Line, Status
from bot.errors import BackendError
from bot.highlights.schedule import DigestSchedule
from bot.playground.config import parse_endpoints

TIMEOUT_S = 5.0


async def alertmanager_lines(url: str | None, token_set: bool) -> list[Line]:
    part = "Alertmanager"
    if not url:
        return [
            Line(
                part,
                "server",
                Status.OFF,
                "ALERTMANAGER_URL is not set: the Silence button is not offered",
            )
        ]
    client = AlertmanagerClient(url, timeout_s=TIMEOUT_S)
    try:
        status = await client.status()
        silences = await client.silences()
    except BackendError as exc:
        return [Line(part, "server", Status.FAIL, str(exc), "check ALERTMANAGER_URL")]
    finally:
        await client.close()
    version = (status.get("versionInfo") or {}).get("version", "?")
    cluster = (status.get("cluster") or {}).get("status", "?")
    lines = [
        Line(part, "server", Status.PASS, f"{version}, cluster {cluster}"),
        Line(part, "silences", Status.PASS, f"readable ({len(silences)} known)"),
    ]
    if not token_set:
        lines.append(
            Line(
                part,
                "webhook",
                Status.WARN,
                "ALERTMANAGER_WEBHOOK_TOKEN is not set: POST /alertmanager refuses every webhook",
                "set it, and the same token as the receiver's bearer credentials",
            )
        )
    return lines


async def playground_lines(raw: str | None) -> list[Line]:
    part = "Playground"
    if not raw:
        return [Line(part, "servers", Status.OFF, "PLAYGROUND_ENDPOINTS is not set")]
    lines = []
    client = CheckpointServers()
    try:
        for endpoint in parse_endpoints(raw):
            try:
                models = await client.models(endpoint, TIMEOUT_S)
            except BackendError as exc:
                lines.append(
                    Line(
                        part,
                        endpoint.name,
                        Status.FAIL,
                        str(exc),
                        "start the server, or correct its URL (it ends in /v1)",
                    )
                )
                continue
            status = Status.PASS if models else Status.WARN
            said = f"{len(models)} checkpoint(s) served" if models else "serves no model"
            lines.append(Line(part, endpoint.name, status, said, "load a checkpoint"))
    finally:
        await client.close()
    return lines


def schedule_lines(settings: Settings, now: datetime) -> list[Line]:
    """When the weekly posts go out next, and where (no channel: nothing goes out)."""
    lines = []
    for what, schedule, channel, var in (
        ("highlights digest", settings.digest_schedule, settings.digest_channel, "DIGEST"),
        (
            "regressions post",
            settings.regressions_schedule,
            settings.regressions_channel,
            "REGRESSIONS",
        ),
    ):
        when = DigestSchedule.parse(schedule).next_fire(now)
        if channel:
            said = f"next {when:%a %d %b %H:%M} UTC ({schedule}), to {channel}"
            lines.append(Line("Schedules", what, Status.PASS, said))
        else:
            said = f"MEOWBOT_{var}_CHANNEL is not set: nothing is posted"
            lines.append(Line("Schedules", what, Status.OFF, said))
    return lines
