"""/playground end to end: signed requests into the real bot, real Redis, the Slack emulator,
and real in-training checkpoints served by a real `transformers serve` on loopback (started by
scripts/testsvc/checkpoints.py: PLAYGROUND_TEST_*)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.render.playground import (
    CANCEL_ACTION,
    MODAL_CALLBACK,
    RERUN_ACTION,
    RUN_PICK_ACTION,
    WATCH_ACTION,
)
from bot.server import SLACK_EVENTS_PATH
from bot.shell.emulator import SlackEmulator
from scripts.testsvc.common import free_port
from tests.conftest import need_service
from tests.e2e.conftest import Slack, bot_settings
from tests.waiting import eventually

CHANNEL = "C0GENERAL"


def env(name: str) -> str:
    return need_service(name)


async def start(
    emulator: SlackEmulator,
    redis_url: str,
    stack: contextlib.AsyncExitStack,
    tmp: Path,
    *,
    endpoints: str | None = None,
    dirs: str | None = None,
    **config: Any,
) -> Slack:
    cfg = tmp / f"meowbot-{len(list(tmp.glob('meowbot-*.yaml')))}.yaml"
    cfg.write_text(json.dumps({"playground": {"discovery_ttl_s": 0, **config}}))
    settings = bot_settings(
        emulator,
        redis_url,
        PLAYGROUND_ENDPOINTS=endpoints or env("PLAYGROUND_TEST_URL"),
        PLAYGROUND_CHECKPOINT_DIRS=dirs or env("PLAYGROUND_TEST_DIR"),
        MEOWBOT_CONFIG=str(cfg),
        MEOWBOT_ADMINS="U0ADMIN",
    )
    bot = await create_bot(settings)
    stack.push_async_callback(bot.close)
    port = await bot.start_http("127.0.0.1", 0)
    http = await stack.enter_async_context(aiohttp.ClientSession())
    return Slack(emulator, bot, f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}", http)


@pytest.fixture
async def stack() -> AsyncIterator[contextlib.AsyncExitStack]:
    async with contextlib.AsyncExitStack() as s:
        yield s


async def finished(emulator: SlackEmulator, ts: str, timeout: float = 60) -> dict[str, Any]:
    """The message once its buttons say it is final (Re-run and Watch instead of Cancel)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = emulator.message(CHANNEL, ts)
        if RERUN_ACTION in json.dumps(msg.get("blocks", [])):
            return msg
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the playground message {ts} never became final")


