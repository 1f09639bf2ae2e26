"""The playground's shared state in Redis (limits, sessions, cancels, watches), and an
in-process stand-in for the terminal shell."""

from __future__ import annotations

import redis.asyncio as aioredis

from bot import ticks
from bot.backends.state import key
from bot.playground.models import Watch
from bot.playground.ports import Limits, Refusal

SESSION_TTL_S = 7 * 86400
CANCEL_TTL_S = 3600
INFLIGHT_TTL_S = 900  # a replica that died mid-request frees its slots after this
WATCH_RUN_TTL_S = 30 * 86400

# Checks every limit and takes the slot in one step, so replicas cannot overshoot together.
_ACQUIRE = """
local user = tonumber(redis.call('get', KEYS[1]) or '0')
if user >= tonumber(ARGV[1]) then return {1, 0} end
local all = tonumber(redis.call('get', KEYS[2]) or '0')
if all >= tonumber(ARGV[2]) then return {2, 0} end
local rate = tonumber(redis.call('get', KEYS[3]) or '0')
if rate >= tonumber(ARGV[3]) then return {3, redis.call('pttl', KEYS[3])} end
redis.call('incr', KEYS[1]); redis.call('expire', KEYS[1], ARGV[4])
redis.call('incr', KEYS[2]); redis.call('expire', KEYS[2], ARGV[4])
if redis.call('incr', KEYS[3]) == 1 then redis.call('expire', KEYS[3], 60) end
return {0, 0}
"""
_RELEASE = """
for i, k in ipairs(KEYS) do
  if tonumber(redis.call('get', k) or '0') > 0 then redis.call('decr', k) end
end
return 0
"""


def refusal(code: int, wait_ms: int, limits: Limits) -> Refusal | None:
    if code == 1:
        return Refusal(
            f"You already have {limits.per_user} playground requests running: wait for one to "
            "finish, or press Cancel on it, then try again."
        )
    if code == 2:
        return Refusal(
            f"The playground is at its limit of {limits.global_cap} requests at once, to "
            "protect the serving fleet: try again in a minute."
        )
    if code == 3:
        seconds = max(1, round(wait_ms / 1000)) if wait_ms > 0 else 60
        return Refusal(
            f"You sent {limits.per_user_per_minute} playground requests this minute: try again "
            f"in {seconds} s."
        )
    return None


class RedisPlaygroundStore:
    def __init__(self, redis: aioredis.Redis, team: str = "") -> None:
        self.redis = redis
        self.team = team
        self._acquire = redis.register_script(_ACQUIRE)
        self._release = redis.register_script(_RELEASE)

    def _k(self, *parts: str) -> str:
        return key(self.team, "playground", *parts)

    async def acquire(self, user_id: str, limits: Limits) -> Refusal | None:
        keys = [self._k("inflight", user_id), self._k("inflight"), self._k("rate", user_id)]
        code, wait_ms = await self._acquire(
            keys=keys,
            args=[limits.per_user, limits.global_cap, limits.per_user_per_minute, INFLIGHT_TTL_S],
        )
        return refusal(int(code), int(wait_ms), limits)

    async def release(self, user_id: str) -> None:
        await self._release(keys=[self._k("inflight", user_id), self._k("inflight")], args=[])

    async def save_session(self, sid: str, data: str) -> None:
        await self.redis.set(self._k("session", sid), data, ex=SESSION_TTL_S)

    async def session(self, sid: str) -> str | None:
        value = await self.redis.get(self._k("session", sid))
        return str(value) if value is not None else None

    async def cancel(self, sid: str) -> None:
        await self.redis.set(self._k("cancel", sid), "1", ex=CANCEL_TTL_S)

    async def cancelled(self, sid: str) -> bool:
        return bool(await self.redis.exists(self._k("cancel", sid)))

    async def add_watch(self, watch: Watch) -> None:
        await self.redis.hset(self._k("watches"), watch.id, watch.model_dump_json())

    async def watches(self) -> list[Watch]:
        rows = await self.redis.hgetall(self._k("watches"))
        return sorted(
            (Watch.model_validate_json(v) for v in rows.values()), key=lambda w: w.created
        )

    async def remove_watch(self, watch_id: str) -> bool:
        return bool(await self.redis.hdel(self._k("watches"), watch_id))

    async def set_watch_step(self, watch_id: str, step: int) -> None:
        raw = await self.redis.hget(self._k("watches"), watch_id)
        if raw is None:
            return
        watch = Watch.model_validate_json(raw)
        if step > watch.last_step:
            updated = watch.model_copy(update={"last_step": step})
            await self.redis.hset(self._k("watches"), watch_id, updated.model_dump_json())

    async def claim_watch_run(self, watch_id: str, step: int) -> bool:
        k = self._k("watchrun", watch_id, str(step))
        return bool(await self.redis.set(k, "1", nx=True, ex=WATCH_RUN_TTL_S))


class MemoryPlaygroundStore:
    """One replica's stand-in (the terminal shell without REDIS_URL)."""

    def __init__(self) -> None:
        self._inflight: dict[str, int] = {}
        self._rate: dict[str, list[float]] = {}
        self._sessions: dict[str, str] = {}
        self._cancelled: set[str] = set()
        self._watches: dict[str, Watch] = {}
        self._runs: set[tuple[str, int]] = set()

    async def acquire(self, user_id: str, limits: Limits) -> Refusal | None:
        now = ticks.now()
        recent = [t for t in self._rate.get(user_id, []) if now - t < 60]
        if self._inflight.get(user_id, 0) >= limits.per_user:
            return refusal(1, 0, limits)
        if sum(self._inflight.values()) >= limits.global_cap:
            return refusal(2, 0, limits)
        if len(recent) >= limits.per_user_per_minute:
            return refusal(3, int((60 - (now - recent[0])) * 1000), limits)
        self._rate[user_id] = [*recent, now]
        self._inflight[user_id] = self._inflight.get(user_id, 0) + 1
        return None

    async def release(self, user_id: str) -> None:
        self._inflight[user_id] = max(0, self._inflight.get(user_id, 0) - 1)

    async def save_session(self, sid: str, data: str) -> None:
        self._sessions[sid] = data

    async def session(self, sid: str) -> str | None:
        return self._sessions.get(sid)

    async def cancel(self, sid: str) -> None:
        self._cancelled.add(sid)

    async def cancelled(self, sid: str) -> bool:
        return sid in self._cancelled

    async def add_watch(self, watch: Watch) -> None:
        self._watches[watch.id] = watch

    async def watches(self) -> list[Watch]:
        return sorted(self._watches.values(), key=lambda w: w.created)

    async def remove_watch(self, watch_id: str) -> bool:
        return self._watches.pop(watch_id, None) is not None

    async def set_watch_step(self, watch_id: str, step: int) -> None:
        watch = self._watches.get(watch_id)
        if watch is not None and step > watch.last_step:
            self._watches[watch_id] = watch.model_copy(update={"last_step": step})

    async def claim_watch_run(self, watch_id: str, step: int) -> bool:
        if (watch_id, step) in self._runs:
            return False
        self._runs.add((watch_id, step))
        return True
