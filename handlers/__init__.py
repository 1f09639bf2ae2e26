"""Every Slack listener, one module per surface; `register` wires them all on one AsyncApp."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.deps import Deps
from handlers import (
    actions,
    alerts,
    ask,
    commands,
    events,
    highlights,
    home,
    job_notices,
    jobslow,
    playground,
    reply,
    validation,
    views,
)
from handlers.registry import Registered, Registry, payload_check


def register(app: AsyncApp, deps: Deps) -> Registered:
    app.use(payload_check())  # first: a malformed event claims no event id
    app.use(events.dedup_middleware(deps))
    app.use(reply.respond_elsewhere())
    reg = Registry(app, deps.inflight)
    # First: Bolt tries listeners in order on every request, and reaction events are the bulk.
    highlights.register(reg, deps)
    # Right after highlights: its message listener passes on what is not an edit, to the DMs.
    ask.register(reg, deps)
    commands.register(reg, deps)
    actions.register(reg, deps)
    alerts.register(reg, deps)
    jobslow.register(reg, deps)
    job_notices.register(reg, deps)
    playground.register(reg, deps)
    views.register(reg, deps)
    home.register(reg, deps)
    validation.register(reg, deps)
    return reg.registered
