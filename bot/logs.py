"""JSON-lines logging with secrets redacted.

Tokens are `SecretStr` in the settings, but a library may still log a URL or a header: the
filter below masks anything shaped like a Slack token or a bearer header as a last line.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

_SECRET_RE = re.compile(r"(xox[abpr]-|xapp-)[A-Za-z0-9-]+|(Bearer\s+)[A-Za-z0-9._~+/=-]+")
_STD_ATTRS = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


def redact(text: str) -> str:
    return _SECRET_RE.sub(lambda m: (m.group(1) or m.group(2)) + "***", text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STD_ATTRS and not key.startswith("_"):
                entry[key] = value if isinstance(value, int | float | bool) else redact(str(value))
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str = "info", *, stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Bolt and slack_sdk are chatty at INFO about every request; keep them at warning.
    for noisy in ("slack_bolt", "slack_sdk", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
