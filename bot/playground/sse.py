"""Server-sent events and OpenAI stream chunks, decoded without I/O.

Servers differ: vLLM ends a stream with `data: [DONE]`, `transformers serve` just closes it;
some send `usage` in a last chunk, most do not. Both ends mean the same here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"


class SseDecoder:
    """Feed bytes as they arrive; get the `data` of each complete event."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self._buffer += chunk
        events: list[str] = []
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                return events
            line = self._buffer[:cut].rstrip(b"\r").decode("utf-8", errors="replace")
            self._buffer = self._buffer[cut + 1 :]
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(":"):
                continue  # a comment, often a keep-alive
            field, _, value = line.partition(":")
            if field == "data":
                self._data.append(value[1:] if value.startswith(" ") else value)

    def close(self) -> list[str]:
        """What a stream closed without a blank line still held."""
        tail = self.feed(b"\n\n") if (self._buffer or self._data) else []
        return tail


@dataclass(frozen=True)
class Delta:
    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int | None = None  # from `usage`, when the server sends it
    error: str | None = None


def parse_chunk(data: str) -> Delta | None:
    """One event's data as a Delta; None for `[DONE]`. Chat (`delta.content`) and
    completion (`text`) chunks alike; an `error` object mid-stream is an error Delta."""
    if data.strip() == DONE:
        return None
    try:
        body: Any = json.loads(data)
    except ValueError:
        return Delta(error="sent a stream chunk that is not JSON")
    if not isinstance(body, dict):
        return Delta(error="sent a stream chunk that is not an object")
    if "error" in body:
        return Delta(error=error_text(body))
    text = ""
    finish: str | None = None
    for choice in body.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
            text += delta["content"]
        elif isinstance(choice.get("text"), str):
            text += choice["text"]
        finish = choice.get("finish_reason") or finish
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return Delta(
        text=text,
        finish_reason=finish,
        completion_tokens=tokens if isinstance(tokens, int) else None,
    )


def error_text(body: Any, fallback: str = "") -> str:
    """OpenAI's `{"error": {"message": ...}}`, FastAPI's `{"detail": ...}`, or the raw text."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return " ".join(str(err["message"]).split())[:200]
        if isinstance(err, str) and err:
            return " ".join(err.split())[:200]
        if body.get("detail"):
            return " ".join(str(body["detail"]).split())[:200]
    return " ".join(fallback.split())[:200]
