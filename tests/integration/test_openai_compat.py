"""The checkpoint-server client against small real HTTP servers on loopback that behave as
servers do when they misbehave: a stream that stalls, OpenAI-shaped and bare errors, `[DONE]`
with usage, and a model list with metadata. (The real `transformers serve` is in
test_checkpoint_server.py and the e2e tests.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bot.backends.openai_compat import CheckpointServers
from bot.errors import BackendError, StreamStalled
from bot.playground.config import Endpoint
from bot.playground.models import Mode, Prompt

PROMPT = Prompt(run="r", prompt="hi", max_tokens=8, temperature=0)


async def _sse(
    request: web.Request, chunks: list[str], stall_after: int | None
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i, data in enumerate(chunks):
        if stall_after is not None and i == stall_after:
            await asyncio.sleep(2)  # longer than the stall limit the test sets
        await resp.write(f"data: {data}\n\n".encode())
    return resp


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": "run/step-100", "created": 1796000000, "meta": {"loss": 1.25}},
                    {"id": "run/step-200", "created": 0},
                    {"no": "id"},
                ],
            }
        )

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = body["model"]
        if model == "missing":
            return web.json_response(
                {"error": {"message": "The model `missing` does not exist.", "code": 404}},
                status=404,
            )
        if model == "bare":
            return web.Response(status=500, text="Internal Server Error")
        text = [json.dumps({"choices": [{"text": t}]}) for t in ("a", "b", "c")]
        if model == "stall":
            return await _sse(request, text, stall_after=1)
        if model == "error-mid":
            return await _sse(request, [text[0], json.dumps({"error": "CUDA out of memory"})], None)
        done = json.dumps(
            {"choices": [{"text": "", "finish_reason": "stop"}], "usage": {"completion_tokens": 3}}
        )
        return await _sse(request, [*text, done, "[DONE]", text[0]], None)

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["messages"][0] == {"role": "system", "content": "be brief"}
        deltas = [json.dumps({"choices": [{"delta": {"content": t}}]}) for t in ("x", "y")]
        return await _sse(request, deltas, None)  # closes without [DONE]

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


async def collect(
    client: CheckpointServers, url: str, model: str, prompt: Prompt = PROMPT, stall: float = 5.0
) -> list[str]:
    out = []
    async for d in client.stream(
        Endpoint(url=url), model, prompt, first_token_s=stall, stall_s=stall, total_s=10
    ):
        out.append(d.text)
    return out


async def test_streams_stop_at_done_and_without_it(server: str) -> None:
    client = CheckpointServers()
    try:
        assert "".join(await collect(client, server, "ok")) == "abc"  # nothing after [DONE]
        chat = Prompt(run="r", prompt="hi", system="be brief", mode=Mode.CHAT, max_tokens=4)
        assert "".join(await collect(client, server, "ok", chat)) == "xy"
    finally:
        await client.close()


async def test_a_stalled_stream_is_cut_and_errors_are_sentences(server: str) -> None:
    client = CheckpointServers()
    try:
        with pytest.raises(StreamStalled, match=r"sent nothing for 0\.3 s"):
            await collect(client, server, "stall", stall=0.3)
        with pytest.raises(BackendError, match="HTTP 404: The model `missing` does not exist"):
            await collect(client, server, "missing")
        with pytest.raises(BackendError, match="HTTP 500: Internal Server Error"):
            await collect(client, server, "bare")
        with pytest.raises(BackendError, match="failed mid-answer: CUDA out of memory"):
            await collect(client, server, "error-mid")
        with pytest.raises(BackendError, match="cannot be reached"):
            await collect(client, "http://127.0.0.1:9/v1", "ok")
    finally:
        await client.close()


async def test_models_are_listed_with_their_metadata(server: str) -> None:
    client = CheckpointServers()
    try:
        models = await client.models(Endpoint(url=server))
        assert [m.model_id for m in models] == ["run/step-100", "run/step-200"]
        assert models[0].loss == 1.25 and models[0].created is not None
        assert models[1].created is None
        with pytest.raises(BackendError, match="cannot be reached"):
            await client.models(Endpoint(url="http://127.0.0.1:9/v1"), timeout_s=1)
    finally:
        await client.close()
