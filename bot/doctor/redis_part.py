"""The doctor's Redis lines: reachable, its version, a Sentinel's primary and replicas, and
whether what meowbot keeps there (open alerts, highlights, fault history) survives a restart."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import RedisError

from bot.backends.redis_client import close_client, redis_client
from bot.doctor.report import Line, Status
from bot.redis_url import SentinelAddress, sentinel_address

PART = "Redis"
TIMEOUT_S = 3.0
MIN_VERSION = (6, 2)  # SET ... GET (the locks' acquire) came in 6.2


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def server_lines(info: dict[str, Any], save: str) -> list[Line]:
    """From INFO (server and persistence sections) and CONFIG GET save: version and
    persistence. `save` is "" when snapshots are off, "?" when CONFIG is not allowed."""
    version = str(info.get("redis_version", "?"))
    lines = [
        Line(PART, "version", Status.PASS, version)
        if _version(version) >= MIN_VERSION
        else Line(
            PART,
            "version",
            Status.FAIL,
            f"{version} is older than {'.'.join(map(str, MIN_VERSION))}",
            "run Redis 6.2 or newer (meowbot's locks use SET ... GET)",
        )
    ]
    aof = str(info.get("aof_enabled", "0")) == "1"
    if aof or (save and save != "?"):
        how = " and ".join(
            w for w, on in (("append-only file", aof), (f"snapshots ({save})", save)) if on
        )
        lines.append(Line(PART, "persistence", Status.PASS, how))
    elif save == "?":
        lines.append(
            Line(
                PART,
                "persistence",
                Status.WARN,
                "no append-only file, and CONFIG GET is not allowed to see snapshots",
                "make sure the server persists: open alerts and highlights live there",
            )
        )
    else:
        lines.append(
            Line(
                PART,
                "persistence",
                Status.WARN,
                "off: a restart of Redis forgets open alerts, highlights and fault history",
                "turn on appendonly or snapshots (save 60 1000)",
            )
        )
    return lines


async def _sentinel_lines(address: SentinelAddress) -> list[Line]:
    sentinel = Sentinel(
        address.sentinels,
        sentinel_kwargs={"socket_timeout": TIMEOUT_S, "socket_connect_timeout": TIMEOUT_S},
        username=address.username,
        password=address.password,
    )
    try:
        primary = await sentinel.discover_master(address.service)
        replicas = await sentinel.discover_slaves(address.service)
    except RedisError as exc:
        return [
            Line(
                PART,
                "Sentinel",
                Status.FAIL,
                f"no Sentinel names a primary for {address.service!r}: {exc}",
                "check the Sentinels' addresses and the service name in REDIS_URL",
            )
        ]
    finally:
        for s in sentinel.sentinels:
            await s.aclose()
    said = f"primary {primary[0]}:{primary[1]}, {len(replicas)} replica(s)"
    if not replicas:
        return [
            Line(
                PART,
                "Sentinel",
                Status.WARN,
                said,
                "add a replica: without one a failover has nowhere to go",
            )
        ]
    return [Line(PART, "Sentinel", Status.PASS, said)]


async def redis_lines(url: str | None) -> list[Line]:
    if not url:
        return [
            Line(
                PART,
                "server",
                Status.WARN,
                "REDIS_URL is not set: state lives in this process and dies with it, "
                "and only one replica can run",
                "set REDIS_URL (redis://host:6379/0, or redis+sentinel://...)",
            )
        ]
    address = sentinel_address(url)
    server: aioredis.Redis = redis_client(url, timeout_s=TIMEOUT_S, retry_budget_s=0.0)
    try:
        await server.ping()
        info = await server.info()
        try:
            save = str((await server.config_get("save")).get("save", ""))
        except RedisError:
            save = "?"
    except (RedisError, OSError) as exc:
        return [
            Line(
                PART,
                "server",
                Status.FAIL,
                f"unreachable: {exc}",
                "start Redis, or correct REDIS_URL",
            )
        ]
    finally:
        await close_client(server)
    lines = [Line(PART, "server", Status.PASS, "reachable")]
    if address is not None:
        lines.extend(await _sentinel_lines(address))
    return lines + server_lines(info, save)
