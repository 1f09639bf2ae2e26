"""Alertmanager's API v2: silences made from Slack go back to it; alerts can be posted to it.

Matchers are sent as structured JSON with `isRegex: false`, so a label value is compared as it
is and never parsed as a matcher expression.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp

from bot.backends.http import Deadline, request_json

NAME = "Alertmanager"


class AlertmanagerClient:
    def __init__(self, url: str, *, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use, inside the running loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        _, body = await request_json(
            self._http(),
            method,
            self.url + path,
            backend=NAME,
            deadline=Deadline(self.timeout_s),
            **kwargs,
        )
        return body

    async def create_silence(
        self, matchers: dict[str, str], duration_s: float, created_by: str, comment: str
    ) -> str:
        now = datetime.now(UTC)
        body = {
            "matchers": [
                {"name": k, "value": v, "isRegex": False, "isEqual": True}
                for k, v in sorted(matchers.items())
            ],
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(seconds=duration_s)).isoformat(),
            "createdBy": created_by,
            "comment": comment,
        }
        answer = await self._call("POST", "/api/v2/silences", json=body)
        return str(answer["silenceID"])

    async def silence_until(self, silence_id: str) -> datetime | None:
        answer = await self._call("GET", f"/api/v2/silence/{quote(silence_id, safe='')}")
        status = (answer or {}).get("status") or {}
        if status.get("state") not in {"active", "pending"}:
            return None
        try:
            return datetime.fromisoformat(str(answer.get("endsAt")).replace("Z", "+00:00"))
        except ValueError:
            return None

    async def silences(self, matchers: dict[str, str] | None = None) -> list[dict[str, Any]]:
        params = [("filter", f'{k}="{_quoted(v)}"') for k, v in sorted((matchers or {}).items())]
        answer = await self._call("GET", "/api/v2/silences", params=params)
        return list(answer or [])

    async def expire_silence(self, silence_id: str) -> None:
        await self._call("DELETE", f"/api/v2/silence/{quote(silence_id, safe='')}")

    async def status(self) -> dict[str, Any]:
        """Its version and cluster state (`GET /api/v2/status`)."""
        answer = await self._call("GET", "/api/v2/status")
        return answer if isinstance(answer, dict) else {}

    async def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        await self._call("POST", "/api/v2/alerts", json=alerts)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
