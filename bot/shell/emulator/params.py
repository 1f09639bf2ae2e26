"""Reading Web API arguments as Slack does: timestamps, time windows, cursors, booleans sent
as strings, `limit`, required fields."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from bot.shell.emulator.errors import SlackError, invalid_arguments

TS_RE = re.compile(r"^\d{9,11}\.\d{6}$")


def ts_us(ts: str) -> int:
    """A message ts as integer microseconds, to order and compare without float error."""
    secs, _, frac = ts.partition(".")
    return int(secs) * 1_000_000 + int((frac + "000000")[:6])


def fmt_ts(us: int) -> str:
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _bound_us(value: Any, what: str) -> int:
    try:
        return int(Decimal(str(value)) * 1_000_000)
    except (InvalidOperation, ValueError):
        raise invalid_arguments(f"invalid {what}: {value!r}") from None


def time_window(args: dict[str, Any]) -> Callable[[int], bool]:
    """`oldest`, `latest` and `inclusive` of conversations.history/replies, as a test on a ts."""
    inclusive = truthy(args.get("inclusive"))
    oldest = _bound_us(args.get("oldest") or 0, "oldest")
    latest_raw = args.get("latest")
    latest = _bound_us(latest_raw, "latest") if latest_raw else None

    def inside(us: int) -> bool:
        if (us < oldest) if inclusive else (us <= oldest):
            return False
        return latest is None or ((us <= latest) if inclusive else (us < latest))

    return inside


def truthy(value: Any) -> bool:
    """A boolean argument, which form posts send as a string."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def encode_cursor(kind: str, value: str) -> str:
    return base64.b64encode(f"{kind}:{value}".encode()).decode()


def decode_cursor(cursor: str, kind: str) -> str:
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        raise SlackError("invalid_cursor") from None
    prefix, sep, value = decoded.partition(":")
    if not sep or prefix != kind:
        raise SlackError("invalid_cursor")
    return value


def required(args: dict[str, Any], *keys: str) -> None:
    missing = [k for k in keys if args.get(k) in (None, "")]
    if missing:
        raise invalid_arguments(*(f"missing required field: {k}" for k in missing))


def page_limit(args: dict[str, Any], default: int, maximum: int) -> int:
    """The `limit` argument of a paginated method: 0 or absent means `default`."""
    raw = args.get("limit")
    if raw in (None, "", 0, "0"):
        return default
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        raise SlackError("invalid_limit") from None
    if limit < 1:
        raise SlackError("invalid_limit")
    return min(limit, maximum)