def top_ts(emulator: SlackEmulator) -> str:
    """The newest top-level message of the channel."""
    tops = [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") in (None, m["ts"])]
    return str(tops[-1]["ts"])


def replies_in(emulator: SlackEmulator, ts: str) -> list[dict[str, Any]]:
    return [m for m in emulator.messages(CHANNEL) if m.get("thread_ts") == ts and m["ts"] != ts]


def edits_of(emulator: SlackEmulator, ts: str) -> list[float]:
    return [c.at for c in emulator.calls_to("chat.update") if c.args.get("ts") == ts]


async def test_side_by_side_streams_into_one_message_at_slacks_pace(
    emulator: SlackEmulator, redis_url: str, stack: contextlib.AsyncExitStack, tmp_path: Path
) -> None:
    slack = await start(
        emulator, redis_url, stack, tmp_path, max_tokens=100, temperature=0, section_chars=200
    )
    run = env("PLAYGROUND_TEST_RUN")
    status, _, _ = await slack.command("/playground", f"{run} Beautiful is better than")
    assert status == 200
    posted = await emulator.wait_for_call("chat.postMessage", timeout=20)
    assert posted.ok, posted
    ts = top_ts(emulator)
    msg = await finished(emulator, ts)
    text = json.dumps(msg["blocks"])
    # The newest two checkpoints, each with its text and its figures.
    assert text.count(":white_check_mark: done") == 2, text
    assert "step 400" in text or "step 500" in text
    assert "tok/s" in text and "first token" in text and "loss" in text
    sections = [b["text"]["text"] for b in msg["blocks"] if b["type"] == "section"]
    answers = [s for s in sections if s.startswith("```")]
    assert len(answers) == 2 and all(len(a.strip("`\n ")) > 0 for a in answers)
    edits = edits_of(emulator, ts)
    assert edits, "the final answer is an edit of the posted message"
    gaps = [b - a for a, b in zip([posted.at, *edits], edits, strict=False)]
    assert min(gaps) >= 0.95, gaps  # never more than about one edit a second
    # Answers longer than a section go whole into the thread, escaped like the rest.
    long = [o for o in answers if "…" in o or "[truncated]" in o.lower()]
    replies = replies_in(emulator, ts)
    assert len(replies) >= len(long) >= 1, (answers, replies)
    assert all(r["text"].count("```") == 2 for r in replies)


async def test_the_modal_opens_at_once_fills_in_and_sends_four(
    emulator: SlackEmulator, redis_url: str, stack: contextlib.AsyncExitStack, tmp_path: Path
) -> None:
    slack = await start(emulator, redis_url, stack, tmp_path)
    run = env("PLAYGROUND_TEST_RUN")
    await slack.command("/playground", "")
    opened = await emulator.wait_for_call("views.open", timeout=5)
    assert opened.ok and "Looking for checkpoints" in json.dumps(opened.args["view"])
    updated = await emulator.wait_for_call("views.update", timeout=20)
    assert updated.ok, updated
    [view] = emulator.views.values()
    blocks = json.dumps(view["blocks"])
    assert run in blocks and "step 100" in blocks and RUN_PICK_ACTION in blocks
    steps_block = next(b["block_id"] for b in view["blocks"] if b["block_id"].startswith("steps:"))
    values = {
        "run": {RUN_PICK_ACTION: {"type": "static_select", "selected_option": {"value": run}}},
        steps_block: {
            "steps": {
                "type": "multi_static_select",
                "selected_options": [{"value": str(s)} for s in (100, 200, 300, 400)],
            }
        },
        "prompt": {"prompt": {"type": "plain_text_input", "value": "Simple is better than"}},
        "system": {"system": {"type": "plain_text_input", "value": None}},
        "mode": {"mode": {"type": "static_select", "selected_option": {"value": "chat"}}},
        "max_tokens": {"max_tokens": {"type": "plain_text_input", "value": "24"}},
        "temperature": {"temperature": {"type": "plain_text_input", "value": "0.8"}},
        "seed": {"seed": {"type": "plain_text_input", "value": "7"}},
    }
    submission = {
        "type": "view_submission",
        "team": {"id": emulator.team_id, "domain": "emu"},
        "user": {"id": "U0ADMIN", "username": "ana", "team_id": emulator.team_id},
        "api_app_id": "A0TEST",
        "trigger_id": emulator.new_trigger_id(),
        "view": {**view, "callback_id": MODAL_CALLBACK, "state": {"values": values}},
    }
    bad = json.loads(json.dumps(submission))
    bad["view"]["state"]["values"]["max_tokens"]["max_tokens"]["value"] = "lots"
    status, body, _ = await slack.interactive(bad)
    assert status == 200 and json.loads(body)["errors"] == {
        "max_tokens": "A number from 1 to 1024."
    }
    assert not emulator.calls_to("chat.postMessage")
    status, body, _ = await slack.interactive(submission)
    assert status == 200 and body == ""
    posted = await emulator.wait_for_call("chat.postMessage", timeout=20)
    assert posted.args["channel"] == CHANNEL
    msg = await finished(emulator, top_ts(emulator))
    text = json.dumps(msg["blocks"])
    assert all(f"step {s}" in text for s in (100, 200, 300, 400))
    assert text.count(":white_check_mark: done") == 4 and "chat" in text and "seed 7" in text


async def test_unknown_runs_and_bad_input_are_private_and_post_nothing(
    emulator: SlackEmulator, redis_url: str, stack: contextlib.AsyncExitStack, tmp_path: Path
) -> None:
    slack = await start(emulator, redis_url, stack, tmp_path)
    await slack.command("/playground", "no-such-run hello")
    await slack.command("/playground", "<!channel> hello")
    await slack.command("/playground", env("PLAYGROUND_TEST_RUN"))
    await slack.command("/playground", "unwatch nope")
    await emulator.wait_for_responses(4, timeout=20)
    texts = [body["text"] for _, body in emulator.responses]
    assert any(
        "I know no run `no-such-run`" in t and env("PLAYGROUND_TEST_RUN") in t for t in texts
    ), texts
    assert any("A run name is" in t for t in texts)
    assert any("Add a prompt" in t for t in texts)
    assert any("no watch" in t for t in texts)
    assert all(body["response_type"] == "ephemeral" for _, body in emulator.responses)
    assert not emulator.calls_to("chat.postMessage")


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A second, killable `transformers serve`, as the test environment starts its own."""
    port = free_port()
    argv = [*env("PLAYGROUND_TEST_SERVE_CMD").split("\x1f"), "--port", str(port)]
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        raise RuntimeError("the second transformers serve did not start")
    try:
        yield url, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        log.close()


async def killing_proxy(
    upstream_port: int, proc: subprocess.Popen[bytes]
) -> tuple[int, asyncio.AbstractServer]:
    """Forwards to the server and kills it (SIGKILL) as the first streamed answer passes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, kill: bool) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
                    if kill and b"data: " in data:
                        os.killpg(proc.pid, signal.SIGKILL)  # mid-stream: tokens are flowing
            dst.close()

        await asyncio.gather(pipe(reader, up_w, False), pipe(up_r, writer, True))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return int(server.sockets[0].getsockname()[1]), server


