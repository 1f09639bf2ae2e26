"""The optional model for unsure questions, against a real OpenAI-compatible server (the test
checkpoint server: a tiny model whose answers are poor, so what is tested is that a pick is
only taken when it holds, and that the deterministic question with buttons stays otherwise)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.ask.models import Intent, MyJob, Route, Unsure
from bot.ask.service import read_question
from bot.backends.ask_model import ModelPicker
from bot.backends.openai_compat import CheckpointServers
from bot.playground.config import Endpoint
from tests.conftest import need_service
from tests.unit.test_ask_corpus import site

UNSURE = "is everything slow or is it just me"


@pytest.fixture
async def picker() -> AsyncIterator[ModelPicker]:
    url = need_service("PLAYGROUND_TEST_URL")
    run = Path(need_service("PLAYGROUND_TEST_DIR")) / need_service("PLAYGROUND_TEST_RUN")
    model = str(sorted(run.iterdir())[0])
    servers = CheckpointServers()
    yield ModelPicker(servers, Endpoint(url=url), model)
    await servers.close()


async def test_the_deterministic_reading_is_unsure_without_the_model() -> None:
    found = await read_question(UNSURE, site())
    assert isinstance(found, Unsure)
    assert {r.intent for r in found.candidates} == {Intent.SLOW_JOB, Intent.REGRESSIONS}


async def test_the_model_picks_among_the_offered_or_the_question_stays(
    picker: ModelPicker,
) -> None:
    started = time.monotonic()
    found = await read_question(UNSURE, site(), picker=picker, deadline_s=20.0)
    assert time.monotonic() - started < 25.0
    if isinstance(found, Route | MyJob):
        assert found.intent in {Intent.SLOW_JOB, Intent.REGRESSIONS}
    else:
        assert isinstance(found, Unsure)  # the tiny model's babble: the buttons stay
        assert len(found.candidates) == 2


async def test_a_late_model_leaves_the_question_with_buttons(picker: ModelPicker) -> None:
    started = time.monotonic()
    found = await read_question(UNSURE, site(), picker=picker, deadline_s=0.05)
    assert time.monotonic() - started < 2.0
    assert isinstance(found, Unsure)


async def test_a_server_that_is_down_leaves_the_question_with_buttons() -> None:
    servers = CheckpointServers()
    try:
        down = ModelPicker(servers, Endpoint(url="http://127.0.0.1:9/v1"), "any")
        found = await read_question(UNSURE, site(), picker=down, deadline_s=2.0)
    finally:
        await servers.close()
    assert isinstance(found, Unsure)


async def test_a_sure_question_never_asks_the_model(picker: ModelPicker) -> None:
    # A deadline no server could meet: were the model asked, nothing would route.
    found = await read_question("is gpu-0042 ok?", site(), picker=picker, deadline_s=0.001)
    assert isinstance(found, Route) and found.typed == "/node-health gpu-0042"
