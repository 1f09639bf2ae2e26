"""Block Kit for /playground: the side-by-side message, the modal, watches.

Model output is untrusted text: it is escaped (no mentions, links or broadcasts) and shown in
code blocks, cut to `section_chars` per checkpoint with the whole text in the thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.mrkdwn import code, code_block, escape, truncate
from bot.playground.models import Catalog, Checkpoint, Mode, Output, OutputState, Prompt, Watch
from bot.render.blocks import Block, Message, Modal, button, option
from bot.slack_message import SlackMessage
from bot.words import count

CANCEL_ACTION = "meowbot_playground_cancel"
RERUN_ACTION = "meowbot_playground_rerun"
WATCH_ACTION = "meowbot_playground_watch"
RUN_PICK_ACTION = "meowbot_playground_run"
MODAL_CALLBACK = "meowbot_playground_submit"

STATE_WORDS = {
    OutputState.WAITING: ":hourglass_flowing_sand: waiting",
    OutputState.STREAMING: ":writing_hand: streaming…",
    OutputState.DONE: ":white_check_mark: done",
    OutputState.ERROR: ":x: failed",
    OutputState.STALLED: ":warning: stalled, cut",
    OutputState.CANCELLED: ":no_entry_sign: cancelled",
}


def checkpoint_title(c: Checkpoint) -> str:
    parts = [f"*{escape(c.label)}*"]
    if c.loss is not None:
        parts.append(f"loss {c.loss:.3f}")
    if c.tokens_seen:
        parts.append(f"{c.tokens_seen:,} tokens seen")
    return " · ".join(parts)


def stats_line(o: Output) -> str:
    bits = [STATE_WORDS[o.state]]
    if o.tokens:
        bits.append(count(o.tokens, "token"))
    if o.elapsed_s is not None and o.finished:
        bits.append(f"{o.elapsed_s:.2f} s")
    if o.first_token_s is not None:
        bits.append(f"first token {o.first_token_s * 1000:.0f} ms")
    tps = o.tokens_per_s
    if tps is not None and o.finished:
        bits.append(f"{tps:.0f} tok/s")
    if o.finish_reason:
        bits.append(f"finish: {escape(o.finish_reason)}")
    return " · ".join(bits)


def cut(o: Output, limit: int) -> bool:
    return len(o.text) > limit


def render_session(
    sid: str,
    prompt: Prompt,
    outputs: Sequence[Output],
    *,
    user_id: str,
    final: bool,
    section_chars: int,
    down: Sequence[str] = (),
) -> SlackMessage:
    run = prompt.run
    fallback = f"Playground: {run}, {len(outputs)} checkpoints"
    msg = Message(fallback)
    msg.header(f"Playground: {run}")
    settings = (
        f"asked by <@{escape(user_id)}> · {prompt.mode.value} · max {prompt.max_tokens} tokens"
        f" · temperature {prompt.temperature:g}"
        + (f" · seed {prompt.seed}" if prompt.seed is not None else "")
    )
    msg.context(settings)
    shown_prompt = truncate(escape(" ".join(prompt.prompt.split())), 600)
    if prompt.system:
        msg.context(f"system: {truncate(escape(' '.join(prompt.system.split())), 300)}")
    msg.section(f">{shown_prompt}")
    for sentence in down[:3]:  # servers that did not answer discovery: named, not hidden
        msg.context(f":warning: {escape(sentence)}")
    for o in outputs:
        msg.divider()
        msg.section(checkpoint_title(o.checkpoint))
        body = o.text if o.text else ("" if o.state is not OutputState.WAITING else "…")
        if body:
            msg.section(code_block(body, section_chars))
        if o.error:
            msg.section(f":warning: {escape(o.error)}")
        note = " · full text in the thread" if final and cut(o, section_chars) else ""
        msg.context(stats_line(o) + note)
    if not final:
        msg.actions(button("Cancel", CANCEL_ACTION, sid, style="danger"))
    else:
        msg.actions(
            button("Re-run on newer checkpoints", RERUN_ACTION, sid, style="primary"),
            button("Watch", WATCH_ACTION, sid),
        )
    return msg.build()


def render_full_text(o: Output) -> str:
    """A thread reply with one checkpoint's whole answer (Slack cuts messages at 40k)."""
    return f"{checkpoint_title(o.checkpoint)}\n{code_block(o.text, 39_000)}"


def render_watch_answer(watch: Watch, o: Output) -> SlackMessage:
    title = f"{escape(o.checkpoint.label)}: {watch.prompt.run}"
    msg = Message(title)
    msg.section(f":eyes: {checkpoint_title(o.checkpoint)} (watch `{escape(watch.id)}`)")
    if o.text:
        msg.section(code_block(o.text, 2800))
    if o.error:
        msg.section(f":warning: {escape(o.error)}")
    msg.context(stats_line(o))
    return msg.build()


def render_watches(watches: Sequence[Watch]) -> SlackMessage:
    if not watches:
        text = "You watch no prompts. Press *Watch* under a playground answer to start one."
        return Message(text).section(text).build()
    msg = Message(f"{len(watches)} watched prompts")
    msg.header("Your watched prompts")
    msg.lines(
        [
            f"{code(w.id)} run {code(w.prompt.run)}, since {escape(f'step {w.last_step:,}')}: "
            f"{truncate(escape(' '.join(w.prompt.prompt.split())), 120)}"
            for w in watches
        ]
    )
    msg.context("`/playground unwatch <id>` stops one.")
    return msg.build()


