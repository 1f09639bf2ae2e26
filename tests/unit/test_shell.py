"""The terminal shell, driven as a person types at it: the real bot on loopback behind the
real Slack emulator, on the default simulated fleet (no Redis: see tests/integration/
test_shell_redis.py for alerts, reactions and the digest)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.config import Settings
from bot.shell.repl import SHELL_HELP, render_output, run_one, run_repl
from bot.shell.session import SHELL_CHANNEL, Output, ShellSession

NUMBERED = re.compile(r"\[(\d+): ([^\]]*?)(?: ▾| ↗)?\]")


def shell_settings(**extra: Any) -> Settings:
    """The settings of `meowbot shell` with nothing configured, whatever the environment."""
    none = {
        "REDIS_URL": None,
        "PROMETHEUS_URL": None,
        "SLURM_REST_URL": None,
        "ALERTMANAGER_URL": None,
        "PLAYGROUND_ENDPOINTS": None,
        "PLAYGROUND_CHECKPOINT_DIRS": None,
        "MEOWBOT_FLEET": None,
        "MEOWBOT_CONFIG": None,
        "MEOWBOT_ADMINS": "",
        "MEOWBOT_ALERT_CHANNEL": None,
        "MEOWBOT_SEED": 0,
        "SLACK_BOT_TOKEN": None,
        "SLACK_APP_TOKEN": None,
        "SLACK_SIGNING_SECRET": None,
    }
    return Settings(**{**none, **extra})


@pytest.fixture
async def shell(tmp_path: Path) -> AsyncIterator[ShellSession]:
    session = ShellSession(shell_settings(), files_dir=tmp_path / "files", local_redis=False)
    await session.start()
    try:
        yield session
    finally:
        await session.close()


def screen(outputs: list[Output]) -> str:
    return "\n".join(t for t in (render_output(o, color=False) for o in outputs) if t)


def buttons(text: str) -> dict[int, str]:
    return {int(n): label for n, label in NUMBERED.findall(text)}


async def test_job_slow_alone_lists_the_shell_users_jobs(shell: ShellSession) -> None:
    # The shell's user is a simulated user with running jobs: nothing to configure first.
    assert shell.cluster_user == "alice"
    text = screen(await run_one(shell, "/job-slow"))
    assert "Running jobs of `alice`" in text
    assert "`4100001`" in text
    assert set(buttons(text).values()) == {"Why slow?"}


async def test_readme_job_slow_example_exists_on_the_default_fleet(shell: ShellSession) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    jobs = set(re.findall(r"/job-slow (\d{7})", readme))
    assert jobs, "the README shows /job-slow with a job id"
    for job in sorted(jobs):
        text = screen(await run_one(shell, f"/job-slow {job}"))
        assert "knows no job" not in text, job
        assert f"Job {job}" in text


async def test_buttons_are_numbered_across_the_screen(shell: ShellSession) -> None:
    first = screen(await run_one(shell, "/node-health gpu-0256"))
    second = screen(await run_one(shell, "/job-slow"))
    one, two = buttons(first), buttons(second)
    assert one and two
    # One numbering for the screen: the second answer's buttons follow the first's.
    assert min(two) == max(one) + 1
    # A button of the earlier message is still pressable, and presses that message's.
    drain = next(n for n, label in one.items() if label.startswith("Drain"))
    # /node-health's Drain asks first, as an alert's does: pressed again, it drains.
    asked = screen(await run_one(shell, f"press {drain}"))
    assert "Drain gpu-0256?" in asked and f"press {drain} again" in asked
    pressed = screen(await run_one(shell, f"press {drain}"))
    assert "Draining `gpu-0256`" in pressed
    assert "HTTP" not in pressed


async def test_a_drain_redraws_the_private_answer_as_the_node_now_stands(
    shell: ShellSession,
) -> None:
    await run_one(shell, "/node-health gpu-0256")
    await run_one(shell, "press 1")  # asks first
    pressed = screen(await run_one(shell, "press 1"))
    # The answer the button sat on is replaced: done above, the node as it is now below.
    assert "(message updated)" in pressed
    assert pressed.index("Draining `gpu-0256`") < pressed.index("gpu-0256 · advice: DRAIN")
    assert "idle+DRAIN — meowbot: xid95 gpu5 by @alice" in pressed
    assert set(buttons(pressed).values()) == {"Resume node"}
    assert "Proposed drain reason" not in pressed
    # and it resumes from there, the answer redrawn once more with Drain back.
    resume = next(iter(buttons(pressed)))
    await run_one(shell, f"press {resume}")  # still failing its checks: asks first
    resumed = screen(await run_one(shell, f"press {resume}"))
    assert "Resumed `gpu-0256`" in resumed
    assert set(buttons(resumed).values()) == {"Drain node"}


async def test_press_unknown_number_says_which_exist(shell: ShellSession) -> None:
    with pytest.raises(ValueError, match="no button on the screen yet"):
        await run_one(shell, "press 1")
    await run_one(shell, "/job-slow")
    with pytest.raises(ValueError, match=r"no button 9 on the screen \(buttons 1 to 2\)"):
        await run_one(shell, "press 9")


async def test_press_follows_edits(shell: ShellSession) -> None:
    """The bot edits a message (chat.update): the screen shows it once more, updated, and a
    button number presses what the message shows now."""
    assert shell.bot is not None
    client = shell.bot.client

    def message(label: str, value: str) -> list[dict[str, Any]]:
        return [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"state {label}"}},
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "meowbot_node_drain",
                        "text": {"type": "plain_text", "text": label},
                        "value": value,
                    }
                ],
            },
        ]

    posted = await client.chat_postMessage(
        channel=SHELL_CHANNEL, text="before", blocks=message("Before", "gpu-0001")
    )
    first = await shell.settle()
    assert buttons(screen(first)) == {1: "Before"}
    await client.chat_update(
        channel=SHELL_CHANNEL, ts=posted["ts"], text="after", blocks=message("After", "gpu-0002")
    )
    second = await shell.settle()
    assert second[0].note == "message 1 updated"
    assert buttons(screen(second)) == {2: "After"}
    # The old rendition's button is gone from the message: pressing it says so.
    with pytest.raises(ValueError, match="no longer on its message"):
        shell._button(1)
    shown, target = shell._button(2)
    assert shown.ts == posted["ts"]
    assert target["value"] == "gpu-0002"


async def test_a_streamed_answer_is_shown_once_when_done(shell: ShellSession) -> None:
    """A message posted and then edited many times (the playground streams so) is one message
    on the screen, in its final state, not one reprint an edit."""
    assert shell.bot is not None
    client = shell.bot.client
    posted = await client.chat_postMessage(channel=SHELL_CHANNEL, text="The")
    words = ["The", "loss", "went", "down"]
    for n in range(2, len(words) + 1):
        await client.chat_update(channel=SHELL_CHANNEL, ts=posted["ts"], text=" ".join(words[:n]))
    outputs = await shell.settle()
    updates = [o for o in shell.last_raw if o.method == "chat.update"]
    assert len(updates) == len(words) - 1
    assert [o.method for o in outputs] == ["message"]
    assert screen(outputs).endswith("The loss went down")


async def test_home_opens_in_one_command_line(shell: ShellSession) -> None:
    text = screen(await run_one(shell, "home"))
    assert text.startswith("Home")
    assert "Your jobs" in text and "`4100001`" in text


async def test_palette_modal_is_filled_and_submitted(shell: ShellSession) -> None:
    home = screen(await run_one(shell, "home"))
    run = next(n for n, label in buttons(home).items() if label == "Run a command")
    form = await run_one(shell, f"press {run}")
    assert [o.method for o in form] == ["view"]
    shown = screen(form)
    assert "[Cancel]  [Run]" in shown
    assert "fill N TEXT" in shown and "1: Command" in shown
    assert "Command: /job-slow" in screen(await run_one(shell, "fill 1 /job-slow"))
    await run_one(shell, "fill 2 4100001")
    answer = screen(await run_one(shell, "submit"))
    # The answer comes to your DM with the bot, from the real command.
    assert answer.startswith("(in your messages with meowbot)")
    assert "Job 4100001" in answer
    with pytest.raises(ValueError, match="no form is open"):
        await run_one(shell, "submit")


async def test_fill_refuses_an_unknown_choice(shell: ShellSession) -> None:
    home = screen(await run_one(shell, "home"))
    run = next(n for n, label in buttons(home).items() if label == "Run a command")
    await run_one(shell, f"press {run}")
    with pytest.raises(ValueError, match="no choice '/nope'; choose one of 1: /node-health"):
        await shell.fill("1", "/nope")
    await run_one(shell, "cancel")
    with pytest.raises(ValueError, match="no form is open"):
        await shell.fill("1", "/job-slow")


async def test_charts_are_saved_as_png_files(shell: ShellSession) -> None:
    text = screen(await run_one(shell, "/job-slow 4100001"))
    saved = re.findall(r"saved to (\S+\.png)", text)
    assert saved, text
    for path in saved:
        data = Path(path).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
        assert Path(path).parent == shell.files_dir
    assert "[file uploaded" not in text


async def test_without_redis_alerts_and_digest_say_what_they_need(shell: ShellSession) -> None:
    for verb in ("sweep", "digest"):
        text = screen(await run_one(shell, verb))
        assert "keep their state in Redis: set REDIS_URL" in text


async def test_fault_and_heal_change_the_simulated_fleet(shell: ShellSession) -> None:
    before = screen(await run_one(shell, "/node-health gpu-0042"))
    assert "Xid 79" not in before
    await run_one(shell, "fault xid gpu-0042 3 xid=79")
    broken = screen(await run_one(shell, "/node-health gpu-0042"))
    assert "Xid 79" in broken
    await run_one(shell, "heal gpu-0042")
    assert "Xid 79" not in screen(await run_one(shell, "/node-health gpu-0042"))
    with pytest.raises(ValueError, match="details are key=value"):
        await run_one(shell, "fault xid gpu-0042 3 79")


@pytest.fixture
async def checkpoint_server() -> AsyncIterator[str]:
    """An OpenAI-shaped checkpoint server on loopback that streams its answer word by word,
    slowly enough that the bot edits its message several times."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": "tiny/step-100"}, {"id": "tiny/step-200"}, {"id": "zen/step-7"}],
            }
        )

    async def completions(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for word in ("Once", " upon", " a", " time", "."):
            await asyncio.sleep(0.6)  # 3 s in all: the bot edits at most once a second
            chunk = json.dumps({"choices": [{"text": word}]})
            await resp.write(f"data: {chunk}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


async def test_playground_form_is_filled_sent_and_streamed_once(
    checkpoint_server: str, tmp_path: Path
) -> None:
    settings = shell_settings(PLAYGROUND_ENDPOINTS=checkpoint_server)
    session = ShellSession(settings, files_dir=tmp_path, local_redis=False)
    await session.start()
    try:
        form = screen(await run_one(session, "/playground"))
        assert "[Cancel]  [Send]" in form
        assert "(form updated)" not in form  # opened, then filled with the catalog: one form
        assert "Prompt: Tell me a story" in screen(await session.fill("prompt", "Tell me a story"))
        await session.fill("2", "step 100")
        told: list[str] = []
        session.progress = told.append
        outputs = await run_one(session, "submit")
        # Meanwhile the terminal said the answer is coming, with the edits so far.
        assert told and all(t.startswith("the bot is answering… ") for t in told)
        assert any(re.search(r"\d+ edits? so far", t) for t in told)
        edits = [o for o in session.last_raw if o.method == "chat.update"]
        assert len(edits) >= 2, "the bot streamed the answer in several edits"
        messages = [o for o in outputs if o.method == "message"]
        assert len(messages) == 1, "shown once, when done"
        text = screen(outputs)
        assert "Once upon a time." in text and "step 100" in text and "step 200" not in text
        assert "asked by @alice" in text  # a mention reads as the person's name, not an id
        # The answer's own buttons, pressed after the stream: Watch answers, not a 404.
        watch = next(n for n, label in buttons(text).items() if label == "Watch")
        assert "Watching `tiny`" in screen(await run_one(session, f"press {watch}"))
    finally:
        await session.close()


async def test_a_form_refused_by_the_bot_stays_open_with_its_errors(shell: ShellSession) -> None:
    home = screen(await run_one(shell, "home"))
    run = next(n for n, label in buttons(home).items() if label == "Run a command")
    await run_one(shell, f"press {run}")
    await shell.fill("1", "/node-health")
    await shell.fill("arguments", "gpu-0042\n/node-health gpu-0043")
    refused = screen(await run_one(shell, "submit"))
    assert "Arguments: One line, as you would type after /node-health." in refused
    assert "the form is still open" in refused
    await shell.fill("2", "gpu-0042")
    assert "gpu-0042" in screen(await run_one(shell, "submit"))


async def test_one_line_runs_a_shell_word_too(capsys: pytest.CaptureFixture[str]) -> None:
    """`meowbot shell -c home` opens App Home and exits; a line that is neither a slash command
    nor a shell word is refused with what it takes."""
    assert await run_repl(shell_settings(), command="home", as_json=False, user=None) == 0
    assert capsys.readouterr().out.startswith("Home\n")
    assert await run_repl(shell_settings(), command="hello", as_json=False, user=None) == 2
    assert "-c takes a slash command or a shell word" in capsys.readouterr().err


async def test_fault_and_heal_say_what_they_take(shell: ShellSession) -> None:
    with pytest.raises(ValueError, match=r"no fault kind 'hot'; the kinds: cpu_contention, "):
        await run_one(shell, "fault hot gpu-0042")
    with pytest.raises(ValueError, match="has no node gpu-9999 \\(it has gpu-0001 to gpu-0512\\)"):
        await run_one(shell, "fault xid gpu-9999")
    with pytest.raises(ValueError, match="has no node gpu-9999"):
        await run_one(shell, "heal gpu-9999")
    assert "gpu-0042 had no injected fault" in screen(await run_one(shell, "heal gpu-0042"))


async def test_choosing_the_run_changes_the_form_as_in_slack(
    checkpoint_server: str, tmp_path: Path
) -> None:
    """The Run field dispatches its action: choosing another run tells the bot at once and the
    form offers that run's checkpoints."""
    settings = shell_settings(PLAYGROUND_ENDPOINTS=checkpoint_server)
    session = ShellSession(settings, files_dir=tmp_path, local_redis=False)
    await session.start()
    try:
        form = screen(await run_one(session, "/playground"))
        assert "step 200, step 100" in form
        changed = await run_one(session, "fill run zen")
        assert "block_actions" not in screen(changed)
        updated = [o for o in changed if o.method == "view"]
        assert len(updated) == 1 and updated[0].note == "form updated"
        text = screen(updated)
        assert "[zen ▾]" in text and "step 7" in text and "step 100" not in text
    finally:
        await session.close()


async def test_reply_asks_in_the_thread_of_the_last_answer_or_a_chosen_one(
    shell: ShellSession,
) -> None:
    """`reply` is how the shell tries a follow-up: a mention in the thread, read against it."""
    assert "reply [M] TEXT" in SHELL_HELP
    asked = screen(await run_one(shell, "@meowbot is gpu-0042 ok?"))
    assert "gpu-0042" in asked and "in thread" in asked
    assert shell.bot is not None
    inventory = shell.bot.deps.triage.inventory
    place = inventory.place("gpu-0042")
    assert place is not None
    near = [
        n
        for n in inventory.names()
        if n != "gpu-0042" and (p := inventory.place(n)) and p.leaf_switch == place.leaf_switch
    ]
    said = screen(await run_one(shell, "reply what about its neighbours?"))
    assert "in thread" in said and f"{len(near)} nodes\n" in said, said
    drain = screen(await run_one(shell, "reply drain it"))
    assert "Draining `gpu-0042`" in drain and ": Drain node]" in drain, drain
    # The same words in a new mention have no thread before them.
    assert "Drain which node?" in screen(await run_one(shell, "@meowbot drain it"))
    # `reply M` joins message M's thread: gpu-0042's first answer.
    first = int(re.findall(r"\(message (\d+)", asked)[0])
    again = screen(await run_one(shell, f"reply {first} drain it"))
    assert "Draining `gpu-0042`" in again, again
    with pytest.raises(ValueError, match="reply takes the text"):
        await run_one(shell, "reply")
    with pytest.raises(ValueError, match="no message 999 on the screen"):
        await run_one(shell, "reply 999 and yesterday?")
