"""The playground service: discovery with a short cache, choosing checkpoints, streaming a
prompt to several at once with updates paced for Slack, and re-running watched prompts.

It takes ports (the checkpoint servers, the shared store) and callbacks to publish; it knows
nothing of Slack or Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot import ticks
from bot.errors import BackendError, StreamStalled
from bot.playground.catalog import (
    ServedModel,
    build_catalog,
    default_picks,
    newer_than,
    unknown_run_sentence,
)
from bot.playground.config import Endpoint, PlaygroundConfig
from bot.playground.models import Catalog, Checkpoint, Output, OutputState, Prompt, Watch
from bot.playground.naming import valid_run
from bot.playground.ports import Limits, PlaygroundStore, Scanner, Servers, Training

log = logging.getLogger(__name__)

Publish = Callable[[list[Output], bool], Awaitable[None]]
PostWatch = Callable[[Watch, Output], Awaitable[None]]


@dataclass(frozen=True)
class UserError:
    sentence: str


@dataclass
class Playground:
    cfg: PlaygroundConfig
    servers: Servers
    store: PlaygroundStore
    scan: Scanner
    training: Training | None = None
    _catalog: Catalog | None = None
    _catalog_at: float | None = None  # never listed yet
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def limits(self) -> Limits:
        c = self.cfg
        return Limits(c.per_user_concurrency, c.per_user_per_minute, c.global_concurrency)

    def endpoint(self, url: str) -> Endpoint:
        return next(e for e in self.cfg.endpoints if e.url == url)

    # discovery --------------------------------------------------------------------------------

    async def catalog(self, *, fresh: bool = False) -> Catalog:
        """Every run, cached for `discovery_ttl_s`; endpoints that are down are named in it."""
        async with self._lock:
            age = ticks.since(self._catalog_at)
            if self._catalog is not None and not fresh and age < self.cfg.discovery_ttl_s:
                return self._catalog
            listings = await asyncio.gather(
                *(self.servers.models(e) for e in self.cfg.endpoints), return_exceptions=True
            )
            served: list[ServedModel] = []
            down: list[str] = []
            for endpoint, got in zip(self.cfg.endpoints, listings, strict=True):
                if isinstance(got, BackendError):
                    down.append(got.user_text())
                elif isinstance(got, BaseException):
                    down.append(f"The checkpoint server {endpoint.name} failed to list models.")
                else:
                    served.extend(got)
            folders, problems = await self.scan(self.cfg.checkpoint_dirs)
            metadata = None
            if self.training is not None:
                try:
                    metadata = await self.training.read()
                except BackendError as exc:  # the checkpoints still answer without their loss
                    problems.append(f"{exc.user_text()} (no training loss shown)")
            self._catalog = build_catalog(
                served, folders, self.cfg, datetime.now(UTC), [*down, *problems], metadata
            )
            self._catalog_at = ticks.now()
            return self._catalog

    def choose(
        self, catalog: Catalog, run: str, steps: Sequence[int] | None = None
    ) -> list[Checkpoint] | UserError:
        """The checkpoints to ask: the given steps, or the newest two."""
        if not valid_run(run):
            return UserError("A run name is letters, digits and `._/@:+-`, like `tiny-gpt`.")
        known = catalog.run(run)
        if not known:
            down = f" ({catalog.down[0]})" if catalog.down else ""
            return UserError(unknown_run_sentence(run, catalog) + down)
        if not steps:
            return default_picks(known, min(2, self.cfg.max_checkpoints))
        picked = [c for c in known if c.step in set(steps)]
        missing = sorted(set(steps) - {c.step for c in picked})
        if missing:
            return UserError(f"Run `{run}` has no checkpoint at step {missing[0]}.")
        if len(picked) > self.cfg.max_checkpoints:
            return UserError(f"Pick at most {self.cfg.max_checkpoints} checkpoints at once.")
        return sorted(picked, key=lambda c: -c.step)

    # streaming --------------------------------------------------------------------------------

    async def _one(self, prompt: Prompt, out: Output, changed: asyncio.Event) -> None:
        start = time.monotonic()
        out.started_at = start
        out.state = OutputState.STREAMING
        usage: int | None = None
        try:
            async for delta in self.servers.stream(
                self.endpoint(out.checkpoint.endpoint),
                out.checkpoint.model_id,
                prompt,
                first_token_s=self.cfg.first_token_timeout_s,
                stall_s=self.cfg.stall_timeout_s,
                total_s=self.cfg.request_timeout_s,
            ):
                if delta.text:
                    if out.first_token_s is None:
                        out.first_token_s = time.monotonic() - start
                    out.text += delta.text
                    out.tokens += 1  # one chunk a token, until the server's usage says
                if delta.finish_reason:
                    out.finish_reason = delta.finish_reason
                if delta.completion_tokens is not None:
                    usage = delta.completion_tokens
                changed.set()
            out.state = OutputState.DONE
        except BackendError as exc:
            out.state = OutputState.STALLED if isinstance(exc, StreamStalled) else OutputState.ERROR
            out.error = exc.user_text()
        except asyncio.CancelledError:
            out.state = OutputState.CANCELLED
            raise
        finally:
            if usage is not None:
                out.tokens = usage
            out.elapsed_s = time.monotonic() - start
            changed.set()

    async def stream_all(
        self,
        sid: str,
        prompt: Prompt,
        checkpoints: Sequence[Checkpoint],
        publish: Publish,
        *,
        last_call: float | None = None,
    ) -> list[Output]:
        """Streams `prompt` to every checkpoint at once. `publish(outputs, final)` is called
        at most once every `update_interval_s` while text arrives (Slack's pace for editing
        one message), then once at the end. A Cancel (`store.cancel(sid)`, from any replica)
        stops every stream still running."""
        outputs = [Output(checkpoint=c) for c in checkpoints]
        changed = asyncio.Event()
        tasks = [asyncio.create_task(self._one(prompt, o, changed)) for o in outputs]
        interval = self.cfg.update_interval_s
        last = last_call if last_call is not None else time.monotonic()
        try:
            while not all(t.done() for t in tasks):
                # Until all are done or the next edit is due; the streams run on either way.
                await asyncio.wait(tasks, timeout=max(0.05, last + interval - time.monotonic()))
                if all(t.done() for t in tasks):
                    break
                if await self.store.cancelled(sid):
                    for t in tasks:
                        t.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    break
                if changed.is_set() and time.monotonic() - last >= interval:
                    changed.clear()
                    await publish(outputs, False)
                    # From the edit's end: a slow edit must not let the next one arrive sooner.
                    last = time.monotonic()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # The last edit also keeps Slack's pace.
        await asyncio.sleep(max(0.0, last + interval - time.monotonic()))
        await publish(outputs, True)
        return outputs

    async def answer(self, prompt: Prompt, checkpoint: Checkpoint) -> Output:
        """One checkpoint's whole answer, unstreamed to anyone (a watch posts it at the end)."""
        out = Output(checkpoint=checkpoint)
        await self._one(prompt, out, asyncio.Event())
        return out

    # watches ----------------------------------------------------------------------------------

    async def watch_pass(self, post: PostWatch) -> int:
        """Runs each watched prompt on the checkpoints that appeared since its last step,
        oldest first, once across replicas; returns how many answers were posted."""
        watches = await self.store.watches()
        if not watches:
            return 0
        catalog = await self.catalog(fresh=True)
        posted = 0
        for watch in watches:
            for ckpt in newer_than(catalog.run(watch.prompt.run), watch.last_step):
                if not await self.store.claim_watch_run(watch.id, ckpt.step):
                    continue
                out = await self.answer(watch.prompt, ckpt)
                await post(watch, out)
                await self.store.set_watch_step(watch.id, ckpt.step)
                posted += 1
        return posted

    async def watcher(self, stop: asyncio.Event, post: PostWatch) -> None:
        while not stop.is_set():
            try:
                await self.watch_pass(post)
            except Exception:  # the loop outlives a bad pass (Redis or a server down)
                log.exception("playground watch pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.cfg.watch_poll_s)
