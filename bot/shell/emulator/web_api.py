"""The Web API's front door: arguments read the ways Slack accepts them (JSON with a Bearer
token, form-urlencoded, multipart, query string), tokens checked, injected failures answered
(429 with Retry-After for rate limits), the method called, and every call recorded."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.shell.emulator.errors import SlackError
from bot.slack_scopes import BOT_SCOPES, NEEDS_SCOPE

Handler = Callable[[dict[str, Any]], dict[str, Any]]
# method name -> (handler, the token it takes: "bot", "app" or "none")
MethodTable = dict[str, tuple[Handler, str]]

_JSON_ARGS = ("blocks", "attachments", "files", "view", "metadata", "user_auth_blocks")
_JSON_ARG_ERRORS = {
    "blocks": "invalid_blocks_format",
    "user_auth_blocks": "invalid_blocks_format",
    "attachments": "invalid_attachments",
}


@dataclass(frozen=True)
class Call:
    """One Web API call as the emulator saw it (args decoded, token removed)."""

    method: str
    args: dict[str, Any]
    at: float  # time.monotonic() when the request arrived
    ok: bool
    error: str | None = None
    status: int = 200
    result: dict[str, Any] = field(default_factory=dict)  # the answer's body, as the bot got it


@dataclass
class _Failure:
    status: int
    retry_after: int
    error: str
    count: int


class WebApi:
    def __init__(self, methods: MethodTable, *, bot_token: str, app_token: str) -> None:
        self.methods = methods
        self.bot_token = bot_token
        self.app_token = app_token
        # What the bot token was granted: manifest.yaml's scopes unless a test takes some away.
        # Every answer to the bot token names them in `x-oauth-scopes`, as Slack's do.
        self.scopes: list[str] = list(BOT_SCOPES)
        self.calls: list[Call] = []
        self._failures: dict[str, list[_Failure]] = {}

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", "/api/{method}", self.handle)]

    def fail_next(
        self, method: str, *, status: int, retry_after: int, error: str, count: int
    ) -> None:
        self._failures.setdefault(method, []).append(_Failure(status, retry_after, error, count))

    def _injected_failure(self, method: str) -> tuple[dict[str, Any], int, dict[str, str]] | None:
        failures = self._failures.get(method)
        if not failures:
            return None
        failure = failures[0]
        failure.count -= 1
        if failure.count <= 0:
            failures.pop(0)
        if failure.status == 429:
            retry = {"Retry-After": str(failure.retry_after)}
            return {"ok": False, "error": "ratelimited"}, 429, retry
        error = failure.error
        if failure.status != 200 and error == "ratelimited":
            error = "fatal_error"
        return {"ok": False, "error": error}, failure.status, {}

    def _auth_error(self, token: str | None, token_kind: str) -> str | None:
        if token_kind == "none":
            return None
        if not token:
            return "not_authed"
        if token not in (self.bot_token, self.app_token):
            return "invalid_auth"
        wanted = self.app_token if token_kind == "app" else self.bot_token
        return "not_allowed_token_type" if token != wanted else None

    async def handle(self, request: web.Request) -> web.Response:
        at = time.monotonic()
        method = request.match_info["method"]
        args, form_token, parse_error = await _parse_args(request)

        def answer(
            body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
        ) -> web.Response:
            self.calls.append(
                Call(
                    method,
                    copy.deepcopy(args),
                    at,
                    bool(body.get("ok")),
                    body.get("error"),
                    status,
                    copy.deepcopy(body),
                )
            )
            return web.json_response(body, status=status, headers=headers)

        # Injected failures come before auth, as a rate limit would.
        failed = self._injected_failure(method)
        if failed is not None:
            body, status, headers = failed
            return answer(body, status, headers)
        entry = self.methods.get(method)
        if entry is None:
            return answer({"ok": False, "error": "unknown_method"})
        handler, token_kind = entry
        token = _bearer(request) or form_token
        auth_error = self._auth_error(token, token_kind)
        if auth_error is not None:
            return answer({"ok": False, "error": auth_error})
        granted = {"x-oauth-scopes": ",".join(self.scopes)} if token == self.bot_token else None
        needed = NEEDS_SCOPE.get(method)
        if granted is not None and needed is not None and needed not in self.scopes:
            missing = {
                "error": "missing_scope",
                "needed": needed,
                "provided": ",".join(self.scopes),
            }
            return answer({"ok": False, **missing}, 200, granted)
        if parse_error is not None:
            return answer({"ok": False, **parse_error}, 200, granted)
        try:
            result = handler(args)
        except SlackError as exc:
            return answer({"ok": False, "error": exc.error, **exc.extra}, 200, granted)
        return answer({"ok": True, **result}, 200, granted)


async def _parse_args(
    request: web.Request,
) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
    """(args, token from the form body, parse error) for a Web API request."""
    args: dict[str, Any] = dict(request.query)
    form_token: str | None = None
    error: dict[str, Any] | None = None
    if request.can_read_body:
        ctype = request.content_type
        if ctype == "application/json":
            try:
                body = json.loads(await request.text() or "{}")
            except json.JSONDecodeError:
                return args, None, {"error": "invalid_json"}
            if not isinstance(body, dict):
                return args, None, {"error": "invalid_json"}
            # Slack ignores a token inside a JSON body: it must be a Bearer header.
            body.pop("token", None)
            args.update(body)
        elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    args[key] = {
                        "filename": value.filename,
                        "content_type": value.content_type,
                        "content": value.file.read(),
                    }
                else:
                    args[key] = value
            token = args.pop("token", None)
            form_token = token if isinstance(token, str) else None
        else:
            await request.read()
    args.pop("token", None)  # a token in the query string is not accepted (and not recorded)
    for key in _JSON_ARGS:
        raw = args.get(key)
        if isinstance(raw, str):
            if raw == "":
                args[key] = None
                continue
            try:
                args[key] = json.loads(raw)
            except json.JSONDecodeError:
                error = error or {"error": _JSON_ARG_ERRORS.get(key, "invalid_arguments")}
    return args, form_token, error


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None
