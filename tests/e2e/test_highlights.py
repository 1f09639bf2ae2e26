"""The :meow_party: highlights end to end: signed events into the real aiohttp server and Bolt,
real Redis, Slack answered by the emulator; three replicas for the exactly-once digest, and the
real redis-server stopped and started again."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import create_bot
from bot.backends.slack_directory import DIGEST_EVENT_TYPE
from bot.highlights.backfill import backfill
from bot.highlights.models import Highlight
from bot.highlights.service import Highlights
from bot.server import SLACK_EVENTS_PATH, Bot
from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.conftest import RedisServer
from tests.e2e.conftest import Slack, bot_settings
from tests.waiting import eventually

TEAM = "T0TEST"
DIGEST = "C0DIGEST"
TEAM_ROOM = "G0TEAM"  # a private channel that opted in to its own digest
# In the past, so that the emulator's real-time message ts come after the fake clock's weeks.
RECORDED_AT = datetime(2025, 12, 3, 12, 0, tzinfo=UTC)  # a Wednesday
FIRE = datetime(2025, 12, 5, 16, 0, tzinfo=UTC)  # the default schedule: fri 16:00 UTC
BASE_TS = int(RECORDED_AT.timestamp())


def ts(n: int) -> str:
    return f"{BASE_TS + n}.000100"


@dataclass
class Replica:
    bot: Bot
    slack: Slack

    @property
    def hl(self) -> Highlights:
        assert self.bot.deps.highlights.hl is not None
        return self.bot.deps.highlights.hl

    def at(self, when: datetime) -> None:
        self.hl.clock = lambda: when


Start = Callable[..., Awaitable[Replica]]


def seed(emu: SlackEmulator) -> None:
    emu.add_user("U0CARL", "carl", real_name="Carl")
    emu.add_user("U0DANA", "dana", real_name="Dana")
    emu.add_user("U0HELPER", "helperbot", is_bot=True)
    emu.add_channel(DIGEST, "highlights")
    emu.add_channel("C0RANDOM", "random")
    emu.add_channel("C0EXCL", "noise")
    emu.add_channel("C0OLD", "old-project")
    emu.add_channel("C0SECRET", "secret-plans", is_private=True)
    emu.add_channel(TEAM_ROOM, "team-room", is_private=True)
    emu.add_channel("G0MPIM", "mpdm-ana--bob--carl", is_mpim=True)
    emu.add_channel("D0ANA", "D0ANA", is_im=True, user="U0ADMIN")


@pytest.fixture
async def start(
    emulator: SlackEmulator, redis_url: str, redis_client: Any, tmp_path: Path
) -> AsyncIterator[Start]:
    seed(emulator)
    config = tmp_path / "meowbot.yaml"
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())

        async def start_(url: str = redis_url, yaml: str = "", **extra: Any) -> Replica:
            config.write_text(
                yaml
                or f"highlights:\n  excluded_channels: [C0EXCL]\n  private_opt_in: [{TEAM_ROOM}]\n"
            )
            base = {"MEOWBOT_DIGEST_CHANNEL": DIGEST, "MEOWBOT_CONFIG": str(config)}
            bot = await create_bot(bot_settings(emulator, url, **{**base, **extra}))
            stack.push_async_callback(bot.close)
            port = await bot.start_http("127.0.0.1", 0)
            url_ = f"http://127.0.0.1:{port}{SLACK_EVENTS_PATH}"
            replica = Replica(bot, Slack(emulator, bot, url_, http))
            replica.at(RECORDED_AT)
            return replica

        yield start_


async def enriched(r: Replica, channel: str, ts_: str, timeout: float = 5.0) -> Highlight:
    deadline = time.monotonic() + timeout
    while True:
        h = await r.hl.store.get(TEAM, channel, ts_)
        if h is not None and h.permalink:
            return h
        assert time.monotonic() < deadline, f"{channel}/{ts_} was never read: {h}"
        await asyncio.sleep(0.02)


async def tag(r: Replica, channel: str, ts_: str, *users: str, emoji: str = "meow_party") -> None:
    for user in users:
        status, body, _ = await r.slack.event(r.slack.emulator.react(channel, ts_, user, emoji))
        assert status == 200, body


def posts(emu: SlackEmulator, channel: str) -> list[dict[str, Any]]:
    calls = emu.calls_to("chat.postMessage")
    return [c.args for c in calls if c.ok and c.args["channel"] == channel]


# tracking ---------------------------------------------------------------------------------------


async def test_reactions_count_people_not_events(start: Start, emulator: SlackEmulator) -> None:
    r = await start()
    text = "<!here> we hit 50% MFU, thanks <@U0USER>! <https://grafana.example.com/d/1>"
    emulator.add_message("C0GENERAL", ts=ts(1), text=text, user="U0ADMIN")
    first = emulator.react("C0GENERAL", ts(1), "U0USER", "meow_party")
    assert (await r.slack.event(first))[0] == 200
    assert (await r.slack.event(first, retry=1))[0] == 200  # Slack's retry: dropped
    await tag(r, "C0GENERAL", ts(1), "U0CARL", emoji="meow_party::skin-tone-3")
    await tag(r, "C0GENERAL", ts(1), "U0ADMIN")  # the author's own: not counted
    await tag(r, "C0GENERAL", ts(1), "U0HELPER")  # a bot: not counted
    await tag(r, "C0GENERAL", ts(1), "U0DANA", emoji="thumbsup")  # another emoji
    h = await enriched(r, "C0GENERAL", ts(1))
    assert h.reactors == {"U0USER", "U0CARL"} and h.author == "U0ADMIN"
    assert h.excerpt == "@here we hit 50% MFU, thanks @bob! grafana.example.com/d/1"
    assert h.first_tagged_at == RECORDED_AT and "/archives/C0GENERAL/" in h.permalink
    assert len(emulator.calls_to("chat.getPermalink")) == 1  # read once per message
    assert len(emulator.calls_to("reactions.get")) == 1
    metrics = r.bot.deps.telemetry.exposition().decode()
    assert "meowbot_duplicate_events_total 1.0" in metrics

    # A bot's message does not count (unless configured), nor does a thread reply lose its thread.
    emulator.add_message(
        "C0GENERAL", ts=ts(2), text="deploy done", user="U0HELPER", bot_id="B0HELPER"
    )
    await tag(r, "C0GENERAL", ts(2), "U0USER")
    emulator.add_message("C0GENERAL", ts=ts(3), text="reply", user="U0USER", thread_ts=ts(1))
    await tag(r, "C0GENERAL", ts(3), "U0CARL")
    reply = await enriched(r, "C0GENERAL", ts(3))
    assert reply.thread_ts == ts(1)
    assert await r.hl.store.get(TEAM, "C0GENERAL", ts(2)) is None

    # Edited: the excerpt follows. Removed by everyone: gone. Deleted: gone and stays gone.
    await r.slack.event(emulator.edit_message("C0GENERAL", ts(1), "we hit 55% MFU"))
    assert (await enriched(r, "C0GENERAL", ts(1))).excerpt == "we hit 55% MFU"
    for user in ("U0USER", "U0CARL"):
        await r.slack.event(emulator.react("C0GENERAL", ts(3), user, "meow_party", remove=True))
    assert await r.hl.store.get(TEAM, "C0GENERAL", ts(3)) is None
    await r.slack.event(emulator.delete_message("C0GENERAL", ts(1)))
    assert await r.hl.store.get(TEAM, "C0GENERAL", ts(1)) is None
    late = {**first, "event_id": "Ev0LATE"}  # a late reaction on the deleted message
    assert (await r.slack.event(late))[0] == 200
    assert await r.hl.store.get(TEAM, "C0GENERAL", ts(1)) is None


# privacy and the digest --------------------------------------------------------------------------


async def test_private_messages_never_show_elsewhere(start: Start, emulator: SlackEmulator) -> None:
    r = await start()
    texts = {
        "C0GENERAL": "public win",
        "C0SECRET": "secret win",
        TEAM_ROOM: "team-room win",
        "G0MPIM": "group dm win",
        "D0ANA": "dm win",
        "C0EXCL": "excluded win",
        "C0OLD": "archived win",
    }
    for i, (channel, text) in enumerate(texts.items()):
        emulator.add_message(channel, ts=ts(10 + i), text=text, user="U0ADMIN")
        await tag(r, channel, ts(10 + i), "U0USER", "U0CARL")
    emulator.add_message("C0RANDOM", ts=ts(30), text="dana's win", user="U0DANA")
    await tag(r, "C0RANDOM", ts(30), "U0USER")
    # Nothing is recorded from DMs, group DMs or excluded channels.
    for channel in ("G0MPIM", "D0ANA", "C0EXCL"):
        assert await r.hl.store.get(TEAM, channel, ts(10 + list(texts).index(channel))) is None
    await enriched(r, "C0OLD", ts(16))
    await enriched(r, TEAM_ROOM, ts(12))
    emulator.archive_channel("C0OLD")
    r.hl.directory.clear_cache()  # type: ignore[attr-defined]  # as its lifetime running out
    assert (await r.slack.command("/highlights", "opt-out", user="U0DANA"))[0] == 200
    await emulator.wait_for_responses(1)

    # /highlights asked in a public channel: public only; in the opted-in room: its own too.
    # Each answered before the next is asked: two commands' answers may interleave.
    await r.slack.command("/highlights", "", channel="C0GENERAL")
    await emulator.wait_for_responses(2)
    await r.slack.command("/highlights", "", channel=TEAM_ROOM)
    await emulator.wait_for_responses(3)
    in_general = json.dumps(emulator.responses[1][1])
    in_room = json.dumps(emulator.responses[2][1])
    assert "public win" in in_general and emulator.responses[1][1]["response_type"] == "ephemeral"
    for hidden in ("secret win", "team-room win", "dm win", "excluded", "archived", "dana"):
        assert hidden not in in_general, hidden
    assert "team-room win" in in_room and "public win" in in_room and "secret" not in in_room

    # The digest: the digest channel gets public highlights only; the room gets its own digest.
    r.at(FIRE + timedelta(seconds=5))
    assert r.bot.deps.digest is not None
    assert len(await r.bot.deps.digest.run_once()) == 2
    [public] = posts(emulator, DIGEST)
    [room] = posts(emulator, TEAM_ROOM)
    public_text, room_text = json.dumps(public["blocks"]), json.dumps(room["blocks"])
    assert "public win" in public_text and validate_blocks(public["blocks"]) == []
    for hidden in ("secret", "team-room", "dm win", "group dm", "excluded", "archived", "dana"):
        assert hidden not in public_text, hidden
    assert "team-room win" in room_text and "public win" not in room_text
    assert public["metadata"]["event_type"] == DIGEST_EVENT_TYPE
    assert public["metadata"]["event_payload"]["week"] == "2025-12-05"
    assert public["unfurl_links"] is False


async def test_three_replicas_post_one_digest_a_week(start: Start, emulator: SlackEmulator) -> None:
    replicas = [await start(yaml="highlights: {}\n") for _ in range(3)]
    emulator.add_message("C0GENERAL", ts=ts(40), text="<@U0USER> shipped it", user="U0ADMIN")
    await tag(replicas[0], "C0GENERAL", ts(40), "U0USER")
    await enriched(replicas[0], "C0GENERAL", ts(40))
    for r in replicas:  # their schedulers fire together
        r.at(FIRE + timedelta(seconds=1))
        assert r.bot.deps.digest is not None
        r.bot.deps.digest.tick_s = 0.05
    for r in replicas:
        r.bot.start_background(sweep=False)
    await eventually(lambda: bool(posts(emulator, DIGEST)), "a replica posts the digest")
    await asyncio.sleep(0.5)  # the others' ticks have come: they found it posted
    [digest] = posts(emulator, DIGEST)
    assert "@\u2060bob shipped it" in digest["blocks"][-1]["text"]["text"]  # @ defused
    assert "<@U0USER>" not in json.dumps(digest["blocks"])  # nobody pinged
    # A restart after the post does not post again.
    await replicas[0].bot.close()
    again = await start(yaml="highlights: {}\n")
    again.at(FIRE + timedelta(minutes=1))
    assert again.bot.deps.digest is not None
    assert await again.bot.deps.digest.run_once() == []

    # Next week a replica dies holding the lock, before posting: a restart posts once.
    store, runner = again.hl.store, again.bot.deps.digest
    week2 = again.hl.cfg.schedule.week_ending(FIRE + timedelta(days=7))
    crashed = await store.acquire(TEAM, f"digest:{DIGEST}", 1000)
    await store.set_digest_state(TEAM, DIGEST, week2.id, "posting", crashed)
    again.at(week2.end + timedelta(seconds=1))
    assert await store.digest_state(TEAM, DIGEST, week2.id) == "posting"
    assert await runner.run_once() == []  # the dead replica's lock still holds
    await asyncio.sleep(1.05)
    assert len(await runner.run_once()) == 1
    assert len(posts(emulator, DIGEST)) == 2
    # The week after, one dies after posting but before saying so: not posted twice.
    week3 = again.hl.cfg.schedule.week_ending(FIRE + timedelta(days=14))
    crashed = await store.acquire(TEAM, f"digest:{DIGEST}", 1000)
    await store.set_digest_state(TEAM, DIGEST, week3.id, "posting", crashed)
    await runner.post_digest(TEAM, DIGEST, week3, tag=True)  # its post reached Slack
    again.at(week3.end + timedelta(seconds=1))
    await asyncio.sleep(1.05)
    assert await runner.run_once() == []
    assert len(posts(emulator, DIGEST)) == 3
    assert (await store.digest_state(TEAM, DIGEST, week3.id) or "").startswith("posted:")
    # An empty week says so briefly.
    assert "quiet week" in json.dumps(posts(emulator, DIGEST)[-1]["blocks"])


async def test_top_n_then_the_thread(start: Start, emulator: SlackEmulator) -> None:
    r = await start(yaml="highlights:\n  top_n: 3\n  threshold: 2\n")
    for i in range(6):
        emulator.add_message("C0RANDOM", ts=ts(50 + i), text=f"win number {i}", user="U0ADMIN")
        await tag(r, "C0RANDOM", ts(50 + i), *["U0USER", "U0CARL", "U0DANA"][: 1 + i % 3])
    r.at(FIRE + timedelta(seconds=1))
    assert r.bot.deps.digest is not None
    [main_ts] = await r.bot.deps.digest.run_once()
    main, *thread = posts(emulator, DIGEST)
    text = json.dumps(main["blocks"])
    assert "4 highlights" in text and "and 1 more" in text  # two had one reactor: below 2
    assert text.index("win number 2") < text.index("win number 1")  # 3 people before 2
    assert [t["thread_ts"] for t in thread] == [main_ts]
    assert "win number" in json.dumps(thread[0]["blocks"])


# commands ----------------------------------------------------------------------------------------


async def test_highlights_command_stats_last_week_and_bad_input(
    start: Start, emulator: SlackEmulator
) -> None:
    r = await start()
    # Before any highlight: the sentence to the asker alone, and no blank chart anywhere.
    await r.slack.command("/highlights", "stats")
    await emulator.wait_for_responses(1)
    assert "No highlights recorded yet" in json.dumps(emulator.responses[0][1])
    assert posts(emulator, "C0GENERAL") == [] and not emulator.uploads
    emulator.responses.clear()
    emulator.responses_at.clear()
    emulator.add_message("C0GENERAL", ts=ts(60), text="great talk", user="U0USER")
    await tag(r, "C0GENERAL", ts(60), "U0ADMIN", "U0CARL")
    await enriched(r, "C0GENERAL", ts(60))
    r.at(FIRE + timedelta(days=1))
    await r.slack.command("/highlights", "last-week")
    await emulator.wait_for_responses(1)
    await r.slack.command("/highlights", "frobnicate")
    await emulator.wait_for_responses(3)
    assert "great talk" in json.dumps(emulator.responses[0][1])
    assert "don't know" in emulator.responses[1][1]["text"]
    assert "last-week" in json.dumps(emulator.responses[2][1])  # the usage follows
    await r.slack.command("/highlights", "stats")
    upload = await emulator.wait_for_call("files.completeUploadExternal", timeout=15)
    assert upload.ok
    [stats] = posts(emulator, "C0GENERAL")
    assert "1 highlight since 2025-12" in json.dumps(stats["blocks"]).replace("*", "")
    assert validate_blocks(stats["blocks"]) == []
    assert any(f.startswith(b"\x89PNG") for f in emulator.uploads.values())


# Redis down -------------------------------------------------------------------------------------


async def test_redis_down_events_are_refused_then_stored_once(
    start: Start, emulator: SlackEmulator, own_redis: RedisServer
) -> None:
    r = await start(own_redis.url)
    emulator.add_message("C0GENERAL", ts=ts(70), text="held up", user="U0ADMIN")
    before = emulator.react("C0GENERAL", ts(70), "U0USER", "meow_party")
    assert (await r.slack.event(before))[0] == 200
    await enriched(r, "C0GENERAL", ts(70))
    own_redis.stop()
    during = emulator.react("C0GENERAL", ts(70), "U0CARL", "meow_party")
    status, _, _ = await r.slack.event(during)
    assert status == 500  # Slack will deliver it again
    assert (await r.slack.event(before, retry=1))[0] == 500
    own_redis.start()
    deadline = time.monotonic() + 10
    while (await r.slack.event(during, retry=1))[0] != 200:  # Slack's retries
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert (await r.slack.event(during, retry=2))[0] == 200
    assert (await r.slack.event(before, retry=2))[0] == 200
    h = await r.hl.store.get(TEAM, "C0GENERAL", ts(70))
    assert h is not None and h.reactors == {"U0USER", "U0CARL"}  # nothing lost, nothing twice


# backfill ---------------------------------------------------------------------------------------


async def test_backfill_pages_waits_out_429_and_resumes(
    start: Start, emulator: SlackEmulator
) -> None:
    r = await start()
    expected: set[str] = set()
    for i in range(40):
        reactions = []
        if i % 4 == 0:
            reactions = [{"name": "meow_party", "users": ["U0USER", "U0CARL"]}]
            expected.add(ts(100 + i))
        elif i % 4 == 1:
            reactions = [{"name": "thumbsup", "users": ["U0USER"]}]
        emulator.add_message(
            "C0GENERAL", ts=ts(100 + i), text=f"post {i}", user="U0ADMIN", reactions=reactions
        )
    emulator.add_message(
        "C0GENERAL",
        ts=ts(141),
        text="reply",
        user="U0DANA",
        thread_ts=ts(101),
        reactions=[{"name": "meow_party::skin-tone-2", "users": ["U0ADMIN"]}],
    )
    expected.add(ts(141))
    emulator.add_message(
        "C0GENERAL",
        ts=ts(142),
        text="bot post",
        user="U0HELPER",
        bot_id="BX",
        reactions=[{"name": "meow_party", "users": ["U0USER"]}],
    )
    emulator.add_message(
        "C0SECRET",
        ts=ts(143),
        text="private",
        user="U0ADMIN",
        reactions=[{"name": "meow_party", "users": ["U0USER"]}],
    )
    emulator.add_message(
        "C0GENERAL",
        ts=ts(-400 * 86400),
        text="too old",
        user="U0ADMIN",
        reactions=[{"name": "meow_party", "users": ["U0USER"]}],
    )
    directory = r.hl.directory
    directory.page_size = 8  # type: ignore[attr-defined]
    emulator.fail_next("conversations.history", status=429, retry_after=1)
    since = datetime.fromtimestamp(BASE_TS - 30 * 86400, UTC)
    lines: list[str] = []

    def interrupt(progress: Any) -> None:
        lines.append(progress.line(datetime.now(UTC)))
        if progress.scanned >= 16:
            raise KeyboardInterrupt  # someone pressed ^C after two pages

    with pytest.raises(KeyboardInterrupt):
        await backfill(
            r.hl,
            directory,
            r.hl.store,
            team=TEAM,
            since=since,  # type: ignore[arg-type]
            pace_s=0,
            report=interrupt,
        )
    assert "messages scanned" in lines[-1] and "ETA" in lines[-1]
    first_calls = len(emulator.calls_to("conversations.history"))
    done = await backfill(
        r.hl,
        directory,
        r.hl.store,
        team=TEAM,
        since=since,  # type: ignore[arg-type]
        pace_s=0,
    )
    resumed = emulator.calls_to("conversations.history")[first_calls:]
    general = [c for c in resumed if c.args["channel"] == "C0GENERAL"]
    assert general and general[0].args.get("cursor")  # carried on from the saved cursor
    assert [c.status for c in emulator.calls_to("conversations.history")].count(429) == 1
    found = {h.ts for h in await r.hl.store.everything(TEAM)}
    assert found == expected and done.found == len(expected)
    assert done.scanned == 42  # 40 posts, the bot's, one reply; not the old one
    h = await r.hl.store.get(TEAM, "C0GENERAL", ts(100))
    assert h is not None and h.reactors == {"U0USER", "U0CARL"} and h.excerpt == "post 0"
    assert h.first_tagged_at == datetime.fromtimestamp(float(ts(100)), UTC)
    again = await backfill(
        r.hl,
        directory,
        r.hl.store,
        team=TEAM,
        since=since,  # type: ignore[arg-type]
        pace_s=0,
    )
    assert again.found == done.found  # a finished run is not walked again


async def test_cli_verbs(start: Start, emulator: SlackEmulator, redis_url: str) -> None:
    r = await start()
    # `digest --now` covers the seven days up to the real now.
    recent = f"{int(time.time()) - 3600}.000100"
    since = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%d")
    emulator.add_message(
        "C0RANDOM",
        ts=recent,
        text="from the past",
        user="U0ADMIN",
        reactions=[{"name": "meow_party", "users": ["U0CARL"]}],
    )
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": emulator.bot_token,
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
        "PROMETHEUS_URL": "",
        "SLURM_REST_URL": "",
        "MEOWBOT_DIGEST_CHANNEL": DIGEST,
        "MEOWBOT_LOG_LEVEL": "warning",
    }

    async def meowbot(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            *args,
            env=env,
            cwd=Path(__file__).parents[2],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        return int(proc.returncode or 0), out.decode()

    code, out = await meowbot(
        "backfill-highlights", "--since", since, "--channel", "C0RANDOM", "--pace", "0"
    )
    assert code == 0 and "1 highlights found" in out, out
    assert await r.hl.store.get(TEAM, "C0RANDOM", recent) is not None
    code, out = await meowbot("digest", "--now")
    assert code == 0 and "digest posted" in out, out
    [digest] = posts(emulator, DIGEST)
    assert "from the past" in json.dumps(digest["blocks"]) and "metadata" not in digest
    code, out = await meowbot("backfill-highlights", "--since", "yesterday")
    assert code == 2 and "not a date" in out
