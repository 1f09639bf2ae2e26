"""The playground's test server: real in-training checkpoints behind a real `transformers serve`.

scripts/testsvc/checkpoints.py trains the tiny run (`meowbot demo-checkpoints`), puts steps
100-400 under PLAYGROUND_TEST_DIR/<PLAYGROUND_TEST_RUN>/, holds step 500 back in
PLAYGROUND_TEST_NEXT, and starts `transformers serve` at PLAYGROUND_TEST_URL (ending in /v1).
No mocks. These tests pin down what a client of this server can rely on, including where it
departs from OpenAI's API (real-world gaps the playground must tolerate):

- A checkpoint is served by its absolute path as the model id, also one written after the
  server started; nothing has to be registered.
- `GET /v1/models` lists only the checkpoints loaded so far (by a request), not the folder: the
  folder (`PLAYGROUND_CHECKPOINT_DIRS`) is how to discover them.
- Streams (`stream: true`) are SSE `data: {json}` events, one blank line apart, and end
  without `data: [DONE]`: the last event is the one with a `finish_reason` ("length" when
  max_tokens was reached, "stop" at the end-of-text token), or the usage chunk (`choices: []`)
  after it when `stream_options.include_usage` is set. Completion chunks carry
  `choices[0].text` (no `finish_reason` key until the last); chat chunks start with a
  `delta: {"role": "assistant"}` chunk, then `delta.content` pieces, then an empty delta with
  the `finish_reason`.
- Errors are not in OpenAI's shape: an unknown model is a plain `500 Internal Server Error`
  (text/plain). A failure mid-stream is an event `data: {"error": "<text>"}` and the end of the
  stream; without max_tokens the server asks for 1024 new tokens, past this model's 128
  positions, which fails that way (a 500 when not streaming): always send max_tokens.
- temperature 0 is greedy; with a temperature above 0 the checkpoints sample (their
  generation_config says so), and the same `seed` gives the same text (the seed is set in the
  server's one model process: requests in flight at once share the random numbers).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.cli import main
from tests.conftest import IN_CI, need_service

PROMPT = "Beautiful is better than"
TIMEOUT = aiohttp.ClientTimeout(total=60)
# The starter's first completion loaded this one. Loading a checkpoint costs its first request
# 4 s or more (the server spawns a process for each model, about 430 MB, which imports torch),
# so the tests use it wherever any checkpoint will do.
WARM = 100


@dataclass(frozen=True)
class Served:
    url: str
    run_dir: Path
    next_step: Path

    def step(self, n: int) -> str:
        return str(self.run_dir / f"step-{n}")


@pytest.fixture
def served() -> Served:
    url = need_service("PLAYGROUND_TEST_URL")
    root = Path(need_service("PLAYGROUND_TEST_DIR"))
    return Served(
        url, root / need_service("PLAYGROUND_TEST_RUN"), Path(need_service("PLAYGROUND_TEST_NEXT"))
    )


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        yield session


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body) as resp:
        assert resp.status == 200, await resp.text()
        answer: dict[str, Any] = await resp.json()
        return answer


async def sse_events(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[list[str], list[dict[str, Any]]]:
    """(every line of the stream, the decoded data events in order)."""
    lines: list[str] = []
    async with http.post(url, json={**body, "stream": True}) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        async for raw in resp.content:
            lines.append(raw.decode().rstrip("\r\n"))
    events = [json.loads(line.removeprefix("data: ")) for line in lines if line]
    return lines, events


def publish(source: Path, run_dir: Path, step: int) -> Path:
    """Writes a checkpoint beside its place, then renames it in, as a trainer on shared storage
    should: the folder appears whole."""
    staging = run_dir.parent / f".{run_dir.name}-step-{step}.partial"
    shutil.copytree(source, staging)
    run_dir.mkdir(parents=True, exist_ok=True)
    final = run_dir / f"step-{step}"
    os.rename(staging, final)
    return final


async def test_completion_by_absolute_path(served: Served, http: aiohttp.ClientSession) -> None:
    model = served.step(WARM)
    body = {"model": model, "prompt": PROMPT, "max_tokens": 8, "temperature": 0}
    answer = await post(http, f"{served.url}/completions", body)
    assert answer["object"] == "text_completion"
    assert answer["model"] == model
    (choice,) = answer["choices"]
    assert choice["text"].strip()
    assert choice["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 8


async def test_chat_completion_by_absolute_path(
    served: Served, http: aiohttp.ClientSession
) -> None:
    model = served.step(WARM)
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": "The Zen of Python"},
            {"role": "user", "content": PROMPT},
        ],
        "max_tokens": 8,
        "temperature": 0,
    }
    answer = await post(http, f"{served.url}/chat/completions", body)
    assert answer["object"] == "chat.completion"
    assert answer["model"] == model
    (choice,) = answer["choices"]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"].strip()
    assert choice["finish_reason"] == "length"


async def test_completion_stream_ends_without_done(
    served: Served, http: aiohttp.ClientSession
) -> None:
    model = served.step(WARM)
    body = {"model": model, "prompt": PROMPT, "max_tokens": 12, "temperature": 0}
    whole = await post(http, f"{served.url}/completions", body)
    lines, events = await sse_events(http, f"{served.url}/completions", body)

    assert all(line.startswith("data: {") for line in lines if line)
    assert "data: [DONE]" not in lines
    assert {e["object"] for e in events} == {"text_completion"}
    assert len({e["id"] for e in events}) == 1
    *pieces, last = events
    assert pieces and all("finish_reason" not in e["choices"][0] for e in pieces)
    assert last["choices"][0] == {"index": 0, "text": "", "finish_reason": "length"}
    streamed = "".join(e["choices"][0]["text"] for e in events)
    assert streamed == whole["choices"][0]["text"]


async def test_chat_stream_ends_without_done(served: Served, http: aiohttp.ClientSession) -> None:
    model = served.step(WARM)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 6,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    lines, events = await sse_events(http, f"{served.url}/chat/completions", body)

    assert "data: [DONE]" not in lines
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    first, *pieces, finish, usage = events
    assert first["choices"][0]["delta"] == {"role": "assistant"}
    assert pieces and all(set(e["choices"][0]["delta"]) == {"content"} for e in pieces)
    assert finish["choices"][0]["delta"] == {}
    assert finish["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 6
    assert "".join(e["choices"][0]["delta"]["content"] for e in pieces).strip()


async def test_unknown_model_is_a_plain_500(served: Served, http: aiohttp.ClientSession) -> None:
    missing = str(served.run_dir / "step-999")
    body = {"model": missing, "prompt": PROMPT, "max_tokens": 2}
    async with http.post(f"{served.url}/completions", json=body) as resp:
        assert resp.status == 500
        assert resp.headers["Content-Type"].startswith("text/plain")
        assert await resp.text() == "Internal Server Error"


async def test_without_max_tokens_the_stream_ends_in_an_error_event(
    served: Served, http: aiohttp.ClientSession
) -> None:
    body = {"model": served.step(WARM), "prompt": PROMPT, "temperature": 0}
    lines, events = await sse_events(http, f"{served.url}/completions", body)
    assert "data: [DONE]" not in lines
    *pieces, error = events
    assert pieces and all("text" in e["choices"][0] for e in pieces)
    assert set(error) == {"error"}
    assert "index out of range" in error["error"]


async def test_seed_and_temperature(served: Served, http: aiohttp.ClientSession) -> None:
    url = f"{served.url}/completions"
    base = {"model": served.step(WARM), "prompt": PROMPT, "max_tokens": 16}

    async def text(**settings: Any) -> str:
        return str((await post(http, url, {**base, **settings}))["choices"][0]["text"])

    greedy = await text(temperature=0)
    assert await text(temperature=0, seed=5) == greedy
    hot = [await text(temperature=2.0, seed=s) for s in (1, 1, 2, 3, 4)]
    assert hot[0] == hot[1]
    assert len(set(hot[1:])) > 1


async def test_a_checkpoint_published_after_start_is_served_and_then_listed(
    served: Served, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # The held-back step 500 is copied, not moved: PLAYGROUND_TEST_NEXT stays for a test
    # that publishes it into PLAYGROUND_TEST_DIR itself. A fresh path: nobody loaded it yet.
    newest = str(publish(served.next_step, tmp_path / "tiny-zen", 500))

    async def model_ids() -> set[str]:
        async with http.get(f"{served.url}/models") as resp:
            assert resp.status == 200
            return {m["id"] for m in (await resp.json())["data"]}

    assert newest not in await model_ids()
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0}
    early = await post(http, f"{served.url}/completions", {**body, "model": served.step(100)})
    late = await post(http, f"{served.url}/completions", {**body, "model": newest})
    assert late["model"] == newest
    # Trained 500 steps on the Zen of Python, the run knows its first line by heart.
    assert late["choices"][0]["text"].startswith(" ugly.")
    assert late["choices"][0]["text"] != early["choices"][0]["text"]
    assert newest in await model_ids()


def test_trainer_state_losses_fall(served: Served) -> None:
    # Steps 100-400 as the server started with them (a test may have published 500 since),
    # and the held-back 500.
    folders = [served.run_dir / f"step-{n}" for n in (100, 200, 300, 400)] + [served.next_step]
    assert all(p.is_dir() for p in folders)
    assert [p.name for p in folders] == [f"step-{n}" for n in (100, 200, 300, 400, 500)]
    finals = []
    for folder in folders:
        state = json.loads((folder / "trainer_state.json").read_text())
        step = int(folder.name.split("-")[1])
        assert state["global_step"] == step
        history = state["log_history"]
        steps = [entry["step"] for entry in history]
        assert steps == sorted(steps) and steps[0] == 1 and steps[-1] == step
        losses = [entry["loss"] for entry in history]
        assert losses[0] > 7.0  # about ln(2048): the untrained model guesses uniformly
        assert losses[-1] < losses[0]
        finals.append(losses[-1])
        files = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json")
        for name in files:
            assert (folder / name).is_file(), name
    assert finals[-1] < finals[0]
    assert finals[-1] < 0.3


def _weights(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_a_short_run_writes_checkpoints_the_same_each_time(tmp_path: Path) -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        if IN_CI:
            raise
        pytest.skip("torch and transformers are not installed: `make test` installs them")
    runs = []
    for name in ("a", "b"):
        args = ["demo-checkpoints", "--out", str(tmp_path), "--run", name, "--steps", "4"]
        assert main([*args, "--every", "2", "--seed", "3"]) == 0
        runs.append(tmp_path / name)
    for run in runs:
        assert sorted(p.name for p in run.iterdir()) == ["step-2", "step-4"]
        state = json.loads((run / "step-4" / "trainer_state.json").read_text())
        assert state["global_step"] == 4
        assert [e["step"] for e in state["log_history"]] == [1, 4]
        assert all(e["loss"] > 0 for e in state["log_history"])
        assert (run / "step-4" / "tokenizer.json").is_file()
    assert _weights(runs[0] / "step-4") == _weights(runs[1] / "step-4")
    assert _weights(runs[0] / "step-2") != _weights(runs[0] / "step-4")
