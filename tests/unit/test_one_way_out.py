"""One way out to Slack: no module of handlers/ but handlers/reply.py calls the Web API.

A post, an edit, an upload, an ephemeral, a modal or the App Home tab sent by a handler of its
own skips what reply.py keeps: the overflow that follows into the thread, the chart drawn on
the worker pool and, when Slack will not take it, the thread told why. The scan reads the
source for any call of a Web API method by its name (every method `AsyncWebClient` has, and
`api_call`), whatever the client is called there, and for `getattr` of one.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any, cast

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.offload import Offload
from handlers.reply import Chart, upload_chart

HANDLERS = Path(__file__).parents[2] / "handlers"
WEB_API = frozenset(n for n in vars(AsyncWebClient) if not n.startswith("_")) | {"api_call"}


def web_api_calls(path: Path) -> list[str]:
    """Where `path` calls a Web API method: `file:line: the call`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        named = isinstance(func, ast.Attribute) and func.attr in WEB_API
        fetched = (
            isinstance(func, ast.Name)
            and func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in WEB_API
        )
        if named or fetched:
            found.append(f"{path.relative_to(HANDLERS.parent)}:{node.lineno}: {ast.unparse(func)}")
    return found


def test_no_handler_but_reply_calls_the_web_api() -> None:
    others = sorted(p for p in HANDLERS.rglob("*.py") if p != HANDLERS / "reply.py")
    assert len(others) > 10
    calls = [call for path in others for call in web_api_calls(path)]
    assert calls == [], "send through handlers/reply.py instead:\n" + "\n".join(calls)


def test_the_scan_finds_the_calls_reply_makes() -> None:
    calls = " ".join(web_api_calls(HANDLERS / "reply.py"))
    for method in ("chat_postMessage", "chat_update", "chat_postEphemeral", "files_upload_v2"):
        assert f"client.{method}" in calls
    for method in ("views_open", "views_update", "views_publish"):
        assert f"client.{method}" in calls


class RefusingSlack:
    """A Web API client that takes posts and refuses uploads, as a workspace without the
    files:write scope does."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []

    async def files_upload_v2(self, **kwargs: Any) -> None:
        raise SlackApiError("refused", cast(Any, {"ok": False, "error": "missing_scope"}))

    async def chat_postMessage(self, **kwargs: Any) -> None:
        self.posts.append(kwargs)


async def test_a_chart_is_drawn_on_the_pool_and_a_refused_upload_is_said() -> None:
    drawn_on: list[str] = []

    def draw() -> bytes:
        drawn_on.append(threading.current_thread().name)
        return b"\x89PNG"

    slack, cpu = RefusingSlack(), Offload()
    chart = Chart(draw, filename="c.png", title="A chart")
    try:
        await upload_chart(cast(AsyncWebClient, slack), cpu, "C1", "1.5", chart)
        await upload_chart(cast(AsyncWebClient, slack), cpu, "C1", "1.5", chart, quiet=True)
    finally:
        cpu.close()
    assert [t.startswith("meowbot-cpu") for t in drawn_on] == [True, True]
    assert slack.posts == [
        {
            "channel": "C1",
            "text": "The chart could not be uploaded (missing_scope).",
            "thread_ts": "1.5",
        }
    ]
