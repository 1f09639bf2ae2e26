"""The language model that picks a reading of an unsure question: a chat completion from an
OpenAI-compatible server, through the same client as the playground's checkpoint servers
(bot/backends/openai_compat.py), gathered whole within a deadline."""

from __future__ import annotations

import asyncio

from bot.backends.openai_compat import CheckpointServers
from bot.errors import BackendError
from bot.playground.config import Endpoint
from bot.playground.models import Mode, Prompt

MAX_TOKENS = 200


class ModelPicker:
    def __init__(self, servers: CheckpointServers, endpoint: Endpoint, model_id: str) -> None:
        self.servers, self.endpoint, self.model_id = servers, endpoint, model_id

    async def complete(self, system: str, prompt: str, *, deadline_s: float) -> str:
        asked = Prompt(
            run="ask",
            prompt=prompt,
            system=system,
            mode=Mode.CHAT,
            max_tokens=MAX_TOKENS,
            temperature=0.0,
            seed=0,
        )
        parts: list[str] = []

        async def gather() -> None:
            async for delta in self.servers.stream(
                self.endpoint,
                self.model_id,
                asked,
                first_token_s=deadline_s,
                stall_s=deadline_s,
                total_s=deadline_s,
            ):
                parts.append(delta.text)

        try:
            await asyncio.wait_for(gather(), deadline_s)
        except TimeoutError as exc:
            raise BackendError(
                f"The model server {self.endpoint.name}", f"did not answer within {deadline_s:g} s."
            ) from exc
        return "".join(parts)

    async def close(self) -> None:
        await self.servers.close()
