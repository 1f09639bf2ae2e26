"""REDIS_URL's grammar (bot/redis_url.py): the Sentinel form taken apart, and what a wrong one
is told at start-up."""

from __future__ import annotations

import re

import pytest

from bot.config import ConfigError, load_settings
from bot.redis_url import BadRedisUrl, SentinelAddress, redacted, sentinel_address


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "redis+sentinel://s1:26379,s2:26380/mymaster/0",
            SentinelAddress((("s1", 26379), ("s2", 26380)), "mymaster", 0, None, None),
        ),
        (
            "redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379/mymaster/3",
            SentinelAddress((("10.0.0.1", 26379), ("10.0.0.2", 26379)), "mymaster", 3, None, "pw"),
        ),
        (
            "redis+sentinel://bot:p%40ss%2Fw@[::1],sentinel-2.internal/cache",
            SentinelAddress(
                (("::1", 26379), ("sentinel-2.internal", 26379)), "cache", 0, "bot", "p@ss/w"
            ),
        ),
    ],
)
def test_the_sentinel_form(url: str, expected: SentinelAddress) -> None:
    assert sentinel_address(url) == expected


@pytest.mark.parametrize(
    "url", ["redis://cache:6379/0", "rediss://:pw@cache:6380/1", "unix:///run/redis.sock?db=2"]
)
def test_one_server_urls_are_left_to_redis_py(url: str) -> None:
    assert sentinel_address(url) is None
    assert load_settings(REDIS_URL=url).redis_url == url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("cache:6379", "it has no scheme"),
        ("http://cache:6379", "its scheme 'http' is none of redis, rediss, unix, redis+sentinel"),
        ("redis://", "it names no server after redis://"),
        ("redis+sentinel://s1:26379,s2:26379", "the service name is missing"),
        ("redis+sentinel://s1:26379/", "the service name is missing"),
        ("redis+sentinel://s1:26379,/mymaster", "a Sentinel address is empty"),
        ("redis+sentinel://s1:port/mymaster", "the port of s1 is not a number"),
        ("redis+sentinel://s1:70000/mymaster", "the port of s1 is not a number"),
        ("redis+sentinel://s 1/mymaster", "'s 1' is not a Sentinel host:port"),
        ("redis+sentinel://s1/mymaster/zero", "the database 'zero' is not a number"),
        ("redis+sentinel://s1/mymaster/0/x", "only /service/db may follow"),
        ("redis+sentinel://s1/mymaster?ssl=true", "takes no ?options"),
        ("redis+sentinel://secret@s1/mymaster", "credentials go as user:password@"),
    ],
)
def test_a_wrong_url_is_told_what_is_wrong(url: str, why: str) -> None:
    with pytest.raises(BadRedisUrl, match=re.escape(why)):
        sentinel_address(url)
    with pytest.raises(ConfigError) as err:
        load_settings(REDIS_URL=url)
    message = str(err.value)
    assert message.startswith("REDIS_URL must be a URL like redis://host:6379/0 or redis+sentinel")
    assert why in message and "\n" not in message


def test_the_password_is_never_shown() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(REDIS_URL="redis+sentinel://:hunter2@s1:x/mymaster")
    assert "hunter2" not in str(err.value) and ":***@s1:x" in str(err.value)
    assert "hunter2" not in repr(sentinel_address("redis+sentinel://:hunter2@s1/m"))
    assert redacted("redis://u:hunter2@cache:6379/0") == "redis://u:***@cache:6379/0"
    assert redacted("redis+sentinel://s1,s2/m") == "redis+sentinel://s1,s2/m"
