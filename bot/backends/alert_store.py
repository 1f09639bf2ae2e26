"""Alert state in Redis: groups, the fingerprint index, the notifier's queue, locks, audit.

Several replicas receive the same webhooks and run the same loops, so every change of a group is
an optimistic transaction (WATCH the group, apply a pure function, MULTI/EXEC, retry on a
conflict): the same alert delivered to three replicas at once joins its group once. Writes made
on behalf of a lock holder also WATCH the lock and check its fencing token, so a replica that
lost its lock while paused cannot overwrite what the new holder wrote.

Keys, under `meowbot:<team>:alerts:`: `group:<id>` (the group as JSON), `fp:<fingerprint>` (its
group id), `open` (ids of groups not yet fully resolved and shown so), `dirty` (sorted set: group
id -> change counter, the notifier's queue), `lock:<name>` and `fence:<name>`, `audit` (stream),
`drains` (sorted set of drains by time, for the blast-radius limit), `pending:<id>`,
`storm:<channel>` (the storm summary's message ts), `watch` (when the sweeps' unbroken run
began and its last sweep), `barrier` (a counter written only to ask
the replicas whether they have caught up).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from bot.alerts.models import AlertGroup
from bot.alerts.ports import Update
from bot.backends.locks import RedisLocks
from bot.backends.state import claim_once, key
from bot.errors import FenceLost
from bot.give_way import give_way
from bot.offload import Offload
from bot.ports import Fence

T = TypeVar("T")
AUDIT_MAXLEN = 100_000
FP_TTL_S = 30 * 86400  # a fingerprint seen again within a month finds its group
RESOLVED_TTL_S = 7 * 86400  # a resolved group is kept (and shown resolved) for a week
# The auto-drain tries a node of a group once in this long: a fault that comes back after a
# person resumed the node is drained again, but not on every pass of the notifier.
AUTO_DRAIN_MEMORY_S = 6 * 3600
# How long a durable write waits for a replica's confirmation (Sentinel only).
WAIT_MS = 200

# Queues a group with the next change number: a counter shared by every replica, so "changed
# since it was read" never depends on clocks that differ between machines.
_QUEUE = "return redis.call('zadd', KEYS[1], redis.call('incr', KEYS[2]), ARGV[1])"
# Removes a queue entry only when no change came in since it was read.
_CLEAN = (
    "local s = redis.call('zscore', KEYS[1], ARGV[1]) "
    "if s and tonumber(s) <= tonumber(ARGV[2]) then "
    "return redis.call('zrem', KEYS[1], ARGV[1]) end "
    "return 0"
)

# The sweeps' watch: a sweep within `gap` of the last one continues it, else one begins now.
# Returns when the run began (seconds, as stored).
_WATCH = (
    "local last = tonumber(redis.call('hget', KEYS[1], 'last')) "
    "local since = redis.call('hget', KEYS[1], 'since') "
    "if not last or not since or tonumber(ARGV[1]) - last > tonumber(ARGV[2]) then "
    "since = ARGV[1] end "
    "redis.call('hset', KEYS[1], 'last', ARGV[1], 'since', since) "
    "return since"
)
WATCH_TTL_S = 90 * 86400


# Groups decoded in one worker job before it stands aside for acks (bot/give_way.py).
DECODE_STEP = 64


def _decoded(gids: Sequence[str], raws: Sequence[str | None]) -> dict[str, AlertGroup]:
    groups: dict[str, AlertGroup] = {}
    for i, (gid, raw) in enumerate(zip(gids, raws, strict=True)):
        if i % DECODE_STEP == DECODE_STEP - 1:
            give_way()
        if raw:
            groups[gid] = AlertGroup.model_validate_json(raw)
    return groups


def _decided(
    raw: str | None, change: Callable[[AlertGroup | None], Update[T]]
) -> tuple[Update[T], str | None]:
    """The change applied to the stored group, and the new group's JSON to write (None: no
    write). Decoding, merging and encoding a group of thousands of alerts takes tens of
    milliseconds: with an Offload it runs on a worker, not on the loop that sends the acks."""
    upd = change(AlertGroup.model_validate_json(raw) if raw else None)
    return upd, None if upd.group is None else upd.group.model_dump_json()


class RedisAlertStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        team: str = "",
        *,
        wait_replicas: int = 0,
        cpu: Offload | None = None,
    ) -> None:
        # redis-py's annotations make every reply a union of bytes, str, None and awaitables;
        # the replies here are decoded strings (decode_responses), checked where they matter.
        self.redis: Any = redis
        self.team = team
        # Under Sentinel, durable writes wait for this many replicas (bot/backends/state.py).
        self.wait_replicas = wait_replicas
        # Where groups are decoded and changed: a worker of the bot's bounded pool (the running
        # bot's), or the calling loop when None (tests, the shell).
        self.cpu = cpu
        self.locks = RedisLocks(
            redis, lambda name: self._k("lock", name), lambda name: self._k("fence", name)
        )

    def _k(self, *parts: str) -> str:
        return key(self.team, "alerts", *parts)

    # groups ---------------------------------------------------------------------------------

    async def groups_of(self, fingerprints: Sequence[str]) -> list[str | None]:
        if not fingerprints:
            return []
        values = await self.redis.mget([self._k("fp", fp) for fp in fingerprints])
        return [str(v) if v else None for v in values]

    async def group(self, gid: str) -> AlertGroup | None:
        raw = await self.redis.get(self._k("group", gid))
        return AlertGroup.model_validate_json(raw) if raw else None

    async def groups(self, gids: Sequence[str]) -> dict[str, AlertGroup]:
        if not gids:
            return {}
        raws = await self.redis.mget([self._k("group", g) for g in gids])
        if self.cpu is not None and len(gids) > DECODE_STEP:
            return await self.cpu.run(_decoded, gids, raws)
        return _decoded(gids, raws)

    async def open_ids(self) -> list[str]:
        return sorted(str(g) for g in await self.redis.smembers(self._k("open")))

    async def update(
        self,
        gid: str,
        change: Callable[[AlertGroup | None], Update[T]],
        *,
        fence: Fence | None = None,
        durable: bool = False,
    ) -> T:
        """Applies `change` to the stored group atomically, retrying on a concurrent write."""
        result = await self._apply(gid, change, fence)
        if durable and not await self._replicated():
            # No replica confirmed it: either there is none, or a failover came between the
            # write and the check and the write may be gone with the old primary. Writing it
            # again puts it on the primary of the moment (the change is safe to apply twice).
            result = await self._apply(gid, change, fence)
        return result

    async def _replicated(self) -> bool:
        """True when a replica has every write this server took before the call (or when
        there are no replicas to wait for). A barrier write and WAIT on one connection: the
        replication stream is one ordered stream, so the replica that acknowledged the barrier
        has everything before it."""
        if not self.wait_replicas:
            return True
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.incr(self._k("barrier"))
            pipe.wait(self.wait_replicas, WAIT_MS)
            _, replicas = await pipe.execute()
        return int(replicas) >= self.wait_replicas

    async def _apply(
        self, gid: str, change: Callable[[AlertGroup | None], Update[T]], fence: Fence | None
    ) -> T:
        gkey = self._k("group", gid)
        watched = [gkey] + ([self._k("lock", fence.name)] if fence else [])
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(*watched)
                    if fence is not None:
                        held = await pipe.get(self._k("lock", fence.name))
                        if held != fence.token:
                            raise FenceLost(fence.name)
                    raw = await pipe.get(gkey)
                    if self.cpu is not None:
                        upd, encoded = await self.cpu.run(_decided, raw, change)
                    else:
                        upd, encoded = _decided(raw, change)
                    pipe.multi()
                    if encoded is not None:  # the change left a group to write
                        self._write(pipe, gid, upd, encoded)
                    await pipe.execute()
                    return upd.result
                except WatchError:
                    continue

    def _write(self, pipe: Any, gid: str, upd: Update[Any], encoded: str) -> None:
        group = upd.group
        assert group is not None
        gkey = self._k("group", gid)
        if group.resolved and group.ts is not None and not upd.dirty:
            # Shown resolved: out of the open set, kept a while for late repeats and audits.
            pipe.set(gkey, encoded, ex=RESOLVED_TTL_S)
            pipe.srem(self._k("open"), gid)
        else:
            pipe.set(gkey, encoded)
            pipe.sadd(self._k("open"), gid)
        for fp in upd.fingerprints:
            pipe.set(self._k("fp", fp), gid, ex=FP_TTL_S)
        if upd.dirty:
            pipe.eval(_QUEUE, 2, self._k("dirty"), self._k("seq"), gid)

    # the notifier's queue -------------------------------------------------------------------

    async def dirty(self, limit: int = 1000) -> list[tuple[str, float]]:
        rows = await self.redis.zrange(self._k("dirty"), 0, limit - 1, withscores=True)
        return [(str(g), float(s)) for g, s in rows]

    async def clean(self, gid: str, seen: float) -> bool:
        """Done with `gid` as of the change `seen`; a later change keeps it queued."""
        done = await self.redis.eval(_CLEAN, 1, self._k("dirty"), gid, repr(seen))
        return bool(done)

    async def mark_dirty(self, gid: str) -> None:
        await self.redis.eval(_QUEUE, 2, self._k("dirty"), self._k("seq"), gid)

    # storm summaries ------------------------------------------------------------------------

    async def storm_ts(self, channel: str) -> str | None:
        value = await self.redis.get(self._k("storm", channel))
        return str(value) if value else None

    async def set_storm_ts(self, channel: str, ts: str | None, fence: Fence) -> None:
        await self._set_storm_ts(channel, ts, fence)
        # A summary's ts records a post Slack took: kept across a failover as `update` does.
        if ts is not None and not await self._replicated():
            await self._set_storm_ts(channel, ts, fence)

    async def _set_storm_ts(self, channel: str, ts: str | None, fence: Fence) -> None:
        skey = self._k("storm", channel)
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(self._k("lock", fence.name))
            if await pipe.get(self._k("lock", fence.name)) != fence.token:
                raise FenceLost(fence.name)
            pipe.multi()
            if ts is None:
                pipe.delete(skey)
            else:
                pipe.set(skey, ts)
            await pipe.execute()

    # locks with fencing tokens -----------------------------------------------------------------

    async def acquire(self, name: str, ttl_ms: int) -> Fence | None:
        return await self.locks.acquire(name, ttl_ms)

    async def renew(self, fence: Fence, ttl_ms: int) -> bool:
        return await self.locks.renew(fence, ttl_ms)

    async def release(self, fence: Fence) -> None:
        await self.locks.release(fence)

    # audit, drains, confirmations ----------------------------------------------------------------

    async def audit(self, entry: dict[str, str]) -> None:
        await self.redis.xadd(self._k("audit"), entry, maxlen=AUDIT_MAXLEN, approximate=True)

    async def audit_entries(self, count: int = 100) -> list[dict[str, str]]:
        rows = await self.redis.xrevrange(self._k("audit"), count=count)
        return [dict(fields) for _id, fields in rows]

    async def record_drain(self, node: str, at_s: float) -> None:
        zkey = self._k("drains")
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(zkey, {f"{node}@{at_s:.3f}": at_s})
            pipe.zremrangebyscore(zkey, "-inf", at_s - 86400)
            await pipe.execute()

    async def drains_since(self, since_s: float) -> int:
        return int(await self.redis.zcount(self._k("drains"), since_s, "+inf"))

    async def claim_auto_drain(self, gid: str, node: str) -> bool:
        """True once per (group, node), across replicas: the auto-drain tries a node once."""
        key = self._k("autodrain", gid, node)
        return await claim_once(self.redis, key, AUTO_DRAIN_MEMORY_S)

    async def put_pending(self, pid: str, data: dict[str, Any], ttl_s: int) -> None:
        await self.redis.set(self._k("pending", pid), json.dumps(data), ex=ttl_s)

    async def take_pending(self, pid: str) -> dict[str, Any] | None:
        raw = await self.redis.getdel(self._k("pending", pid))
        return dict(json.loads(raw)) if raw else None

    async def watching(self, now: datetime, gap_s: float) -> datetime:
        """Records a sweep at `now`; when the unbroken run of sweeps it belongs to began,
        shared by every replica (one Lua call, so two replicas cannot both begin one)."""
        key_ = self._k("watch")
        since = await self.redis.eval(_WATCH, 1, key_, f"{now.timestamp():.3f}", str(gap_s))
        await self.redis.expire(key_, WATCH_TTL_S)
        return datetime.fromtimestamp(float(since), UTC)