async def test_a_server_killed_mid_stream_is_one_sentence_and_the_other_completes(
    emulator: SlackEmulator,
    redis_url: str,
    stack: contextlib.AsyncExitStack,
    tmp_path: Path,
    own_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = own_server
    run_dir = Path(env("PLAYGROUND_TEST_DIR")) / env("PLAYGROUND_TEST_RUN")
    # Run `victim`: step 100 in a folder the doomed server answers for, step 200 loaded by the
    # shared server (which lists what it has loaded), so one request spans both servers.
    doomed, shared = tmp_path / "doomed" / "victim", tmp_path / "shared" / "victim"
    shutil.copytree(run_dir / "step-100", doomed / "step-100")
    shutil.copytree(run_dir / "step-200", shared / "step-200")
    warm = {"model": str(shared / "step-200"), "prompt": "x", "max_tokens": 1}
    url_c = f"{env('PLAYGROUND_TEST_URL')}/completions"
    async with aiohttp.ClientSession() as http, http.post(url_c, json=warm) as resp:
        assert resp.status == 200
    port, proxy = await killing_proxy(int(url.rsplit(":", 1)[1]), proc)
    stack.callback(proxy.close)
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: named, the others answer
    slack = await start(
        emulator,
        redis_url,
        stack,
        tmp_path,
        endpoints=f"http://127.0.0.1:{port}/v1;{env('PLAYGROUND_TEST_URL')};{dead}",
        dirs=str(tmp_path / "doomed"),
        max_tokens=100,
        temperature=0,
    )
    await slack.command("/playground", "victim Errors should never pass silently")
    await emulator.wait_for_call("chat.postMessage", timeout=60)
    msg = await finished(emulator, top_ts(emulator), timeout=90)
    text = json.dumps(msg["blocks"])
    assert ":x: failed" in text and ":white_check_mark: done" in text, text
    assert "dropped the stream" in text or "cannot be reached" in text
    assert "Traceback" not in text
    assert proc.wait(timeout=10) is not None  # the server really died
    assert dead.split("/v1")[0].removeprefix("http://") in text  # the down endpoint is named


async def test_watch_runs_a_new_checkpoint_once_and_rerun_uses_it(
    emulator: SlackEmulator, redis_url: str, stack: contextlib.AsyncExitStack, tmp_path: Path
) -> None:
    run = env("PLAYGROUND_TEST_RUN")
    root = Path(env("PLAYGROUND_TEST_DIR"))
    replicas = [
        await start(emulator, redis_url, stack, tmp_path, max_tokens=16, temperature=0)
        for _ in range(3)
    ]
    slack = replicas[0]
    await slack.command("/playground", f"{run} Now is better than")
    await emulator.wait_for_call("chat.postMessage", timeout=20)
    ts = top_ts(emulator)
    await finished(emulator, ts)
    await slack.interactive(emulator.block_actions_payload(CHANNEL, ts, WATCH_ACTION))
    await emulator.wait_for_responses(1, timeout=10)
    said = emulator.responses[-1][1]["text"]
    assert "Watching" in said and "unwatch" in said
    await slack.command("/playground", "watches")
    await emulator.wait_for_responses(2, timeout=10)
    assert run in json.dumps(emulator.responses[-1][1])

    # Nothing new yet: Re-run says so.
    if not (root / run / "step-500").exists():
        await slack.interactive(emulator.block_actions_payload(CHANNEL, ts, RERUN_ACTION))
        await emulator.wait_for_responses(3, timeout=20)
        assert "newer than step" in emulator.responses[-1][1]["text"]
        # Training saves one: written aside, then renamed into place, as a trainer does. The
        # held-back folder stays for the tests that publish their own copy.
        aside = root / run / ".step-500.partial"
        shutil.copytree(env("PLAYGROUND_TEST_NEXT"), aside)
        os.rename(aside, root / run / "step-500")
    before = len(emulator.calls_to("chat.postMessage"))
    # Three replicas see it at once: the prompt runs on it once, in the thread.
    results = await asyncio.gather(
        *(
            r.bot.deps.playground.watch_pass(  # type: ignore[union-attr]
                __import__("handlers.playground", fromlist=["x"]).watch_poster(r.bot.client)
            )
            for r in replicas
        )
    )
    assert sorted(results) == [0, 0, 1]
    replies = emulator.calls_to("chat.postMessage")[before:]
    assert len(replies) == 1 and replies[0].args["thread_ts"] == ts
    assert "step 500" in json.dumps(replies_in(emulator, ts)[-1])
    assert (
        await replicas[1].bot.deps.playground.watch_pass(  # type: ignore[union-attr]
            lambda w, o: asyncio.sleep(0)
        )
        == 0
    )  # already run

    # Re-run on newer checkpoints: step 500, in the thread.
    await slack.interactive(emulator.block_actions_payload(CHANNEL, ts, RERUN_ACTION))
    await emulator.wait_for_call("chat.postMessage", count=before + 2, timeout=20)
    rerun = replies_in(emulator, ts)[-1]
    assert "Playground" in rerun["text"]
    final = await finished(emulator, str(rerun["ts"]))
    assert "step 500" in json.dumps(final["blocks"])

    # Unwatch by its id.
    [watch] = await slack.bot.deps.playground.store.watches()  # type: ignore[union-attr]
    await slack.command("/playground", f"unwatch {watch.id}")
    store = slack.bot.deps.playground.store  # type: ignore[union-attr]

    async def unwatched() -> bool:
        return await store.watches() == []

    await eventually(unwatched, "the watch is removed")


async def test_limits_refuse_a_third_request_and_cancel_stops_streams(
    emulator: SlackEmulator, redis_url: str, stack: contextlib.AsyncExitStack, tmp_path: Path
) -> None:
    slack = await start(
        emulator,
        redis_url,
        stack,
        tmp_path,
        per_user_concurrency=1,
        max_tokens=100,
        temperature=1.0,
    )
    pg = slack.bot.deps.playground
    assert pg is not None
    # One request of U0ADMIN is already in flight (held by another replica, say).
    assert await pg.store.acquire("U0ADMIN", pg.limits) is None
    await slack.command("/playground", f"{env('PLAYGROUND_TEST_RUN')} hello")
    await emulator.wait_for_responses(1, timeout=20)
    refusal = emulator.responses[-1][1]["text"]
    assert "already have 1 playground requests running" in refusal and "Cancel" in refusal
    assert not emulator.calls_to("chat.postMessage")
    await pg.store.release("U0ADMIN")
    # Cancel from a button: the person who asked may; the streams stop and it says so.
    await pg.store.cancel("pre")  # an unrelated cancel changes nothing
    await slack.command("/playground", f"{env('PLAYGROUND_TEST_RUN')} Flat is better")
    await emulator.wait_for_call("chat.postMessage", timeout=20)
    ts = top_ts(emulator)
    sid = json.dumps(emulator.message(CHANNEL, ts)["blocks"])
    assert CANCEL_ACTION in sid
    await slack.interactive(
        emulator.block_actions_payload(CHANNEL, ts, CANCEL_ACTION, user="U0USER")
    )
    await emulator.wait_for_responses(2, timeout=10)
    assert "Only the person who asked" in emulator.responses[-1][1]["text"]
    await slack.interactive(emulator.block_actions_payload(CHANNEL, ts, CANCEL_ACTION))
    msg = await finished(emulator, ts)
    text = json.dumps(msg["blocks"])
    # Either the streams were cut or they had already finished: never stuck streaming.
    assert "streaming" not in text
    assert await pg.store.acquire("U0ADMIN", pg.limits) is None  # the slot was given back
