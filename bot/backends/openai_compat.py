"""OpenAI-compatible checkpoint servers (vLLM, SGLang, TGI, llama.cpp, transformers serve):
`GET /v1/models`, and completions or chat completions streamed over SSE.

One aiohttp session for all endpoints. Listing retries what a retry can mend, bounded by a
deadline; a stream is never retried (it would repeat text), and is cut when no token comes for
`stall_s`. Errors are sentences naming the endpoint: servers answer errors in OpenAI's shape,
FastAPI's, or as plain text (`transformers serve` answers an unknown model with a bare 500).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp

from bot.backends.http import Deadline, request_json
from bot.errors import BackendError, StreamStalled
from bot.playground.catalog import ServedModel
from bot.playground.config import Endpoint
from bot.playground.models import Mode, Prompt
from bot.playground.sse import Delta, SseDecoder, error_text, parse_chunk


def _backend(endpoint: Endpoint) -> str:
    return f"The checkpoint server {endpoint.name}"


def _headers(endpoint: Endpoint) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if endpoint.api_key is not None:
        headers["Authorization"] = f"Bearer {endpoint.api_key.get_secret_value()}"
    return headers


def request_body(prompt: Prompt, model_id: str) -> tuple[str, dict[str, Any]]:
    """The path (under the endpoint's /v1) and JSON body of one streamed request."""
    body: dict[str, Any] = {
        "model": model_id,
        "max_tokens": prompt.max_tokens,
        "temperature": prompt.temperature,
        "stream": True,
    }
    if prompt.seed is not None:
        body["seed"] = prompt.seed
    if prompt.mode is Mode.CHAT:
        messages = [{"role": "system", "content": prompt.system}] if prompt.system else []
        messages.append({"role": "user", "content": prompt.prompt})
        body["messages"] = messages
        return "/chat/completions", body
    text = f"{prompt.system}\n\n{prompt.prompt}" if prompt.system else prompt.prompt
    body["prompt"] = text
    return "/completions", body


class CheckpointServers:
    def __init__(self, *, session: aiohttp.ClientSession | None = None) -> None:
        self._session = session
        self._own = session is None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def models(self, endpoint: Endpoint, timeout_s: float = 5.0) -> list[ServedModel]:
        _, body = await request_json(
            self.session,
            "GET",
            f"{endpoint.url}/models",
            backend=_backend(endpoint),
            deadline=Deadline(timeout_s),
            headers=_headers(endpoint),
        )
        rows = body.get("data") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise BackendError(_backend(endpoint), "answered /v1/models without a model list.")
        out: list[ServedModel] = []
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                continue
            created = row.get("created")
            meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
            assert isinstance(meta, dict)
            loss = meta.get("loss", row.get("loss"))
            tokens = meta.get("tokens_seen", row.get("tokens_seen"))
            out.append(
                ServedModel(
                    endpoint=endpoint.url,
                    model_id=row["id"],
                    created=datetime.fromtimestamp(created, UTC)
                    if isinstance(created, int | float) and created > 0
                    else None,
                    loss=float(loss) if isinstance(loss, int | float) else None,
                    tokens_seen=int(tokens) if isinstance(tokens, int) else None,
                )
            )
        return out

    async def stream(
        self,
        endpoint: Endpoint,
        model_id: str,
        prompt: Prompt,
        *,
        first_token_s: float,
        stall_s: float,
        total_s: float,
    ) -> AsyncIterator[Delta]:
        """The deltas of one streamed answer; BackendError (StreamStalled) on failure."""
        path, body = request_body(prompt, model_id)
        backend = _backend(endpoint)
        headers = {**_headers(endpoint), "Accept": "text/event-stream"}
        timeout = aiohttp.ClientTimeout(total=total_s, sock_connect=min(5.0, total_s))
        try:
            async with self.session.post(
                f"{endpoint.url}{path}", json=body, headers=headers, timeout=timeout
            ) as resp:
                if resp.status != 200:
                    text = await resp.text()
                    try:
                        parsed: Any = json.loads(text)
                    except ValueError:
                        parsed = None
                    detail = error_text(parsed, text)
                    raise BackendError(
                        backend,
                        f"answered HTTP {resp.status}" + (f": {detail}." if detail else "."),
                    )
                decoder = SseDecoder()
                wait = first_token_s
                while True:
                    try:
                        chunk = await asyncio.wait_for(resp.content.readany(), wait)
                    except TimeoutError as exc:
                        raise StreamStalled(
                            backend, f"sent nothing for {wait:g} s; the stream was cut."
                        ) from exc
                    wait = stall_s
                    events = decoder.feed(chunk) if chunk else decoder.close()
                    for data in events:
                        delta = parse_chunk(data)
                        if delta is None:
                            return
                        if delta.error:
                            raise BackendError(backend, f"failed mid-answer: {delta.error}.")
                        yield delta
                    if not chunk:
                        return  # closed without [DONE]: transformers serve does that
        except TimeoutError as exc:
            raise BackendError(backend, f"did not finish within {total_s:g} s.") from exc
        except aiohttp.ClientConnectionError as exc:
            raise BackendError(backend, "cannot be reached or dropped the stream.") from exc
        except aiohttp.ClientError as exc:
            raise BackendError(backend, f"failed: {type(exc).__name__}.") from exc

    async def close(self) -> None:
        if self._own and self._session is not None and not self._session.closed:
            await self._session.close()
