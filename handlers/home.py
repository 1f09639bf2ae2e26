"""The App Home tab, and its setup check for the admins (`meowbot doctor`'s report)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import Deps
from bot.doctor.run import doctor
from bot.errors import BackendError
from bot.mrkdwn import escape
from bot.render.doctor import CHECKING, SETUP_ACTION, setup_lines
from bot.render.palette import home_view
from bot.render.triage import glance_lines, jobs_lines
from bot.triage.service import fleet_glance, user_jobs
from handlers.commands import COMMANDS
from handlers.registry import Registry
from handlers.reply import publish_home

log = logging.getLogger(__name__)


async def _to_test(deps: Deps, may_act: bool) -> list[tuple[str, str]]:
    """The nodes meowbot drained, as the scheduler holds them, for a person who may test
    them, where testing is set up; nothing otherwise (or when the scheduler cannot answer)."""
    v = deps.validation
    if v is None or not may_act:
        return []
    try:
        nodes = await v.scheduler.nodes()
    except BackendError:
        return []
    return sorted(
        (name, n.reason or "") for name, n in nodes.items() if n.out_of_service and n.reason_is_ours
    )


async def _home(deps: Deps, user: str, client: AsyncWebClient) -> dict[str, Any]:
    """What the tab shows `user` now, as `home_view`'s arguments."""
    may_act = await deps.authz.allowed(user, client)
    glance, mine, to_test = await asyncio.gather(
        fleet_glance(deps.triage),
        user_jobs(deps.triage, await deps.users.cluster_user(user, client)),
        _to_test(deps, may_act),
    )
    return {
        "commands": COMMANDS,
        "backends": deps.settings.backends(),
        "glance": glance_lines(glance),
        "jobs": jobs_lines(mine),
        "to_test": to_test,
        "test": deps.validation.offer if deps.validation is not None else None,
        "may_check": may_act,
    }


def register(reg: Registry, deps: Deps) -> None:
    async def on_home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event["user"])
        await publish_home(client, user, home_view(**await _home(deps, user, client)))

    async def on_setup_check(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        """The doctor's report where the admin pressed: progress first, then each line.
        Read-only like the command; a person who may not act is told so and nothing runs."""
        await ack()
        user = str((body.get("user") or {}).get("id", ""))
        home = await _home(deps, user, client)
        if not home["may_check"]:
            refusal = deps.authz.refusal("check the setup")
            await publish_home(client, user, home_view(**home, setup=[refusal]))
            return
        await publish_home(client, user, home_view(**home, setup=[CHECKING]))
        try:
            report = setup_lines(await doctor(deps.settings), datetime.now(UTC))
        except Exception as exc:  # the tab must not stay at "Checking…"
            log.exception("setup check failed")
            report = [f":x: The setup check stopped: {escape(str(exc) or type(exc).__name__)}."]
        await publish_home(client, user, home_view(**home, setup=report))

    reg.event("app_home_opened", on_home_opened)
    reg.action(SETUP_ACTION, on_setup_check)
