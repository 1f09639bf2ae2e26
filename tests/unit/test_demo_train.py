"""`meowbot demo-checkpoints` (bot/playground/demo_train.py): its text and its refusal without
torch. A short run in process is in tests/integration/test_checkpoint_server.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.playground import demo_train


def test_the_text_is_the_zen_of_python_and_stdlib_docstrings() -> None:
    tokenizer_texts, model_texts = demo_train.corpora()
    assert model_texts[0].startswith("The Zen of Python, by Tim Peters")
    assert "Beautiful is better than ugly." in model_texts[0]
    assert tokenizer_texts[: len(model_texts)] == model_texts
    assert len(tokenizer_texts) > len(model_texts)


def test_without_torch_it_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    assert main(["demo-checkpoints", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert 'pip install torch==2.13.0 && pip install "transformers[serving]" tokenizers' in err
    assert not any(tmp_path.iterdir())


def test_checkpoints_already_there_are_kept_not_trained_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    step = tmp_path / "tiny-zen" / "step-100"
    step.mkdir(parents=True)
    (step / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "torch", None)  # training would fail without torch
    assert main(["demo-checkpoints", "--out", str(tmp_path)]) == 0
    assert "already holds 1 checkpoint; kept (--retrain to train again)" in capsys.readouterr().out
    assert main(["demo-checkpoints", "--out", str(tmp_path), "--retrain"]) == 2
