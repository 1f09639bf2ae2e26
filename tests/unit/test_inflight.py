"""bot/inflight.py: work past the grace is stopped first, then its asker told, once."""

from __future__ import annotations

import asyncio

from bot.inflight import InFlight


async def test_hand_over_stops_the_work_then_tells_its_asker() -> None:
    inflight = InFlight()
    events: list[str] = []

    async def work(name: str, seconds: float, *, asked: bool = True) -> None:
        async def tell() -> None:
            events.append(f"told {name}")

        async with inflight.track(tell if asked else None):
            try:
                await asyncio.sleep(seconds)
                events.append(f"answered {name}")
            except asyncio.CancelledError:
                events.append(f"stopped {name}")
                raise

    tasks = [
        asyncio.create_task(work("quick", 0.01)),
        asyncio.create_task(work("slow", 60)),
        asyncio.create_task(work("event", 60, asked=False)),
    ]
    await asyncio.sleep(0)
    assert inflight.count == 3
    assert not await inflight.wait_idle(0.1)
    assert await inflight.hand_over(1.0) == (2, 1)
    assert inflight.count == 0 and await inflight.wait_idle(0.1)
    assert events == ["answered quick", "stopped slow", "stopped event", "told slow"]
    assert all(t.done() for t in tasks)
    assert await inflight.hand_over(1.0) == (0, 0)  # nothing left: nobody is told twice


async def test_a_handover_that_fails_is_counted_not_raised() -> None:
    inflight = InFlight()

    async def tell() -> None:
        raise ConnectionError("response_url unreachable")

    async def work() -> None:
        async with inflight.track(tell):
            await asyncio.sleep(60)

    task = asyncio.create_task(work())
    await asyncio.sleep(0)
    assert await inflight.hand_over(1.0) == (1, 0)
    assert task.cancelled()
