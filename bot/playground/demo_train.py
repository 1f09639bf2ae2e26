"""`meowbot demo-checkpoints`: a real, tiny training run whose checkpoints the playground can serve.

No model weights can be downloaded where meowbot is developed and tested, so this trains one:
a byte-level BPE tokenizer (vocabulary 2048) and a GPT-2 of 2 layers, 2 heads and 64 wide,
on text every Python has (the Zen of Python and a few standard-library docstrings), on CPU.
Every `every` steps it writes `<out>/<run>/step-<N>/` with `save_pretrained` (weights, config,
generation config, a fast tokenizer with a chat template) and a `trainer_state.json` in the
shape HF Trainer writes (`global_step`, `log_history` of `{"step", "loss", ...}`), so the
folder looks like any run on shared storage and `transformers serve` (or vLLM) serves it.

The same seed gives the same checkpoints (one torch thread, seeded batches). torch,
transformers and tokenizers are imported here only: they are not the bot's dependencies
(`pip install torch==2.13.0` first, then `pip install "transformers[serving]" tokenizers`).
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INSTALL_HINT = 'pip install torch==2.13.0 && pip install "transformers[serving]" tokenizers'
MISSING_MESSAGE = (
    "meowbot demo-checkpoints needs torch, transformers and tokenizers, which the bot itself "
    f"does not install: run `{INSTALL_HINT}` (torch first, so no CUDA build is pulled)."
)

VOCAB_SIZE = 2048
N_POSITIONS = 128
BLOCK = 128  # tokens a training sequence: the whole context, so every position is trained
BATCH = 16
LEARNING_RATE = 1e-2
WARMUP_STEPS = 20
LOGGING_STEPS = 10  # HF Trainer's logging_steps: log_history gets the mean loss of each 10
EOS = "<|endoftext|>"
# One thread: for a model this small more threads only add synchronisation (2 threads were
# several times slower on a busy 2-core machine), and a fixed count keeps runs identical.
TORCH_THREADS = 1
SAMPLE_PROMPT = "Beautiful is better than"
SAMPLE_TOKENS = 24
# The chat template joins the messages' texts, so a chat answer continues the last message.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] }}"
    "{% if not loop.last %}\n{% endif %}{% endfor %}"
)

# The model learns these (about 1,500 tokens: it can learn them by heart in 500 steps, so the
# loss falls to about 0.1); the tokenizer learns from these and TOKENIZER_EXTRA_MODULES.
MODEL_MODULES = ("json", "string", "heapq")
TOKENIZER_EXTRA_MODULES = ("collections", "random", "itertools", "os", "io", "re")


class DemoTrainUnavailable(RuntimeError):
    """torch, transformers or tokenizers is not installed."""


@dataclass(frozen=True)
class DemoRun:
    out: Path
    run: str = "tiny-zen"
    steps: int = 500
    every: int = 100
    seed: int = 0

    def step_dir(self, step: int) -> Path:
        return self.out / self.run / f"step-{step}"


def zen_of_python() -> str:
    # `import this` prints the Zen; its module holds it ROT13-encoded in `s`.
    with contextlib.redirect_stdout(io.StringIO()):
        this = importlib.import_module("this")
    return codecs.decode(str(this.s), "rot13")


def _docstrings(modules: tuple[str, ...]) -> list[str]:
    texts = []
    for name in modules:
        doc = importlib.import_module(name).__doc__
        if doc:
            texts.append(doc.strip())
    return texts


def corpora() -> tuple[list[str], list[str]]:
    """(the tokenizer's texts, the model's texts): the Zen of Python comes first in both."""
    model_texts = [zen_of_python(), *_docstrings(MODEL_MODULES)]
    return [*model_texts, *_docstrings(TOKENIZER_EXTRA_MODULES)], model_texts


def _import_libraries() -> tuple[Any, Any, Any]:
    try:
        import tokenizers
        import torch
        import transformers
    except ImportError as exc:
        raise DemoTrainUnavailable(MISSING_MESSAGE) from exc
    return torch, transformers, tokenizers


def train_tokenizer(texts: list[str]) -> Any:
    """A byte-level BPE tokenizer as a PreTrainedTokenizerFast, with eos = pad = bos = unk."""
    _torch, transformers, tokenizers = _import_libraries()
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        pad_token=EOS,
        unk_token=EOS,
        model_max_length=N_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _lr_factor(step: int, steps: int) -> float:
    """Linear warm-up, then cosine down to a tenth."""
    warm = min(1.0, (step + 1) / WARMUP_STEPS)
    return warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))


def _sample(torch: Any, model: Any, tokenizer: Any) -> str:
    ids = tokenizer(SAMPLE_PROMPT, return_tensors="pt").input_ids
    model.eval()
    with torch.no_grad():
        out = model.generate(
            ids, max_new_tokens=SAMPLE_TOKENS, do_sample=False, pad_token_id=tokenizer.eos_token_id
        )
    model.train()
    return str(tokenizer.decode(out[0][ids.shape[1] :]))


def _save(
    run: DemoRun, step: int, model: Any, tokenizer: Any, history: list[dict[str, Any]]
) -> Path:
    """Writes the checkpoint beside its place, then renames it in: a reader never sees half."""
    final = run.step_dir(step)
    partial = final.with_name(f".{final.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    state = {
        "global_step": step,
        "max_steps": run.steps,
        "logging_steps": LOGGING_STEPS,
        "save_steps": run.every,
        "train_batch_size": BATCH,
        "seed": run.seed,
        "log_history": history,
    }
    (partial / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    return final


def train(run: DemoRun, log: Callable[[str], None] = print) -> list[Path]:
    """Trains the run and returns the checkpoint folders written, oldest first."""
    if run.steps < 1 or run.every < 1:
        raise ValueError("steps and every must be at least 1")
    torch, transformers, _tokenizers = _import_libraries()
    started = time.monotonic()
    torch.set_num_threads(TORCH_THREADS)
    torch.manual_seed(run.seed)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    tokenizer_texts, model_texts = corpora()
    tokenizer = train_tokenizer(tokenizer_texts)
    ids: list[int] = []
    for text in model_texts:
        ids += [*tokenizer(text).input_ids, tokenizer.eos_token_id]
    data = torch.tensor(ids, dtype=torch.long)
    if len(ids) <= BLOCK:
        raise ValueError("the training text is shorter than one block")

    config = transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=N_POSITIONS,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = transformers.GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Sampling by default, as released models ship it: `transformers serve` takes do_sample
    # from here, so without it a request's temperature would be ignored (greedy always);
    # temperature 0 in a request still means greedy.
    model.generation_config.do_sample = True
    model.generation_config.temperature = 1.0
    model.generation_config.top_k = 0
    model.generation_config.top_p = 1.0
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, run.steps))
    batches = torch.Generator().manual_seed(run.seed)
    n_params = sum(p.numel() for p in model.parameters())
    log(
        f"training {run.run}: {n_params:,} parameters, vocabulary {len(tokenizer)}, "
        f"{len(ids):,} tokens, {run.steps} steps, a checkpoint every {run.every} "
        f"into {run.out / run.run}"
    )

    history: list[dict[str, Any]] = []
    window: list[float] = []
    written: list[Path] = []
    for step in range(1, run.steps + 1):
        starts = torch.randint(0, len(ids) - BLOCK, (BATCH,), generator=batches)
        batch = torch.stack([data[int(i) : int(i) + BLOCK] for i in starts])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        lr = float(scheduler.get_last_lr()[0])
        scheduler.step()
        window.append(float(loss.item()))
        # Like HF Trainer with logging_first_step: step 1, then the mean of each window.
        if step == 1 or step % LOGGING_STEPS == 0 or step == run.steps:
            mean = sum(window) / len(window)
            history.append({"step": step, "loss": round(mean, 4), "learning_rate": lr})
            window = []
            if step == 1 or step % 50 == 0 or step == run.steps:
                log(f"step {step:4d}  loss {mean:.3f}  {time.monotonic() - started:5.1f} s")
        if step % run.every == 0 or step == run.steps:
            path = _save(run, step, model, tokenizer, history)
            written.append(path)
            sample = _sample(torch, model, tokenizer)
            log(f"saved {path}  {SAMPLE_PROMPT!r} -> {sample!r}")
    log(f"done in {time.monotonic() - started:.1f} s")
    return written
