"""Caches, TTLs and rate windows on a machine booted seconds ago.

The monotonic clock counts from boot, so on a fresh machine it reads a few seconds: a cache
whose "never read" was 0.0 looked fresh for its whole life (every job owner was "not found on
Slack" for a fresh machine's first hour). Here `bot.ticks.now` reads a boot clock the test
moves; Slack is the emulator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot import ticks
from bot.ask.models import Entities, Intent
from bot.ask.understand import Context
from bot.authz import CACHE_TTL_S, Authorizer
from bot.backends import slack_owners
from bot.backends.job_notice_store import MemoryJobNotices
from bot.backends.playground_store import MemoryPlaygroundStore
from bot.backends.slack_directory import TtlCache
from bot.backends.slack_owners import SlackJobOwners
from bot.backends.state import MemoryStore
from bot.backends.thread_memory import KEEP_S, MemoryThreadMemory
from bot.highlights.backfill import Progress
from bot.playground.ports import Limits
from bot.render.job_notice import render_job_notice
from bot.shell.emulator import SlackEmulator
from bot.slack_message import SlackMessage
from bot.usermap import CACHE_TTL_S as USER_TTL_S
from bot.usermap import UserMap
from handlers.reply import EDIT_EVERY_S, ProgressEdits


class BootClock:
    """The monotonic clock of a machine booted `at` seconds ago; the test moves it."""

    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += seconds


@pytest.fixture(params=[0.5, 42.0, 1800.0], ids=["0.5s", "42s", "30min"])
def boot(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> BootClock:
    clock = BootClock(request.param)
    monkeypatch.setattr(ticks, "now", clock)
    return clock


@pytest.fixture
async def emu() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


def client(emu: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=emu.bot_token, base_url=emu.api_url)


async def test_job_owners_are_found_from_the_first_minute(
    boot: BootClock, emu: SlackEmulator
) -> None:
    owners = SlackJobOwners(client(emu), render_job_notice)
    assert await owners.slack_user("bob") == "U0USER"
    assert await owners.slack_user("ana") == "U0ADMIN"
    assert len(emu.calls_to("users.list")) == 1  # one walk, kept
    # Someone who joins is found once the walk is an hour old, not before.
    emu.add_user("U0CAROL", "carol", email="carol@example.org")
    assert await owners.slack_user("carol") is None
    boot.advance(slack_owners.CACHE_S + 1)
    assert await owners.slack_user("carol") == "U0CAROL"
    assert len(emu.calls_to("users.list")) == 2


async def test_a_slack_users_cluster_name_is_kept_an_hour(
    boot: BootClock, emu: SlackEmulator
) -> None:
    users, web = UserMap({}), client(emu)
    assert await users.cluster_user("U0USER", web) == "bob"
    emu.add_user("U0USER", "bob", email="robert@example.org")  # the email changes
    assert await users.cluster_user("U0USER", web) == "bob"
    assert len(emu.calls_to("users.info")) == 1
    boot.advance(USER_TTL_S + 1)
    assert await users.cluster_user("U0USER", web) == "robert"


async def test_a_person_removed_from_the_admins_group_loses_the_right(
    boot: BootClock, emu: SlackEmulator
) -> None:
    emu.add_usergroup("S0OPS", "ops", ["U0USER"])
    authz, web = Authorizer(("@ops",)), client(emu)
    assert await authz.allowed("U0USER", web)
    emu.add_usergroup("S0OPS", "ops", [])
    assert await authz.allowed("U0USER", web)  # within the cache's life
    boot.advance(CACHE_TTL_S + 1)
    assert not await authz.allowed("U0USER", web)


async def test_a_slow_answers_first_step_is_shown_at_once(
    boot: BootClock, emu: SlackEmulator
) -> None:
    web = client(emu)
    posted = await web.chat_postMessage(channel="C0GENERAL", text="looking at...")
    edits = ProgressEdits(web, "C0GENERAL", str(posted["ts"]), lambda s: SlackMessage(s, []))
    await edits("reading the fleet")
    await edits("too soon")  # Slack's pace: one edit each EDIT_EVERY_S
    boot.advance(EDIT_EVERY_S)
    await edits("reading the jobs")
    shown = [c.args["text"] for c in emu.calls_to("chat.update")]
    assert shown == ["reading the fleet", "reading the jobs"]


async def test_claims_and_kept_answers_live_their_ttl(boot: BootClock) -> None:
    store, notices = MemoryStore(), MemoryJobNotices()
    assert await store.claim("T", "kind", "k", 60)
    assert not await store.claim("T", "kind", "k", 60)
    assert await notices.claim("job:1", 60)
    assert not await notices.claim("job:1", 60)
    cache: TtlCache[str] = TtlCache(60)
    cache.put("C1", "general")
    assert cache.get("C1") == (True, "general")
    memory = MemoryThreadMemory()
    asked = Context(Intent.FAULTS, Entities(nodes=("gpu-0001",)))
    await memory.remember("T", "C1", "1.0", asked)
    assert await memory.recall("T", "C1", "1.0") == asked
    boot.advance(61)
    assert await store.claim("T", "kind", "k", 60)
    assert await notices.claim("job:1", 60)
    assert cache.get("C1") == (False, None)
    assert await memory.recall("T", "C1", "1.0") == asked
    boot.advance(KEEP_S)
    assert await memory.recall("T", "C1", "1.0") is None


async def test_the_playgrounds_rate_counts_this_minute_only(boot: BootClock) -> None:
    store, limits = MemoryPlaygroundStore(), Limits(5, 2, 10)
    for _ in range(2):
        assert await store.acquire("U1", limits) is None
        await store.release("U1")
    refused = await store.acquire("U1", limits)
    assert refused is not None and "this minute" in refused.sentence
    boot.advance(60)
    assert await store.acquire("U1", limits) is None


def test_a_backfills_eta_counts_from_its_start(boot: BootClock) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    progress = Progress(since=now - timedelta(days=10), channels=4, index=1)
    assert progress.eta_s(now) is None  # no time has passed yet
    boot.advance(30)
    assert progress.eta_s(now) == pytest.approx(90)  # a quarter done in 30 s
