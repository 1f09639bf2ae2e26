"""The highlights' by-hand verbs: `meowbot digest --now` and `meowbot backfill-highlights`.

Each builds the same adapters as the running bot (bot/app.py): the bot token's Web API client,
Redis, the Slack directory; then does its one job and closes them.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import make_web_client
from bot.backends.highlight_store import RedisHighlightStore
from bot.backends.slack_directory import SlackDigestPoster, SlackDirectory
from bot.backends.state import RedisStore
from bot.config import ConfigError, Settings
from bot.highlights.backfill import Progress, backfill
from bot.highlights.runtime import DigestRunner
from bot.highlights.schedule import Week
from bot.highlights.service import Highlights
from bot.render.highlights import render_digest
from bot.wiring import highlights_config

# The backfill makes thousands of calls: it waits out many more 429s than a listener would.
BACKFILL_RATE_LIMIT_RETRIES = 20


@dataclass
class Parts:
    hl: Highlights
    store: RedisHighlightStore
    directory: SlackDirectory
    client: AsyncWebClient


@asynccontextmanager
async def parts(settings: Settings, *, patient: bool = False) -> AsyncIterator[Parts]:
    if settings.slack_bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN must be set (a bot token starting with xoxb-).")
    if not settings.redis_url:
        raise ConfigError("REDIS_URL must be set (a URL like redis://host:6379/0).")
    cfg = highlights_config(settings)
    redis = RedisStore(settings.redis_url)
    async with aiohttp.ClientSession() as session:
        client = make_web_client(settings, session)
        if patient:
            client.retry_handlers = [
                AsyncConnectionErrorRetryHandler(max_retry_count=5),
                AsyncRateLimitErrorRetryHandler(max_retry_count=BACKFILL_RATE_LIMIT_RETRIES),
            ]
        directory = SlackDirectory(client, channel_cache_s=cfg.channel_cache_s)
        store = RedisHighlightStore(redis.redis)
        try:
            yield Parts(Highlights(store, directory, cfg), store, directory, client)
        finally:
            await redis.close()


async def digest_now(settings: Settings, channel: str | None) -> str | None:
    """Posts the digest of the last seven days to `channel` (or the digest channel) now. It
    is not the scheduled digest: that one still comes at its time."""
    async with parts(settings) as p:
        target = channel or p.hl.cfg.digest_channel
        if not target:
            raise ConfigError("MEOWBOT_DIGEST_CHANNEL must be set, or pass --channel.")
        now = p.hl.clock()
        week = Week(start=now - timedelta(days=7), end=now, id=f"now-{now:%Y%m%dT%H%M%S}")
        runner = DigestRunner(p.hl, SlackDigestPoster(p.client), p.directory.team, render_digest)
        return await runner.post_digest(await p.directory.team(), target, week, tag=False)


async def backfill_highlights(
    settings: Settings, since: datetime, channels: Sequence[str], pace_s: float | None
) -> Progress:
    async with parts(settings, patient=True) as p:
        team = await p.directory.team()

        def report(progress: Progress) -> None:
            print(progress.line(p.hl.clock()), file=sys.stderr, flush=True)

        done = await backfill(
            p.hl, p.directory, p.store, team=team, since=since, channels=channels,
            pace_s=pace_s, report=report,
        )  # fmt: skip
        return done
