"""The highlights' by-hand verbs: `meowbot digest --now` and `meowbot backfill-highlights`.

Each takes the running bot's own highlights parts from the composition root (bot/app.py's
`highlights_job`: the bot token's Web API client, Redis, the Slack directory), does its one
job, and lets the root close them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime, timedelta

from bot.app import highlights_job
from bot.config import ConfigError, Settings
from bot.highlights.backfill import Progress, backfill
from bot.highlights.schedule import Week


async def digest_now(settings: Settings, channel: str | None) -> str | None:
    """Posts the digest of the last seven days to `channel` (or the digest channel) now. It
    is not the scheduled digest: that one still comes at its time."""
    async with highlights_job(settings) as p:
        target = channel or p.hl.cfg.digest_channel
        if not target:
            raise ConfigError("MEOWBOT_DIGEST_CHANNEL must be set, or pass --channel.")
        now = p.hl.clock()
        week = Week(start=now - timedelta(days=7), end=now, id=f"now-{now:%Y%m%dT%H%M%S}")
        return await p.digest.post_digest(await p.directory.team(), target, week, tag=False)


async def backfill_highlights(
    settings: Settings, since: datetime, channels: Sequence[str], pace_s: float | None
) -> Progress:
    async with highlights_job(settings, patient=True) as p:
        team = await p.directory.team()

        def report(progress: Progress) -> None:
            print(progress.line(p.hl.clock()), file=sys.stderr, flush=True)

        done = await backfill(
            p.hl,
            p.directory,
            p.store,
            team=team,
            since=since,
            channels=channels,
            pace_s=pace_s,
            report=report,
        )
        return done
