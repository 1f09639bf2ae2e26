"""Registers listeners on the AsyncApp and remembers what it registered.

The manifest test compares this record with manifest.yaml both ways, so a command or event
cannot be added on one side only.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.kwargs_injection.async_args import AsyncArgs
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot import slack_payloads
from bot.acting import acting_as, user_of
from bot.inflight import Handover, InFlight
from bot.render.blocks import action_id_pattern

log = logging.getLogger(__name__)

RESTARTED = (
    "meowbot was restarted before it finished this; nothing more will come of it. "
    "Please run it again."
)
# Payloads someone waits on an answer to; an event has nobody waiting.
ASKED = frozenset({"block_actions", "view_submission"})

Listener = Callable[..., Awaitable[Any]]
Next = Callable[[], Awaitable[Any]]
# request, next -> a response to send at once, or None after calling next()
MiddlewareFn = Callable[[AsyncBoltRequest, Next], Awaitable[BoltResponse | None]]
# body, context, next -> likewise: what a listener's `before_ack` step is given
BeforeAckFn = Callable[[dict[str, Any], Any, Next], Awaitable[BoltResponse | None]]


class Middleware(AsyncMiddleware):
    """Every Bolt middleware of the bot, global (`app.use`) or per listener: a class that calls
    `fn(request, next)` directly, because Bolt's function middleware inspects the function's
    argument names on every request, which costs more than the work itself on the busiest
    path (reaction events)."""

    def __init__(self, fn: MiddlewareFn, name: str) -> None:
        self.fn = fn
        self._name = name

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Next
    ) -> BoltResponse | None:
        return await self.fn(req, next)

    @property
    def name(self) -> str:
        return self._name


def _name(fn: Callable[..., Any]) -> str:
    """A listener's name: a module-level function's own, or, bound to what it uses with
    `functools.partial(listener, service)`, the function's inside it."""
    inner = fn.func if isinstance(fn, functools.partial) else fn
    return str(getattr(inner, "__name__", "fn"))


def before_ack_step(fn: BeforeAckFn) -> Middleware:
    """A listener's step that runs before Slack gets its 200, given the body and context."""

    async def run(req: AsyncBoltRequest, next: Next) -> BoltResponse | None:
        return await fn(req.body, req.context, next)

    return Middleware(run, f"before_ack({_name(fn)})")


def _handover(args: AsyncArgs) -> Handover | None:
    """How to tell the asker, should SIGTERM's grace end before their answer: through
    `respond` (the response_url, or for a press or a form without one, an ephemeral or a DM:
    handlers/reply.py: RespondElsewhere)."""
    body = args.body
    if "command" not in body and body.get("type") not in ASKED:
        return None
    respond = args.respond

    async def tell() -> None:
        await respond(text=RESTARTED, response_type="ephemeral", replace_original=False)

    return tell


def payload_check() -> Middleware:
    """Socket Mode's envelopes do not pass the HTTP edge (bot/server.py: slack_edge), which
    holds every HTTP request to what Slack always sends: the same check, for them. Refused,
    an envelope is still acked: Bolt sends no ack for any other status, and Slack redelivers
    what was not acked."""

    async def check(req: AsyncBoltRequest, next: Next) -> BoltResponse | None:
        if req.mode == "socket_mode":
            refusal = slack_payloads.check(req.body)
            if refusal is not None:
                log.warning(
                    "slack request refused",
                    extra={"reason": refusal.reason, "kind": refusal.kind},
                )
                return BoltResponse(status=200, body="")
        await next()
        return None

    return Middleware(check, "meowbot.payload_check")


class AcksFirst:
    """A listener's `ack` whose call returns once the acks on their way have gone out: what
    the listener does after it waits its turn behind them (bot/inflight.py `acks_out`)."""

    def __init__(self, ack: AsyncAck, inflight: InFlight) -> None:
        self._ack = ack
        self._inflight = inflight

    async def __call__(self, *args: Any, **kwargs: Any) -> BoltResponse:
        response = await self._ack(*args, **kwargs)
        await self._inflight.acks_out()
        return response


@dataclass
class Registered:
    commands: set[str] = field(default_factory=set)
    actions: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    views: set[str] = field(default_factory=set)


class Registry:
    """Every listener goes through here, so every one is tracked while it runs: the work that
    goes on after the ack is what a graceful shutdown waits for."""

    def __init__(self, app: AsyncApp, inflight: InFlight) -> None:
        self.app = app
        self.inflight = inflight
        self.registered = Registered()

    def _tracked(self, listener: Listener) -> Listener:
        # Bolt gives a listener whose one argument is named `args` all of them (AsyncArgs):
        # the wrapper needs `body` and `respond` for the handover whatever the listener takes.
        # A `functools.partial` with what it uses bound in front shows Bolt's arguments only.
        names = tuple(inspect.signature(listener).parameters)
        unknown = [n for n in names if n not in AsyncArgs.__annotations__]
        if unknown:
            raise TypeError(f"{_name(listener)}: Bolt gives no argument named {unknown}")

        async def run(args: AsyncArgs) -> Any:
            given = {n: getattr(args, n) for n in names}
            if "ack" in given:
                given["ack"] = AcksFirst(given["ack"], self.inflight)
            # Who it is for, for words that depend on it (bot/acting.py).
            with acting_as(user_of(args.body)):
                async with self.inflight.track(_handover(args)):
                    return await listener(**given)

        run.__qualname__ = run.__name__ = _name(listener)  # Bolt names a listener by this
        return run

    def command(self, name: str, listener: Listener) -> None:
        self.registered.commands.add(name)
        self.app.command(name)(self._tracked(listener))

    def commands(self, names: Iterable[str], listener: Listener) -> None:
        """One listener for several commands: Bolt then matches a command in one step
        instead of trying a listener per command (it tries them in order, on every request)."""
        names = list(names)
        self.registered.commands.update(names)
        pattern = re.compile("^(" + "|".join(re.escape(n) for n in names) + ")$")
        self.app.command(pattern)(self._tracked(listener))

    def action(self, action_id: str, listener: Listener) -> None:
        """Registers `action_id` and its de-duplicated forms (`drain#2`, `drain#3`): the renderer
        suffixes an id that repeats in one message, and a listener for the exact id left every
        button but the first of its kind answering 404."""
        self.registered.actions.add(action_id)
        self.app.action(action_id_pattern(action_id))(self._tracked(listener))

    def event(
        self, event_type: str, listener: Listener, *, before_ack: BeforeAckFn | None = None
    ) -> None:
        """`before_ack` is listener middleware: it runs before Slack gets its 200 (Bolt answers
        500 if it raises, so Slack retries), for work that must be done before the ack."""
        self.registered.events.add(event_type)
        middleware = [before_ack_step(before_ack)] if before_ack is not None else None
        self.app.event(event_type, middleware=middleware)(self._tracked(listener))

    def view(self, callback_id: str, listener: Listener) -> None:
        self.registered.views.add(callback_id)
        self.app.view(callback_id)(self._tracked(listener))
