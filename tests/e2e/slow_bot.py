"""`meowbot run` whose metrics take a while, for tests/e2e/test_shutdown.py: the bot as
`bot/app.py: serve` assembles and runs it (settings from the environment, SIGTERM handled by
`bot/server.py: Bot.run`), its simulated fleet answering a one-node read after FAST_S, or
SLOW_S for an odd-numbered node. Run as `python -m tests.e2e.slow_bot`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from bot.app import create_bot
from bot.config import load_settings
from bot.logs import setup_logging
from bot.offload import loop_first

FAST_S = 1.0
SLOW_S = 300.0  # far past the shutdown grace: this work can only be handed over


def is_slow(node: str) -> bool:
    return int(node.rsplit("-", 1)[-1]) % 2 == 1


class SlowMetrics:
    """The simulated fleet's metrics, a one-node read (a /node-health) delayed; the sweep's
    reads of the whole fleet are not, so the background loops stop at once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read(self, requests: Any, *, nodes: Sequence[str] | None, **kw: Any) -> Any:
        if nodes is not None and len(nodes) == 1:
            await asyncio.sleep(SLOW_S if is_slow(nodes[0]) else FAST_S)
        return await self.inner.read(requests, nodes=nodes, **kw)


async def main() -> None:
    settings = load_settings()
    setup_logging(settings.log_level)  # as `meowbot run`: JSON lines on stderr
    bot = await create_bot(settings)
    bot.deps.triage.metrics = SlowMetrics(bot.deps.triage.metrics)
    await bot.run()


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=loop_first) as runner:  # the loop `meowbot run` serves on
        runner.run(main())
