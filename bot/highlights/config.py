"""HighlightsConfig: the environment's three names plus the `highlights:` section of MEOWBOT_CONFIG.

```yaml
highlights:
  threshold: 1                # distinct people who must react for a post to count
  count_own_reactions: false  # the author's own reaction on their post
  include_bot_messages: false
  top_n: 15                   # entries in the digest message; the rest go to its thread
  empty_week: post            # or skip: an empty week posts nothing
  excluded_channels: [C0RANDOM]
  private_opt_in: [C0TEAM]    # private channels that get their own digest, posted there only
  catch_up_hours: 24          # a digest missed while no replica ran is posted this late at most
  channel_cache_s: 600        # how long a channel's visibility (conversations.info) is trusted
  backfill_pace_s: 1.2        # pause between Web API calls of the backfill (Tier 3: 50/min)
```
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.highlights.rules import emoji_list
from bot.highlights.schedule import DigestSchedule

EXCERPT_CHARS = 200


class HighlightsConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    emoji: tuple[str, ...] = ("meow_party",)
    threshold: int = Field(1, ge=1, le=1000)
    count_own_reactions: bool = False
    include_bot_messages: bool = False
    top_n: int = Field(15, ge=1, le=40)
    empty_week: Literal["post", "skip"] = "post"
    digest_channel: str | None = None
    schedule: DigestSchedule = DigestSchedule()
    excluded_channels: frozenset[str] = frozenset()
    private_opt_in: frozenset[str] = frozenset()
    catch_up_hours: float = Field(24.0, ge=0, le=24 * 6)
    channel_cache_s: float = Field(600.0, ge=0, le=86400)
    backfill_pace_s: float = Field(1.2, ge=0, le=60)
    excerpt_chars: int = Field(EXCERPT_CHARS, ge=20, le=1000)

    @field_validator("emoji", mode="before")
    @classmethod
    def _emoji(cls, v: object) -> tuple[str, ...]:
        names = emoji_list(v if isinstance(v, str) else [str(x) for x in v])  # type: ignore[attr-defined]
        if not names:
            raise ValueError("at least one emoji name")
        return names

    @field_validator("schedule", mode="before")
    @classmethod
    def _schedule(cls, v: object) -> object:
        return DigestSchedule.parse(v) if isinstance(v, str) else v

    def digest_targets(self) -> list[str]:
        """Where digests go: the digest channel and each opted-in private channel."""
        targets = [self.digest_channel] if self.digest_channel else []
        return targets + sorted(self.private_opt_in - set(targets))