def _options(values: Sequence[tuple[str, str]]) -> list[Block]:
    return [option(label, value) for label, value in values]


def render_modal(
    catalog: Catalog | None,
    *,
    metadata: str,
    run: str | None = None,
    max_checkpoints: int = 4,
    max_tokens: int = 128,
    temperature: float = 0.7,
    problem: str | None = None,
) -> dict[str, Any]:
    """The playground modal; `catalog=None` is the first view, shown while discovery runs."""
    modal = Modal(
        "Playground", callback_id=MODAL_CALLBACK, submit="Send", private_metadata=metadata
    )
    if catalog is None:
        modal.section(":hourglass_flowing_sand: Looking for checkpoints…")
        modal.submit = None
        return modal.build()
    for sentence in catalog.down[:3]:
        modal.context(f":warning: {escape(sentence)}")
    if not catalog.runs:
        modal.section(problem or "No checkpoints found on the configured servers.")
        modal.submit = None
        return modal.build()
    runs = list(catalog.runs)
    chosen = run if run in catalog.runs else runs[0]
    run_select: Block = {
        "type": "static_select",
        "action_id": RUN_PICK_ACTION,
        "placeholder": {"type": "plain_text", "text": "Run"},
        "options": _options([(r, r) for r in runs[:100]]),
        "initial_option": option(chosen, chosen),
    }
    modal.input("Run", run_select, block_id="run", dispatch_action=True)
    ckpts = catalog.run(chosen)[:100]
    opts = _options([(_ckpt_label(c), str(c.step)) for c in ckpts])
    picker: Block = {
        "type": "multi_static_select",
        "action_id": "steps",
        "placeholder": {"type": "plain_text", "text": "Checkpoints"},
        "options": opts,
        "initial_options": opts[:2],
        "max_selected_items": max_checkpoints,
    }
    # The block id carries the run, so Slack does not keep a choice from another run.
    modal.input(f"Checkpoints (up to {max_checkpoints})", picker, block_id=f"steps:{chosen}")
    modal.text_input("Prompt", "prompt", multiline=True, max_length=8000, block_id="prompt")
    modal.text_input(
        "System prompt", "system", multiline=True, optional=True, max_length=4000, block_id="system"
    )
    mode: Block = {
        "type": "static_select",
        "action_id": "mode",
        "options": _options([("completion", Mode.COMPLETION.value), ("chat", Mode.CHAT.value)]),
        "initial_option": option("completion", Mode.COMPLETION.value),
    }
    modal.input("Mode", mode, block_id="mode")
    modal.text_input("Max tokens", "max_tokens", initial=str(max_tokens), block_id="max_tokens")
    modal.text_input(
        "Temperature", "temperature", initial=f"{temperature:g}", block_id="temperature"
    )
    modal.text_input("Seed", "seed", optional=True, block_id="seed", placeholder="random")
    return modal.build()


def _ckpt_label(c: Checkpoint) -> str:
    label = c.label
    if c.loss is not None:
        label += f" (loss {c.loss:.3f})"
    return label[:75]


def parse_submission(
    view: dict[str, Any], *, max_tokens_cap: int, max_tokens: int = 128, temperature: float = 0.7
) -> tuple[str, list[int], Prompt] | dict[str, str]:
    """The submitted modal as (run, steps, prompt), or errors by block id for Slack to show."""
    values: dict[str, Any] = view.get("state", {}).get("values", {})

    def field(block: str, action: str) -> dict[str, Any]:
        return dict(values.get(block, {}).get(action, {}) or {})

    run = str((field("run", RUN_PICK_ACTION).get("selected_option") or {}).get("value") or "")
    steps_block = next((b for b in values if b.startswith("steps:")), "steps:")
    chosen = field(steps_block, "steps").get("selected_options") or []
    errors: dict[str, str] = {}
    steps: list[int] = []
    for opt in chosen:
        try:
            steps.append(int(opt.get("value", "")))
        except (TypeError, ValueError):
            errors[steps_block] = "Pick checkpoints from the list."
    if not chosen:
        errors[steps_block] = "Pick at least one checkpoint."
    prompt = str(field("prompt", "prompt").get("value") or "")
    if not prompt.strip():
        errors["prompt"] = "Write a prompt."
    system = str(field("system", "system").get("value") or "")
    mode = str((field("mode", "mode").get("selected_option") or {}).get("value") or "completion")

    def number(block: str, kind: type[int] | type[float], low: float, high: float) -> Any:
        raw = str(field(block, block).get("value") or "").strip()
        if not raw:
            return None
        try:
            value = kind(raw)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            errors[block] = f"A number from {low:g} to {high:g}."
            return None
        return value

    tokens = number("max_tokens", int, 1, max_tokens_cap)
    temp = number("temperature", float, 0, 2)
    seed = number("seed", int, 0, 2**31 - 1)
    if errors:
        return errors
    return (
        run,
        steps,
        Prompt(
            run=run,
            prompt=prompt,
            system=system,
            mode=Mode(mode) if mode in ("chat", "completion") else Mode.COMPLETION,
            max_tokens=tokens or max_tokens,
            temperature=temperature if temp is None else temp,
            seed=seed,
        ),
    )
