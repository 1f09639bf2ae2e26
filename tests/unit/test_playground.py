"""The playground's pure parts: names, endpoints, the catalog, SSE, rendering, the modal."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.config import ConfigError
from bot.playground.catalog import (
    FolderCheckpoint,
    ServedModel,
    build_catalog,
    default_picks,
    newer_than,
)
from bot.playground.config import PlaygroundConfig, parse_dirs, parse_endpoints
from bot.playground.models import Mode, Output, OutputState, Prompt
from bot.playground.naming import parse_model_id, valid_run
from bot.playground.sse import SseDecoder, parse_chunk
from bot.render.playground import parse_submission, render_modal, render_session
from bot.shell.emulator import validate_blocks, validate_view

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
PATTERNS = PlaygroundConfig().patterns


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("tiny/step-300", ("tiny", 300)),
        ("org/tiny/step-1200", ("org/tiny", 1200)),
        ("/ckpt/runs/tiny/step-400", ("tiny", 400)),
        ("tiny@14000", ("tiny", 14000)),
        ("llama-8b-sft-step2000", ("llama-8b-sft", 2000)),
        ("llama-8b-sft-step-2000", ("llama-8b-sft", 2000)),
        ("meta-llama/Llama-3-8B", None),
        ("gpt2", None),
    ],
)
def test_model_ids_name_runs_and_steps(model_id: str, expected: tuple[str, int] | None) -> None:
    assert parse_model_id(model_id, PATTERNS) == expected


def test_run_names_reject_injection() -> None:
    assert valid_run("tiny-gpt") and valid_run("org/run@x")
    for bad in ("", "a b", "<!channel>", "x`y", "a" * 200, "-x"):
        assert not valid_run(bad)


def test_endpoints_parse_with_keys_and_refuse_garbage() -> None:
    a, b = parse_endpoints("http://a:8000/v1,key=sk-1 ; https://b.example/v1/")
    assert a.url == "http://a:8000/v1" and a.api_key is not None
    assert a.api_key.get_secret_value() == "sk-1" and "sk-1" not in repr(a)
    assert b.url == "https://b.example/v1" and b.api_key is None and b.name == "b.example"
    with pytest.raises(ConfigError, match="http"):
        parse_endpoints("ftp://x")
    with pytest.raises(ConfigError, match="key="):
        parse_endpoints("http://a/v1,token=1")
    assert parse_dirs("/a:/b, /c") == tuple(map(__import__("pathlib").Path, ["/a", "/b", "/c"]))


def test_config_patterns_need_run_and_step() -> None:
    with pytest.raises(ValueError, match="run"):
        PlaygroundConfig(patterns=(r"^(?P<step>\d+)$",))


def test_catalog_merges_servers_and_folders_newest_first() -> None:
    cfg = PlaygroundConfig(endpoints=parse_endpoints("http://a/v1;http://b/v1"), dir_endpoint=1)
    served = [
        ServedModel("http://a/v1", "tiny/step-100"),
        ServedModel("http://a/v1", "tiny/step-300", loss=1.5),
        ServedModel("http://a/v1", "gpt2"),
    ]
    folders = [
        FolderCheckpoint("tiny", 300, "/c/tiny/step-300", loss=0.9, created=NOW),
        FolderCheckpoint("tiny", 500, "/c/tiny/step-500", loss=0.1),
        FolderCheckpoint("other", 20, "/c/other/step-20"),
    ]
    cat = build_catalog(served, folders, cfg, NOW, ["The checkpoint server x is down."])
    assert list(cat.runs) == ["other", "tiny"]
    tiny = cat.run("tiny")
    assert [c.step for c in tiny] == [500, 300, 100]
    assert tiny[0].model_id == "/c/tiny/step-500" and tiny[0].endpoint == "http://b/v1"
    assert tiny[1].model_id == "tiny/step-300" and tiny[1].loss == 1.5 and tiny[1].created == NOW
    assert [c.step for c in default_picks(tiny)] == [500, 300]
    assert [c.step for c in newer_than(tiny, 100)] == [300, 500]
    assert cat.down == ("The checkpoint server x is down.",)


def test_sse_decoder_handles_split_chunks_comments_and_no_done() -> None:
    d = SseDecoder()
    events = d.feed(b': keep-alive\n\ndata: {"choices": [{"text": "he')
    assert events == []
    events = d.feed(b'llo"}]}\n\ndata: {"choices":[{"delta":{"content":" you"},')
    events += d.feed(b'"finish_reason":"length"}],"usage":{"completion_tokens":7}}\r\n')
    events += d.close()  # the server closed without a blank line or [DONE]
    deltas = [parse_chunk(e) for e in events]
    assert [x.text for x in deltas if x] == ["hello", " you"]
    assert deltas[1] is not None and deltas[1].finish_reason == "length"
    assert deltas[1].completion_tokens == 7
    assert parse_chunk("[DONE]") is None
    err = parse_chunk('{"error": {"message": "model  not\\nfound"}}')
    assert err is not None and err.error == "model not found"
    bad = parse_chunk("{not json")
    assert bad is not None and bad.error


def _outputs() -> list[Output]:
    cfg = PlaygroundConfig(endpoints=parse_endpoints("http://a/v1"))
    cat = build_catalog(
        [ServedModel("http://a/v1", f"tiny/step-{s}") for s in (100, 200)], [], cfg, NOW
    )
    first, second = cat.run("tiny")
    return [
        Output(
            checkpoint=first,
            state=OutputState.DONE,
            text="<!channel> @here hi " * 200,
            tokens=40,
            elapsed_s=0.5,
            first_token_s=0.05,
            finish_reason="length",
        ),
        Output(
            checkpoint=second,
            state=OutputState.ERROR,
            error="The checkpoint server a answered HTTP 500.",
        ),
    ]


def test_session_message_is_valid_escaped_and_cut() -> None:
    prompt = Prompt(run="tiny", prompt="Say <@U123> hi", mode=Mode.CHAT, seed=3)
    outputs = _outputs()
    streaming = render_session("s1", prompt, outputs, user_id="U1", final=False, section_chars=500)
    final = render_session("s1", prompt, outputs, user_id="U1", final=True, section_chars=500)
    for msg in (streaming, final):
        assert validate_blocks(msg.blocks) == []
        text = json.dumps(msg.blocks)
        assert "<!channel>" not in text and "<@U123>" not in text and "&lt;!channel&gt;" in text
        assert "HTTP 500" in text and "step 100" in text and "step 200" in text
    assert "meowbot_playground_cancel" in json.dumps(streaming.blocks)
    final_text = json.dumps(final.blocks)
    assert "meowbot_playground_rerun" in final_text and "meowbot_playground_watch" in final_text
    assert "full text in the thread" in final_text and "80 tok/s" in final_text


def test_modal_is_valid_and_its_submission_parses() -> None:
    cfg = PlaygroundConfig(endpoints=parse_endpoints("http://a/v1"))
    cat = build_catalog(
        [ServedModel("http://a/v1", f"tiny/step-{s}") for s in (100, 200, 300)], [], cfg, NOW
    )
    loading = render_modal(None, metadata="{}")
    view = render_modal(cat, metadata='{"channel": "C1"}', max_checkpoints=4)
    assert validate_view(loading) == [] and validate_view(view) == []
    state = {
        "run": {"meowbot_playground_run": {"selected_option": {"value": "tiny"}}},
        "steps:tiny": {"steps": {"selected_options": [{"value": "300"}, {"value": "100"}]}},
        "prompt": {"prompt": {"value": "Beautiful is"}},
        "system": {"system": {"value": None}},
        "mode": {"mode": {"selected_option": {"value": "chat"}}},
        "max_tokens": {"max_tokens": {"value": "32"}},
        "temperature": {"temperature": {"value": "0"}},
        "seed": {"seed": {"value": "7"}},
    }
    run, steps, prompt = parse_submission({"state": {"values": state}}, max_tokens_cap=1024)  # type: ignore[misc]
    assert (run, steps) == ("tiny", [300, 100])
    assert prompt.mode is Mode.CHAT and prompt.max_tokens == 32 and prompt.temperature == 0
    assert prompt.seed == 7
    state["max_tokens"] = {"max_tokens": {"value": "99999"}}
    state["prompt"] = {"prompt": {"value": "  "}}
    errors = parse_submission({"state": {"values": state}}, max_tokens_cap=1024)
    assert isinstance(errors, dict) and set(errors) == {"max_tokens", "prompt"}


def test_one_token_is_one_token() -> None:
    from bot.render.playground import stats_line

    done = _outputs()[0]
    assert "1 token" in stats_line(done.model_copy(update={"tokens": 1}))
    assert "1 tokens" not in stats_line(done.model_copy(update={"tokens": 1}))
    assert "1,200 tokens" in stats_line(done.model_copy(update={"tokens": 1200}))
