"""REDIS_URL read as people write it: one server, or the Sentinels that know the primary.

    redis://[[user]:password@]host[:port][/db]        one server (redis-py reads it)
    rediss://...                                      the same over TLS
    unix://[[user]:password@]/path/to/redis.sock[?db=N]
    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]

In the Sentinel form the hosts are Sentinels (port 26379 when left out; an IPv6 address goes in
brackets, `[::1]:26379`), `service` is the name the Sentinels monitor (`sentinel monitor
<service> ...`) and `db` the database number (0 when left out). The user and password, with
`%` escapes for reserved characters, are those of the primary and its replicas; the Sentinels
are asked without one. Nothing may follow the path (no `?options`, no `#fragment`).

Parsing is pure, so the settings check at start-up says exactly what is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
PLAIN_SCHEMES = ("redis", "rediss", "unix")

_HOST_PORT = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+))(?::(?P<port>.*))?$"
)


class BadRedisUrl(ValueError):
    """What is wrong with a REDIS_URL, in words for the person who wrote it."""


@dataclass(frozen=True)
class SentinelAddress:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None = field(repr=False)  # never in a log line


def sentinel_address(url: str) -> SentinelAddress | None:
    """The Sentinel form taken apart; None for a one-server URL (checked for its scheme and
    host only: redis-py parses the rest); BadRedisUrl saying what is wrong otherwise."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise BadRedisUrl("it has no scheme (redis://, rediss://, unix:// or redis+sentinel://)")
    if scheme in PLAIN_SCHEMES:
        if not re.match(r"^[^\s/]+|^/", rest) or not rest.strip("/"):
            raise BadRedisUrl(f"it names no server after {scheme}://")
        return None
    if scheme != SENTINEL_SCHEME:
        raise BadRedisUrl(f"its scheme {scheme!r} is none of redis, rediss, unix, redis+sentinel")
    if "?" in rest or "#" in rest:
        raise BadRedisUrl("the Sentinel form takes no ?options or #fragment")
    authority, _, path = rest.partition("/")
    creds, at, hosts = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = creds.partition(":")
        if not colon:
            raise BadRedisUrl("credentials go as user:password@ or :password@")
        username, password = unquote(user) or None, unquote(secret) or None
    sentinels = tuple(_sentinel(item) for item in hosts.split(","))
    service, _, db = path.partition("/")
    if not service:
        raise BadRedisUrl("the service name is missing after the Sentinels (.../mymaster/0)")
    if "/" in db:
        raise BadRedisUrl(f"only /service/db may follow the Sentinels, not /{path}")
    if db and not db.isdigit():
        raise BadRedisUrl(f"the database {db!r} is not a number")
    return SentinelAddress(sentinels, unquote(service), int(db or 0), username, password)


def _sentinel(item: str) -> tuple[str, int]:
    m = _HOST_PORT.match(item.strip())
    if not item.strip():
        raise BadRedisUrl("a Sentinel address is empty (hosts go as host:port,host:port)")
    if m is None:
        raise BadRedisUrl(f"{item!r} is not a Sentinel host:port")
    host = m.group("v6") or m.group("host")
    port = m.group("port")
    if port is None:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise BadRedisUrl(f"the port of {host} is not a number between 1 and 65535")
    return host, int(port)


def redacted(url: str) -> str:
    """The URL with its password shown as ***, for messages and logs."""
    return re.sub(r"(://[^/@]*?:)[^/@]*@", r"\1***@", url, count=1)
