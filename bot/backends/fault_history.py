"""Where meowbot keeps each node's fault occurrences over weeks (bot/triage/repeats.py says why).

Redis: one string a node under `meowbot:<team>:triage:faults:<node>`, a JSON list of its
occurrences (cause, kind, GPU, first and last seen), and a sorted set
`meowbot:<team>:triage:faults:nodes` of the nodes with any, scored by their last write, for
the fleet's offenders. Bounded: a node keeps the occurrences seen in the last `keep_days` (90),
at most `max_per_node` (200, the newest); its key expires `keep_days` after its last write, and
the index drops nodes not written for as long. An occurrence is ~52 bytes of JSON: a node holds
at most ~10 KB, a fleet of 4,096 nodes at most ~43 MB, in practice far less (11,363 occurrences
on 1,629 nodes are 581 KB).
Shared by every replica; the in-process stand-in serves the terminal shell.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from bot.backends.state import key
from bot.errors import BackendError
from bot.models import FaultKind
from bot.triage.repeats import Occurrence, bounded

KEEP_DAYS = 90.0
MAX_PER_NODE = 200


def _dump(occurrences: Sequence[Occurrence]) -> str:
    return json.dumps(
        [
            [
                o.cause,
                o.kind.value,
                o.gpu,
                round(o.first_seen.timestamp(), 3),
                round(o.last_seen.timestamp(), 3),
            ]
            for o in occurrences
        ],
        separators=(",", ":"),
    )


def _load(node: str, raw: str) -> list[Occurrence]:
    out = []
    for cause, kind, gpu, first, last in json.loads(raw):
        try:
            fault_kind = FaultKind(kind)
        except ValueError:
            continue  # a kind this version no longer has
        out.append(
            Occurrence(
                cause=str(cause),
                kind=fault_kind,
                node=node,
                gpu=None if gpu is None else int(gpu),
                first_seen=datetime.fromtimestamp(float(first), UTC),
                last_seen=datetime.fromtimestamp(float(last), UTC),
            )
        )
    return out


def _load_all(nodes: Sequence[str], values: Sequence[str | None]) -> list[Occurrence]:
    return [o for n, raw in zip(nodes, values, strict=True) if raw for o in _load(n, raw)]


class RedisFaultHistory:
    def __init__(
        self,
        redis: aioredis.Redis,
        team: str = "",
        *,
        keep_days: float = KEEP_DAYS,
        max_per_node: int = MAX_PER_NODE,
    ) -> None:
        # Decoded string replies (decode_responses); redis-py's annotations are a union.
        self.redis: Any = redis
        self.team = team
        self.keep_days = keep_days
        self.max_per_node = max_per_node
        self.index = key(team, "triage", "faults", "nodes")
        self.began_key = key(team, "triage", "faults", "began")

    def _key(self, node: str) -> str:
        return key(self.team, "triage", "faults", node)

    async def occurrences(self, nodes: Sequence[str] | None) -> list[Occurrence]:
        try:
            if nodes is None:
                nodes = list(await self.redis.zrange(self.index, 0, -1))
            if not nodes:
                return []
            values = await self.redis.mget([self._key(n) for n in nodes])
        except aioredis.RedisError as exc:
            raise BackendError("Redis", f"could not read the fault history ({exc})") from exc
        # Decoded on a thread: a fleet's history is thousands of entries, tens of milliseconds
        # of the event loop's time for every /hw-faults.
        return await asyncio.to_thread(_load_all, nodes, values)

    async def began(self) -> datetime | None:
        try:
            raw = await self.redis.get(self.began_key)
        except aioredis.RedisError as exc:
            raise BackendError("Redis", f"could not read the fault history ({exc})") from exc
        try:
            return None if raw is None else datetime.fromtimestamp(float(raw), UTC)
        except ValueError:
            return None

    async def save(self, by_node: Mapping[str, Sequence[Occurrence]], now: datetime) -> None:
        ttl_s = max(1, int(self.keep_days * 86400))
        stamp = now.timestamp()
        try:
            if not by_node:
                # Only the mark of the first record: one SET NX, which every later save keeps.
                await self.redis.set(self.began_key, f"{stamp:.3f}", nx=True)
                return
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(self.began_key, f"{stamp:.3f}", nx=True)
                for node, occurrences in by_node.items():
                    kept = bounded(occurrences, now, self.keep_days, self.max_per_node)
                    if kept:
                        pipe.set(self._key(node), _dump(kept), ex=ttl_s)
                        pipe.zadd(self.index, {node: stamp})
                    else:
                        pipe.delete(self._key(node))
                        pipe.zrem(self.index, node)
                pipe.zremrangebyscore(self.index, "-inf", f"({stamp - ttl_s}")
                await pipe.execute()
        except aioredis.RedisError as exc:
            raise BackendError("Redis", f"could not save the fault history ({exc})") from exc


class MemoryFaultHistory:
    """One process's fault history (the terminal shell), bounded as Redis's."""

    def __init__(self, *, keep_days: float = KEEP_DAYS, max_per_node: int = MAX_PER_NODE) -> None:
        self.keep_days = keep_days
        self.max_per_node = max_per_node
        self._by_node: dict[str, list[Occurrence]] = {}
        self._began: datetime | None = None

    async def occurrences(self, nodes: Sequence[str] | None) -> list[Occurrence]:
        names = list(self._by_node) if nodes is None else nodes
        return [o for n in names for o in self._by_node.get(n, ())]

    async def began(self) -> datetime | None:
        return self._began

    async def save(self, by_node: Mapping[str, Sequence[Occurrence]], now: datetime) -> None:
        self._began = self._began or now
        for node, occurrences in by_node.items():
            kept = bounded(occurrences, now, self.keep_days, self.max_per_node)
            if kept:
                self._by_node[node] = kept
            else:
                self._by_node.pop(node, None)
