"""/regressions through the real server: bad input privately and nothing posted; without a
fleet history, what to configure; with one, "looking at…" edited as it reads, then into the
answer, the detail in its thread. The history is a FleetHistory over generated data (the
simulator's and Prometheus' own are tested with their adapters)."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.app import create_bot
from bot.errors import BackendError
from bot.highlights.schedule import DigestSchedule
from bot.regressions.ask import BUILT_IN
from bot.regressions.models import JobPace, NodeCompute, PaceSample, VersionSpan
from bot.regressions.weekly import WeeklyRegressions
from bot.shell.emulator import SlackEmulator, validate_blocks
from handlers.regressions import weekly_poster
from tests.e2e.conftest import Slack, bot_settings

CHANNEL = "C0GENERAL"


class GeneratedHistory:
    """64 nodes moving from one kernel to the next over a day, three days ago; 8 jobs of 8
    nodes each, 2 % slower once their first node moved; their nodes' compute time 2 % longer
    on the moved nodes only."""

    name = "generated"

    def __init__(self, now: datetime) -> None:
        rng = random.Random(7)
        began = now - timedelta(days=3)
        self.spans: list[VersionSpan] = []
        self.paces: list[JobPace] = []
        self.computes: list[NodeCompute] = []
        switched: dict[str, datetime] = {}
        for i in range(64):
            node = f"gpu-{i:04d}"
            at = began + timedelta(hours=24 * i / 64)
            switched[node] = at
            self.spans.append(VersionSpan(node, "kernel", "5.15.0-105", now - timedelta(30), at))
            self.spans.append(VersionSpan(node, "kernel", "5.15.0-113", at, now))
        for j in range(8):
            nodes = tuple(f"gpu-{8 * j + k:04d}" for k in range(8))
            first = min(switched[n] for n in nodes)
            samples = []
            at = now - timedelta(days=7)
            while at < now:
                slower = 1.02 if at >= first else 1.0
                samples.append(PaceSample(at, 2.0 * slower * rng.gauss(1, 0.005)))
                at += timedelta(minutes=15)
            self.paces.append(JobPace(str(5_000_000 + j), nodes, tuple(samples)))
            for n in nodes:
                points = tuple(
                    PaceSample(
                        s.at, 1.5 * (1.02 if s.at >= switched[n] else 1.0) * rng.gauss(1, 0.004)
                    )
                    for s in samples
                )
                self.computes.append(NodeCompute(str(5_000_000 + j), n, points))
        self.reads = 0

    async def versions(
        self, components: Sequence[str], *, start: datetime, end: datetime
    ) -> list[VersionSpan]:
        self.reads += 1
        await asyncio.sleep(0)
        return [s for s in self.spans if s.component in components]

    async def job_paces(self, *, start: datetime, end: datetime) -> list[JobPace]:
        self.reads += 1
        return self.paces

    async def node_compute(self, *, start: datetime, end: datetime) -> list[NodeCompute]:
        self.reads += 1
        return self.computes


def shown(emulator: SlackEmulator) -> list[dict[str, Any]]:
    return [body for _url, body in emulator.responses]


async def test_without_a_history_it_says_what_to_configure(
    slack: Slack, emulator: SlackEmulator
) -> None:
    slack.bot.deps.regressions.history = None
    await slack.command("/regressions", "kernel")
    await emulator.wait_for_responses(1)
    assert "Set PROMETHEUS_URL" in json.dumps(shown(emulator)[0])
    assert emulator.calls_to("chat.postMessage") == []


async def test_bad_input_is_answered_privately_with_the_usage(
    slack: Slack, emulator: SlackEmulator
) -> None:
    history = GeneratedHistory(datetime.now(UTC))
    slack.bot.deps.regressions.history = history
    # Each answered before the next is asked: two commands' answers may interleave.
    await slack.command("/regressions", "kernal")
    await emulator.wait_for_responses(2)
    await slack.command("/regressions", "--since 90d")
    await emulator.wait_for_responses(4)
    said = [json.dumps(b) for b in shown(emulator)]
    assert "Did you mean `kernel`?" in said[0] and "kernel --since 14d" in said[1]
    assert "at most 30 days" in said[2] and "kernel --since 14d" in said[3]
    assert emulator.calls_to("chat.postMessage") == [] and history.reads == 0


async def test_looking_at_then_the_answer_and_the_thread(
    slack: Slack, emulator: SlackEmulator
) -> None:
    history = GeneratedHistory(datetime.now(UTC))
    slack.bot.deps.regressions.history = history
    status, _, _ = await slack.command("/regressions", "kernel --since 7d")
    assert status == 200
    detail = await emulator.wait_for_call("chat.postMessage", count=2, timeout=20)
    first = emulator.calls_to("chat.postMessage")[0]
    assert first.args["channel"] == CHANNEL
    assert "Looking at kernel rollouts over the last 7 days" in first.args["text"]
    updates = emulator.calls_to("chat.update")
    assert len(updates) >= 2  # what it reads, then the answer
    assert "Looking at kernel rollouts" in updates[0].args["text"]  # edited with each step
    answer = updates[-1].args
    assert "Kernel rollouts and training pace, the last 7 days" in json.dumps(answer["blocks"])
    assert "64 nodes" in json.dumps(answer["blocks"])
    # Beside the pace, the per-node evidence of the 8 jobs that ran on both kernels at once.
    said = json.dumps(answer["blocks"])
    by_node = re.search(
        r"per-node compute time, same job same steps: new-cohort nodes ([0-9.]+) % slower "
        r"\(95 % ([0-9.]+)-([0-9.]+) %\), 8 jobs, in line with the pace",
        said,
    )
    assert by_node is not None, said
    low, effect, high = (float(by_node[k]) for k in (2, 1, 3))
    assert low < effect < high and abs(effect - 2.0) <= 0.15
    assert validate_blocks(answer["blocks"]) == []
    assert detail.args["thread_ts"] == first.result["ts"]
    assert history.reads == 3


async def test_the_weekly_post_goes_out_once_across_replicas(
    slack: Slack, emulator: SlackEmulator
) -> None:
    schedule = DigestSchedule.parse("mon 09:00 UTC")
    now = datetime.now(UTC)
    fire = schedule.last_fire(now)
    history = GeneratedHistory(fire)
    replicas = [
        WeeklyRegressions(
            history=history,
            components=BUILT_IN,
            schedule=schedule,
            claims=slack.bot.deps.store,
            post=weekly_poster(slack.bot.client, CHANNEL, slack.bot.deps.triage.cpu),
            clock=lambda: fire + timedelta(minutes=2),
        )
        for _ in range(3)
    ]
    posted = await asyncio.gather(*(r.run_once() for r in replicas))
    assert sorted(posted) == [False, False, True]
    [main, thread] = emulator.calls_to("chat.postMessage")
    assert "Software rollouts and training pace, the last 7 days" in json.dumps(main.args["blocks"])
    assert thread.args["thread_ts"] == main.result["ts"]
    # The next tick, and a replica started hours later, post nothing more.
    assert not await replicas[0].run_once()
    late = replace(replicas[1], clock=lambda: fire + timedelta(hours=7))
    assert late.due(late.clock()) is None and not await late.run_once()
    assert len(emulator.calls_to("chat.postMessage")) == 2


async def test_the_weekly_post_is_built_when_a_channel_and_a_history_are_there(
    emulator: SlackEmulator, redis_url: str
) -> None:
    for channel in (None, "C0GENERAL"):
        extra = {"MEOWBOT_REGRESSIONS_CHANNEL": channel} if channel else {}
        bot = await create_bot(bot_settings(emulator, redis_url, **extra))
        try:
            has_history = bot.deps.regressions.history is not None
            assert (bot.deps.regressions.weekly is not None) == (has_history and bool(channel))
        finally:
            await bot.close()


async def test_where_it_may_not_post_the_answer_comes_privately(
    slack: Slack, emulator: SlackEmulator
) -> None:
    slack.bot.deps.regressions.history = GeneratedHistory(datetime.now(UTC))
    emulator.fail_next("chat.postMessage", status=200, error="not_in_channel")
    await slack.command("/regressions", "kernel")
    await emulator.wait_for_responses(3, timeout=20)
    said = [json.dumps(b) for b in shown(emulator)]
    assert "I cannot post in this channel (not_in_channel)" in said[0]
    assert "Kernel rollouts and training pace" in said[1]
    assert emulator.calls_to("chat.update") == [] and not emulator.uploads


class DownHistory(GeneratedHistory):
    """Prometheus answering the versions, then down for the paces."""

    async def job_paces(self, *, start: datetime, end: datetime) -> list[JobPace]:
        raise BackendError("Prometheus", "did not answer within 10 s.")


async def test_a_backend_down_midway_edits_the_message_into_a_sentence(
    slack: Slack, emulator: SlackEmulator
) -> None:
    slack.bot.deps.regressions.history = DownHistory(datetime.now(UTC))
    await slack.command("/regressions", "")
    update = await emulator.wait_for_call("chat.update", count=2, timeout=20)
    assert (
        "I could not read the fleet's history: Prometheus did not answer within 10 s."
        in (update.args["text"])
    )
    assert len(emulator.calls_to("chat.postMessage")) == 1  # no detail, no chart
