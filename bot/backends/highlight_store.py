"""Highlights in Redis: one hash per reacted message, its reactors, and a time index.

Keys, under `meowbot:<team>:hl:`:

- `msg:<channel>:<ts>` (hash): team, channel, ts, thread_ts, author, first (first tagged at,
  epoch s), reactors (sorted ids, comma-joined), count, excerpt, permalink, edited.
- `rx:<channel>:<ts>` (hash): `<user>|<emoji>` -> `<event_ts>:<1|0>`, the last word of each
  person on each tracked emoji. Distinct people are counted from it, so a retried event, a
  reaction added twice, or removed and added again never counts twice; an older event arriving
  after a newer one changes nothing.
- `time` (sorted set): `<channel>:<ts>` scored by first tagged at, for messages at the threshold:
  a week's digest is one ZRANGEBYSCORE.
- `authors` (hash): `<channel>:<ts>` -> author, so stats over years need two reads, not one a
  highlight.
- `gone:<channel>:<ts>`: a deleted message (or a bot's), so late reactions do not revive it.
- `optout` (set of user ids), `digest:<channel>:<week>` (posting / posted:<ts>),
  `lock:<name>` and `fence:<name>` (bot/backends/locks.py).

Each reaction is one Lua script: the delivery's claim (`meowbot:<team>:event:<id>`, the key the
events middleware uses), the reactor's last word, the count and the index change together or
not at all, so Redis failing half-way can neither lose an event nor count one twice.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from bot import ticks
from bot.backends.locks import RedisLocks
from bot.backends.state import key
from bot.highlights.models import Highlight, Reaction
from bot.highlights.ports import Reacted
from bot.ports import Fence

log = logging.getLogger(__name__)

EVENT_CLAIM_TTL_S = 2 * 3600  # as handlers/events.py: Slack retries for about 1.5 h
REACTORS_TTL_S = 2 * 3600  # a message whose last reaction went keeps its reactors this long
GONE_TTL_S = 90 * 86400
DIGEST_STATE_TTL_S = 60 * 86400
# How long a reaction waits for a replica to confirm it (Sentinel only): about a round trip on a
# healthy pair; the whole of it only while no replica answers.
WAIT_MS = 200
# After a WAIT that no replica answered, reactions are stored without waiting this long.
ALONE_S = 5.0

_REACT = """
if tonumber(ARGV[1]) > 0 then
  if not redis.call('set', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return {-1, 0} end
end
if redis.call('exists', KEYS[5]) == 1 then return {-2, 0} end
local prev = redis.call('hget', KEYS[3], ARGV[2])
local apply = true
if prev then
  local sep = string.find(prev, ':', 1, true)
  if tonumber(string.sub(prev, 1, sep - 1)) > tonumber(ARGV[4]) then apply = false end
end
if apply then redis.call('hset', KEYS[3], ARGV[2], ARGV[4] .. ':' .. ARGV[5]) end
local all = redis.call('hgetall', KEYS[3])
local seen, users, n = {}, {}, 0
for i = 1, #all, 2 do
  if string.sub(all[i + 1], -1) == '1' then
    local u = string.sub(all[i], 1, string.find(all[i], '|', 1, true) - 1)
    if not seen[u] then seen[u] = true; n = n + 1; users[n] = u end
  end
end
if n == 0 then
  redis.call('del', KEYS[2])
  redis.call('zrem', KEYS[4], ARGV[8])
  redis.call('hdel', KEYS[6], ARGV[8])
  redis.call('expire', KEYS[3], ARGV[14])
  return {0, 0}
end
redis.call('persist', KEYS[3])
local created = 0
if redis.call('exists', KEYS[2]) == 0 then
  created = 1
  local first = ARGV[12]
  if first == '' then first = ARGV[6] end
  redis.call('hset', KEYS[2], 'team', ARGV[13], 'channel', ARGV[9], 'ts', ARGV[10], 'first', first)
end
if ARGV[11] ~= '' and not redis.call('hget', KEYS[2], 'author') then
  redis.call('hset', KEYS[2], 'author', ARGV[11])
  redis.call('hset', KEYS[6], ARGV[8], ARGV[11])
end
table.sort(users)
redis.call('hset', KEYS[2], 'reactors', table.concat(users, ','), 'count', n)
if n >= tonumber(ARGV[7]) then
  redis.call('zadd', KEYS[4], redis.call('hget', KEYS[2], 'first'), ARGV[8])
else
  redis.call('zrem', KEYS[4], ARGV[8])
end
return {n, created}
"""

_ENRICH = """
if redis.call('exists', KEYS[1]) == 0 then return 0 end
redis.call('hset', KEYS[1], 'excerpt', ARGV[1], 'permalink', ARGV[2])
if ARGV[3] ~= '' then redis.call('hset', KEYS[1], 'thread_ts', ARGV[3]) end
if ARGV[4] ~= '' then
  redis.call('hset', KEYS[1], 'author', ARGV[4])
  redis.call('hset', KEYS[2], ARGV[5], ARGV[4])
end
return 1
"""

_EDIT = """
if redis.call('exists', KEYS[1]) == 0 then return 0 end
local last = redis.call('hget', KEYS[1], 'edited')
if last and tonumber(last) > tonumber(ARGV[2]) then return 1 end
redis.call('hset', KEYS[1], 'excerpt', ARGV[1], 'edited', ARGV[2])
return 1
"""

_DELETE = """
local had = redis.call('exists', KEYS[1])
redis.call('del', KEYS[1], KEYS[2])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('hdel', KEYS[5], ARGV[1])
redis.call('set', KEYS[4], '1', 'EX', ARGV[2])
return had
"""


def _epoch(at: datetime) -> str:
    return repr(at.timestamp())


class RedisHighlightStore:
    def __init__(self, redis: Any, *, wait_replicas: int = 0) -> None:
        # Replies are decoded strings (decode_responses); redis-py's unions are not useful here.
        self.redis: Any = redis
        # Under Sentinel a reaction is acknowledged to Slack only after a replica has it, or
        # after WAIT_MS without one (counted in `unconfirmed` and logged): replication is
        # asynchronous, and a write only the old primary had is gone after a failover.
        self.wait_replicas = wait_replicas
        self.unconfirmed = 0
        self._alone_since: float | None = None  # the last WAIT no replica confirmed
        self._react = redis.register_script(_REACT)
        self._enrich = redis.register_script(_ENRICH)
        self._edit = redis.register_script(_EDIT)
        self._delete = redis.register_script(_DELETE)

    @staticmethod
    def _k(team: str, *parts: str) -> str:
        return key(team, "hl", *parts)

    def _locks(self, team: str) -> RedisLocks:
        return RedisLocks(
            self.redis,
            lambda name: self._k(team, "lock", name),
            lambda name: self._k(team, "fence", name),
        )

    # recording -----------------------------------------------------------------------------

    async def react(
        self,
        r: Reaction,
        *,
        threshold: int,
        now: datetime,
        first_tagged_at: datetime | None = None,
    ) -> Reacted:
        t, m = r.team, f"{r.channel}:{r.ts}"
        claim = key(t, "event", r.event_id) if r.event_id else self._k(t, "noclaim")
        keys = [
            claim,
            self._k(t, "msg", m),
            self._k(t, "rx", m),
            self._k(t, "time"),
            self._k(t, "gone", m),
            self._k(t, "authors"),
        ]
        args = [
            EVENT_CLAIM_TTL_S if r.event_id else 0,
            f"{r.user}|{r.emoji}",
            r.user,
            r.event_ts,
            "1" if r.added else "0",
            _epoch(now),
            threshold,
            m,
            r.channel,
            r.ts,
            r.author or "",
            _epoch(first_tagged_at) if first_tagged_at else "",
            t,
            REACTORS_TTL_S,
        ]
        count, created = await self._react_durably(keys, args)
        if count == -1:
            return Reacted(0, False, duplicate=True)
        if count == -2:
            return Reacted(0, False, gone=True)
        return Reacted(int(count), bool(created))

    async def _react_durably(self, keys: list[str], args: list[Any]) -> tuple[int, int]:
        if not self.wait_replicas or ticks.since(self._alone_since) < ALONE_S:
            count, created = await self._react(keys=keys, args=args)
            if self.wait_replicas:
                self.unconfirmed += 1
            return int(count), int(created)
        # WAIT counts the writes of its own connection, so it goes in the same pipeline as the
        # script. EVAL with the script's text rather than EVALSHA: a promoted replica has no
        # script cache, and a pipeline does not reload a script that went missing mid-way. A
        # retry after a failover runs both again; the script's claim makes that a no-op when
        # its first run made it across.
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.eval(_REACT, len(keys), *keys, *args)
            pipe.wait(self.wait_replicas, WAIT_MS)
            (count, created), replicas = await pipe.execute()
        if replicas < self.wait_replicas:
            # No replica (a primary just promoted, a replica down): waiting WAIT_MS on every
            # reaction would buy nothing, so reactions go unconfirmed for a while, said once.
            self.unconfirmed += 1
            self._alone_since = ticks.now()
            log.warning(
                "no replica confirmed a reaction; not waiting for one for a while",
                extra={"wait_ms": WAIT_MS, "for_s": ALONE_S},
            )
        return int(count), int(created)

    async def enrich(
        self,
        team: str,
        channel: str,
        ts: str,
        *,
        thread_ts: str | None,
        author: str | None,
        excerpt: str,
        permalink: str,
    ) -> bool:
        m = f"{channel}:{ts}"
        done = await self._enrich(
            keys=[self._k(team, "msg", m), self._k(team, "authors")],
            args=[excerpt, permalink, thread_ts or "", author or "", m],
        )
        return bool(done)

    async def edit(self, team: str, channel: str, ts: str, excerpt: str, edited_ts: str) -> bool:
        done = await self._edit(
            keys=[self._k(team, "msg", f"{channel}:{ts}")], args=[excerpt, edited_ts or "0"]
        )
        return bool(done)

    async def delete(self, team: str, channel: str, ts: str) -> bool:
        m = f"{channel}:{ts}"
        keys = [
            self._k(team, "msg", m),
            self._k(team, "rx", m),
            self._k(team, "time"),
            self._k(team, "gone", m),
            self._k(team, "authors"),
        ]
        return bool(await self._delete(keys=keys, args=[m, GONE_TTL_S]))

    # reading -------------------------------------------------------------------------------

    @staticmethod
    def _highlight(team: str, raw: dict[str, str]) -> Highlight | None:
        if not raw or "ts" not in raw:
            return None
        reactors = raw.get("reactors", "")
        # Our own records, written by the scripts above: built without re-validating each.
        return Highlight.model_construct(
            team=raw.get("team", team),
            channel=raw["channel"],
            ts=raw["ts"],
            thread_ts=raw.get("thread_ts") or None,
            author=raw.get("author", ""),
            reactors=frozenset(reactors.split(",")) if reactors else frozenset(),
            first_tagged_at=datetime.fromtimestamp(float(raw["first"]), UTC),
            excerpt=raw.get("excerpt", ""),
            permalink=raw.get("permalink", ""),
        )

    async def get(self, team: str, channel: str, ts: str) -> Highlight | None:
        raw = await self.redis.hgetall(self._k(team, "msg", f"{channel}:{ts}"))
        return self._highlight(team, raw)

    async def _load(self, team: str, members: list[str]) -> list[Highlight]:
        if not members:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for m in members:
                pipe.hgetall(self._k(team, "msg", m))
            raws = await pipe.execute()
        return [h for h in (self._highlight(team, r) for r in raws) if h is not None]

    async def between(self, team: str, start: datetime, end: datetime) -> list[Highlight]:
        members = await self.redis.zrangebyscore(
            self._k(team, "time"), _epoch(start), f"({_epoch(end)}"
        )
        return await self._load(team, list(members))

    async def everything(self, team: str) -> list[Highlight]:
        return await self._load(team, list(await self.redis.zrange(self._k(team, "time"), 0, -1)))

    async def index(self, team: str) -> list[Highlight]:
        """Every highlight in brief (channel, ts, author, first tagged at; no reactors, excerpt
        or link) from two reads, the time index and the authors hash: what stats need, for
        years of highlights at once."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(self._k(team, "time"), 0, -1, withscores=True)
            pipe.hgetall(self._k(team, "authors"))
            rows, authors = await pipe.execute()
        out: list[Highlight] = []
        for member, score in rows:
            channel, _, ts = str(member).partition(":")
            brief = Highlight.model_construct(
                team=team,
                channel=channel,
                ts=ts,
                thread_ts=None,
                author=authors.get(member, ""),
                reactors=frozenset(),
                first_tagged_at=datetime.fromtimestamp(float(score), UTC),
                excerpt="",
                permalink="",
            )
            out.append(brief)
        return out

    # people ----------------------------------------------------------------------------------

    async def set_opt_out(self, team: str, user: str, out: bool) -> None:
        if out:
            await self.redis.sadd(self._k(team, "optout"), user)
        else:
            await self.redis.srem(self._k(team, "optout"), user)

    async def opted_out(self, team: str) -> set[str]:
        return {str(u) for u in await self.redis.smembers(self._k(team, "optout"))}

    # the digest's exactly-once ---------------------------------------------------------------

    async def digest_state(self, team: str, channel: str, week: str) -> str | None:
        value = await self.redis.get(self._k(team, "digest", channel, week))
        return str(value) if value else None

    async def set_digest_state(
        self, team: str, channel: str, week: str, state: str, fence: Fence
    ) -> None:
        await self._locks(team).fenced_set(
            fence, self._k(team, "digest", channel, week), state, ex=DIGEST_STATE_TTL_S
        )

    async def acquire(self, team: str, name: str, ttl_ms: int) -> Fence | None:
        return await self._locks(team).acquire(name, ttl_ms)

    async def release(self, team: str, fence: Fence) -> None:
        await self._locks(team).release(fence)

    # the backfill's progress ----------------------------------------------------------------

    async def backfill_progress(self, team: str, run: str, channel: str) -> dict[str, str]:
        raw = await self.redis.hgetall(self._k(team, "backfill", run, channel))
        return {str(k): str(v) for k, v in raw.items()}

    async def save_backfill_progress(
        self, team: str, run: str, channel: str, progress: dict[str, str]
    ) -> None:
        await self.redis.hset(self._k(team, "backfill", run, channel), mapping=progress)
