"""The alert pipeline running: webhook alerts in, the passive sweep, the notifier loop.

Every replica receives webhooks and stores them (ingest is safe to run anywhere at once). The
sweep and the notifier each run on one replica at a time, the holder of a Redis lock with a
fencing token: the notifier's lock is renewed every tick and its writes are fenced, so two
replicas never post the same group; the sweep's lock is held for a sweep (however long it
takes) and the rest of its interval, so the fleet is swept once an interval whichever replicas
are up, and a sweep longer than the interval keeps its fence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot import ticks
from bot.alerts import acts, notify, pages, policy
from bot.alerts.causes import fault_cause
from bot.alerts.config import AlertsConfig
from bot.alerts.ingest import Ingested, ingest
from bot.alerts.models import Alert, AlertGroup, AlertStatus, Page
from bot.alerts.node_jobs import job_per_node
from bot.alerts.ports import AlertMessages, AlertStore, Poster, Silencer, Update
from bot.alerts.reported import fault_of, judged
from bot.alerts.route import route
from bot.alerts.standing import NO_SCHEDULER, Standings, standings
from bot.alerts.sweep import first_seen, sweep_fingerprint, swept
from bot.errors import BackendError, FenceLost, PostError
from bot.models import Fault
from bot.offload import Offload
from bot.ports import Fence, Inventory, Located, Scheduler
from bot.triage.service import Triage, fleet_faults, judge_reported

log = logging.getLogger(__name__)

NOTIFY_LOCK = "notify"
SWEEP_LOCK = "sweep"
SWEEP_LEASE_MS = 30_000
"""Beyond its interval, how long the sweep's lock may be held while a sweep runs."""
SWEEP_BEAT_SLACK = 0.1
"""The share of the interval by which the sweep's lock lapses before the next beat: held to
the beat itself, it lapsed a few milliseconds after it (the sweep begins after its beat), so
every other beat found it held and the fleet was swept every two intervals."""
SWEEP_REST = 0.25
"""After a sweep that took longer than the interval, this share of it before the next."""
SWEEP_DUTY = 2.0
"""Sweeps start at least this many times their own duration apart: a big fleet's (or a loaded
source's) sweeps come less often rather than one after another, keeping the source busy
with meowbot half of the time at most."""


def next_sweep(due: float, every: float, now: float, took: float = 0.0) -> float:
    """When the sweep after the one due at `due` (which took `took` seconds) starts, on the
    monotonic clock: an interval after that one was due, not after it ended (a fault waits
    half an interval for the next sweep, not half of it plus a sweep's time), stretched to
    SWEEP_DUTY times the sweep's duration; after one that overran, a short rest."""
    return max(due + max(every, SWEEP_DUTY * took), now + SWEEP_REST * every)


LOCK_TTL_MS = 5_000
TICK_S = 0.2
TOPOLOGY_TIMEOUT_S = 2.0
# The scheduler's running jobs, read once an ingest for every alerting node: bounded, since a
# webhook's answer and the sweep wait for it.
JOBS_TIMEOUT_S = 2.0
# Sweeps further apart than this, or three intervals, are two watches (bot/alerts/sweep.py).
WATCH_GAP_MIN_S = 60.0


@dataclass
class Alerting:
    store: AlertStore
    poster: Poster
    cfg: AlertsConfig
    triage: Triage  # the sweep and the judging of reported faults: the triage's whole work
    messages: AlertMessages  # what the notifier posts, built at the edge
    # What the alerts use on their own, the triage's same objects, handed by the composition
    # root: the places of the nodes, the scheduler to drain through, the worker pool.
    inventory: Inventory
    scheduler: Scheduler | None
    cpu: Offload
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # The notifier's memory of its own calls, for Slack's one message a second a channel: on
    # the monotonic clock (`ticks`), so that a wall clock set back cannot hold a channel.
    last_call_at: dict[str, float] = field(default_factory=dict)
    storm_shown: dict[str, str] = field(default_factory=dict)  # channel -> digest on show
    silencer: Silencer | None = None
    _fence: Fence | None = None
    # Thread lines were waiting at the last pass: the next one looks even with nothing queued.
    _replies_waiting: bool = False
    _led_at: float | None = None  # ticks.now() when this replica took the lead
    _auto_tried: set[tuple[str, str]] = field(default_factory=set)

    # ingest -----------------------------------------------------------------------------------

    async def topology(self) -> Callable[[str], Located | None]:
        inventory = self.inventory
        try:
            await asyncio.wait_for(inventory.load(), TOPOLOGY_TIMEOUT_S)
        except (BackendError, TimeoutError):
            # Grouping then falls back to one group per node: an alert is never refused for it.
            log.warning("topology unavailable; alerts group by node")
        return inventory.place

    def describe(self, node: str) -> dict[str, str]:
        """What the inventory knows of a node, for what an event's nodes share
        (`Alert.facts`); read from what `topology` loaded, so no I/O."""
        known = self.inventory.node(node)
        if known is None:
            place = self.inventory.place(node)
            return {"rack": place.rack, "leaf_switch": place.leaf_switch} if place else {}
        facts = {
            "rack": known.rack,
            "leaf_switch": known.leaf_switch,
            "driver": known.driver_version,
            "kernel": known.kernel_version,
        }
        return {k: v for k, v in facts.items() if v}

    async def running_jobs(self, alerts: Sequence[Alert]) -> dict[str, str]:
        """Node -> the job it runs (`bot/alerts/node_jobs.py`), for the firing alerts' nodes
        whose labels name no job: one read of the scheduler for the whole batch. Slurm out of
        reach or slow leaves the events without a job fact, never the alerts unstored."""
        scheduler = self.scheduler
        nodes = {
            a.node
            for a in alerts
            if a.node and a.status is AlertStatus.FIRING and not a.facts.get("job")
        }
        if scheduler is None or not nodes:
            return {}
        try:
            jobs = await asyncio.wait_for(scheduler.jobs(), JOBS_TIMEOUT_S)
        except (BackendError, TimeoutError) as exc:
            log.warning(
                "running jobs unknown; alert events name no job",
                extra={"nodes": len(nodes), "error": str(exc) or type(exc).__name__},
            )
            return {}
        return job_per_node(jobs, nodes)

    def describer(self, jobs: Mapping[str, str]) -> Callable[[str], dict[str, str]]:
        """`describe` with the job each node runs (`running_jobs`) besides the inventory's."""

        def described(node: str) -> dict[str, str]:
            facts = self.describe(node)
            if node in jobs:
                facts["job"] = jobs[node]
            return facts

        return described

    async def receive(self, alerts: list[Alert], now: datetime) -> Ingested:
        alerts = await self.with_history(alerts, now)
        describe = self.describer(await self.running_jobs(alerts))
        done = await ingest(
            self.store,
            alerts,
            await self.topology(),
            self.cfg,
            now,
            describe=describe,
            cpu=self.cpu,
        )
        self.wake.set()
        return done

    async def with_history(self, alerts: list[Alert], now: datetime) -> list[Alert]:
        """Alertmanager's alerts of a fault kind recorded in the fault history, as the sweep
        records its faults (one occurrence however many deliveries and sources), and marked
        as a repeat offender's as the sweep marks its own (bot/alerts/reported.py)."""
        reported = [(i, f) for i, a in enumerate(alerts) if (f := fault_of(a)) is not None]
        if not reported:
            return alerts
        faults = await judge_reported(self.triage, [f for _, f in reported], now)
        out = list(alerts)
        for (i, _), fault in zip(reported, faults, strict=True):
            out[i] = judged(out[i], fault)
        return out

    # the sweep ----------------------------------------------------------------------------------

    @property
    def can_sweep(self) -> bool:
        """Whether there are metrics to sweep: without them (a scheduler alone) the sweep
        reads nothing, so it posts nothing, rather than "all clear"."""
        return self.triage.metrics is not None

    async def sweep_once(self) -> Ingested | None:
        """Sweeps the fleet unless another replica did within the interval (None: not swept,
        by another replica or for want of metrics)."""
        if not self.can_sweep:
            return None
        interval_ms = int(self.cfg.sweep_interval_s * 1000)
        # Held for the sweep however long it takes (a read may take its whole deadline), then
        # for the rest of the interval from its start (less `SWEEP_BEAT_SLACK`), so that no
        # replica sweeps again before the next beat.
        fence = await self.store.acquire(SWEEP_LOCK, interval_ms + SWEEP_LEASE_MS)
        if fence is None:
            return None
        began = ticks.now()
        try:
            return await self._sweep(fence)
        finally:
            lapse_ms = interval_ms - int(interval_ms * SWEEP_BEAT_SLACK)
            rest_ms = lapse_ms - int((ticks.now() - began) * 1000)
            with contextlib.suppress(Exception):  # a lost lease needs no trim
                await self.store.renew(fence, max(1, rest_ms))

    async def _sweep(self, fence: Fence) -> Ingested:
        now = self.clock()
        found = await fleet_faults(self.triage, self.cfg.sweep_window_s)
        # Recorded once the fleet was read: a sweep that failed watched nothing.
        watch_start = await self.store.watching(now, self.watch_gap_s)
        groups = await self.store.groups(await self.store.open_ids())
        seen = await self.first_seen(found.faults, groups.values(), now)
        # Thousands of alerts at 50,000 nodes: built and compared on a worker, so that the
        # acks of commands arriving meanwhile are not held back by the sweep's own work.
        alerts = await self.cpu.run(
            swept,
            found.faults,
            found.unchecked,
            groups.values(),
            now,
            seen,
            watch_start,
            found.at,
        )
        describe = self.describer(await self.running_jobs(alerts))
        done = await ingest(
            self.store,
            alerts,
            await self.topology(),
            self.cfg,
            now,
            fence=fence,
            describe=describe,
            pause=self.cpu.before,
            cpu=self.cpu,
        )
        self.wake.set()
        return done

    @property
    def watch_gap_s(self) -> float:
        """Sweeps further apart than this (a restart, a stop) begin a new watch: what
        happened between them meowbot did not see."""
        return max(WATCH_GAP_MIN_S, 3.0 * self.cfg.sweep_interval_s)

    async def first_seen(
        self, faults: Sequence[Fault], groups: Iterable[AlertGroup], now: datetime
    ) -> dict[str, datetime]:
        """When the fault history first saw the faults that are not open alerts yet (by
        sweep fingerprint): one bounded read of their nodes' history. Out of reach: none,
        and the alerts start now (said as what meowbot saw, not more)."""
        history = self.triage.history
        open_fps = {a.fingerprint for g in groups for a in g.firing}
        new = [
            f for f in faults if sweep_fingerprint(fault_cause(f), f.node, f.gpu) not in open_fps
        ]
        if history is None or not new:
            return {}
        try:
            stored = await asyncio.wait_for(
                history.occurrences(sorted({f.node for f in new})), JOBS_TIMEOUT_S
            )
        except (BackendError, TimeoutError) as exc:
            log.warning(
                "fault history unread; new alerts start now",
                extra={"error": str(exc) or type(exc).__name__},
            )
            return {}
        gap_s = self.triage.config.repeat.gap_s
        return await self.cpu.run(first_seen, new, stored, now, gap_s)

    async def sweeper(self, stop: asyncio.Event) -> None:
        if not self.can_sweep:
            log.warning("no metrics source: the passive sweep is off (set PROMETHEUS_URL)")
            return
        every = float(self.cfg.sweep_interval_s)
        due = ticks.now()
        while not stop.is_set():
            began = ticks.now()
            try:
                await self.sweep_once()
            except (BackendError, FenceLost) as exc:
                log.warning("sweep failed", extra={"error": str(exc)})
            except Exception:  # the loop must outlive any one bad sweep (Redis down included)
                log.exception("sweep crashed")
            now = ticks.now()
            due = next_sweep(due, every, now, now - began)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), due - ticks.now())

    # the notifier -------------------------------------------------------------------------------

    async def _lead(self) -> Fence | None:
        if self._fence is not None and await self.store.renew(self._fence, LOCK_TTL_MS):
            return self._fence
        self._fence = await self.store.acquire(NOTIFY_LOCK, LOCK_TTL_MS)
        if self._fence is not None:
            # A new leader knows nothing of the last one's calls or what its summaries show:
            # it takes every channel as called just now, so the old leader's last call and its
            # first are still a second apart.
            self.last_call_at.clear()
            self.storm_shown.clear()
            self._led_at = ticks.now()
        return self._fence

    def _routed(self, group: AlertGroup, now: datetime) -> AlertGroup | None:
        """The group with its channel; None while it is held (quiet hours, no channel) or
        is not for a channel at all (`policy.posted`: an info finding, by default)."""
        if not policy.posted(group, self.cfg):
            return None
        if group.channel:
            return group
        where = route(group, self.cfg, now)
        if where.quiet or not where.channel:
            return None
        return group.model_copy(update={"channel": where.channel})

    async def notify_once(self) -> int:
        """One pass of the notifier; returns the Slack calls made (0 when not the leader)."""
        fence = await self._lead()
        if fence is None:
            return 0
        queued = await self.store.dirty()
        if not queued and not any(self.storm_shown.values()) and not self._replies_waiting:
            return 0
        seen = dict(queued)
        now = self.clock()
        queued_groups = list((await self.store.groups(list(seen))).values())
        for g in queued_groups:
            # Not for a channel (an info finding): nothing to post now; a change that makes
            # it one (a warning joining) queues it again.
            if not policy.posted(g, self.cfg):
                await self.store.clean(g.key.id, seen.get(g.key.id, 0.0))
        dirty = [g for g in (self._routed(g, now) for g in queued_groups) if g is not None]
        everyone = [
            g
            for g in (
                self._routed(g, now)
                for g in (await self.store.groups(await self.store.open_ids())).values()
            )
            if g is not None
        ]
        for g in dirty:
            if not notify.needs_message(g):  # resolved before it was posted (a storm's, held)
                await self.store.clean(g.key.id, seen.get(g.key.id, 0.0))
        replies = {g.key.id: g.replies for g in (*everyone, *dirty) if g.replies}
        self._replies_waiting = bool(replies)
        # The plan reads the calls as wall-clock times: each as long before `now` as it was.
        called = {
            c: now - timedelta(seconds=ticks.since(at)) for c, at in self.last_call_at.items()
        }
        if self._led_at is not None:
            led = now - timedelta(seconds=ticks.since(self._led_at))
            for g in (*dirty, *everyone):
                called.setdefault(g.channel, led)
        since: dict[str, str] = {}
        for channel, digest in self.storm_shown.items():
            ts = await self.store.storm_ts(channel) if digest else None
            if ts is not None:
                since[channel] = ts
        steps = notify.plan(
            dirty,
            now,
            called,
            self.cfg,
            open_groups=everyone,
            replies=replies,
            storm_digest_shown=self.storm_shown,
            storm_since=since,
        )
        calls = 0
        stand = await self._standings(steps)
        for step in steps:
            calls += await self._run_step(step, fence, seen, stand)
            # From the call's end: a slow call must not let the next one arrive within 1 s.
            self.last_call_at[step.channel] = ticks.now()
        if self.cfg.auto_drain_causes:
            await self._auto_drain(dirty, now, fence)
        return calls

    async def _auto_drain(self, groups: list[AlertGroup], now: datetime, fence: Fence) -> None:
        """The opt-in auto-drain, run by the notifier's leader only: once per node and group
        (claimed in Redis, so a new leader does not drain again); its lines join the thread."""
        wanted = [
            g
            for g in groups
            if policy.auto_drain(g, self.cfg)
            and any((g.key.id, a.node) not in self._auto_tried for a in g.firing if a.node)
        ]
        if not wanted:
            return
        inventory = self.inventory
        await inventory.load()
        fleet = len(inventory.names())
        for group in wanted:
            gid = group.key.id
            self._auto_tried.update((gid, a.node) for a in group.firing if a.node)
            lines = await acts.auto_drain_group(
                self.store, self.scheduler, self.cfg, group, now, fleet
            )
            if lines:
                log.info("auto-drain", extra={"group": gid, "lines": len(lines)})
                await self.store.update(gid, _add_replies(lines), fence=fence)

    async def _run_step(
        self, step: notify.Step, fence: Fence, seen: dict[str, float], stand: Standings
    ) -> int:
        channel = step.channel
        try:
            if step.kind is notify.StepKind.STORM_SUMMARY:
                links = {
                    g.key.id: link
                    for g in step.groups
                    if g.ts is not None
                    and (link := await self.poster.link(channel, g.ts)) is not None
                }
                message = self.messages.storm(step.groups, self.clock(), links)
                ts = await self.store.storm_ts(channel)
                if ts is None:
                    ts = await self.poster.post(channel, message)
                    await self.store.set_storm_ts(channel, ts, fence)
                else:
                    await self.poster.update(channel, ts, message)
                self.storm_shown[channel] = step.text
                if not step.groups:  # the storm is over: the next one gets a new summary
                    await self.store.set_storm_ts(channel, None, fence)
                return 1
            group = step.group
            assert group is not None
            gid = group.key.id
            if step.kind is notify.StepKind.THREAD_REPLY:
                if group.ts:
                    await self.poster.post(
                        channel, self.messages.reply(step.text), thread_ts=group.ts
                    )
                await self.store.update(gid, _drop_replies(group.replies), fence=fence)
                return 1
            now = self.clock()
            if step.kind is notify.StepKind.PAGE:
                return await self._write_page(group, step.page, fence, seen, stand)
            message = self.messages.group(group, self.cfg, now, stand)
            ts = group.ts
            if ts is None:
                ts = await self.poster.post(channel, message)
            else:
                await self.poster.update(channel, ts, message)
            drawn = notify.drawn(group)

            def shown(g: AlertGroup | None, ts: str = ts) -> Update[None]:
                base = g or group
                # Storing it again also retires a fully resolved group from the open set.
                return Update(
                    base.model_copy(update={"ts": ts, "channel": channel, "drawn": drawn}),
                    None,
                    dirty=False,
                )

            # The first post's ts must outlive a failover: lost, the message is posted again.
            await self.store.update(gid, shown, fence=fence, durable=group.ts is None)
            if pages.stale(group.model_copy(update={"ts": ts})) is None:
                await self.store.clean(gid, seen.get(gid, 0.0))
            return 1
        except PostError as exc:
            # Left queued: a later pass tries again (slack_sdk already waited out 429s).
            log.warning("slack refused an alert message", extra={"error": exc.error})
            return 1

    async def _write_page(
        self,
        group: AlertGroup,
        index: int,
        fence: Fence,
        seen: dict[str, float],
        stand: Standings,
    ) -> int:
        """Posts or rewrites one reply of the group's per-node detail in its thread."""
        assert group.ts is not None
        rows = pages.pages(group)[index]
        message = self.messages.page(group, rows, index, self.cfg, stand)
        old = group.pages[index] if index < len(group.pages) else None
        if old is None:
            ts = await self.poster.post(group.channel, message, thread_ts=group.ts)
        else:
            ts = old.ts
            await self.poster.update(group.channel, ts, message)
        written = Page(ts=ts, digest=pages.digest(rows, group.resolved))

        def keep(g: AlertGroup | None) -> Update[AlertGroup | None]:
            if g is None:
                return Update(None, None, dirty=False)
            have = list(g.pages)
            if index < len(have):
                have[index] = written
            elif index == len(have):
                have.append(written)
            new = g.model_copy(update={"pages": tuple(have)})
            return Update(new, new, dirty=False)

        stored = await self.store.update(group.key.id, keep, fence=fence, durable=old is None)
        if (
            stored is not None
            and pages.stale(stored) is None
            and stored.drawn == notify.drawn(stored)
        ):
            await self.store.clean(group.key.id, seen.get(group.key.id, 0.0))
        return 1

    async def _standings(self, steps: Sequence[notify.Step]) -> Standings:
        """Where the nodes of the pass's messages and pages stand in the scheduler: one
        bounded read for all of them, so each message's buttons fit its nodes' state
        (bot/alerts/standing.py). Out of reach or slow: not known, said in the message."""
        scheduler = self.scheduler
        if scheduler is None:
            return NO_SCHEDULER
        nodes = sorted(
            {
                a.node
                for step in steps
                if step.group is not None and step.kind is not notify.StepKind.THREAD_REPLY
                for a in step.group.firing
                if a.node
            }
        )
        if not nodes:
            return Standings(scheduler.name, {})
        try:
            states = await asyncio.wait_for(scheduler.nodes(nodes), JOBS_TIMEOUT_S)
        except (BackendError, TimeoutError) as exc:
            log.warning(
                "node states unknown; alert buttons drawn without them",
                extra={"nodes": len(nodes), "error": str(exc) or type(exc).__name__},
            )
            return Standings(scheduler.name, None)
        return standings(scheduler.name, states, nodes)

    async def notifier(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            # Cleared before the pass, not after: a sweep that stores alerts during the pass
            # wakes the next one at once instead of being lost until the tick.
            self.wake.clear()
            try:
                await self.notify_once()
            except FenceLost:
                self._fence = None
            except Exception:  # Redis or Slack down: keep going; the queue keeps the work
                log.exception("notifier pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), TICK_S)

    async def release(self) -> None:
        if self._fence is not None:
            with contextlib.suppress(Exception):
                await self.store.release(self._fence)
            self._fence = None


def _add_replies(lines: list[str]) -> Callable[[AlertGroup | None], Update[None]]:
    def add(g: AlertGroup | None) -> Update[None]:
        if g is None:
            return Update(None, None, dirty=False)
        return Update(g.model_copy(update={"replies": (*g.replies, *lines)}), None, dirty=True)

    return add


def _drop_replies(posted: tuple[str, ...]) -> Callable[[AlertGroup | None], Update[None]]:
    """Removes the lines just posted; lines added meanwhile stay for the next reply."""

    def drop(g: AlertGroup | None) -> Update[None]:
        if g is None:
            return Update(None, None, dirty=False)
        left = list(g.replies)
        for line in posted:
            if line in left:
                left.remove(line)
        return Update(g.model_copy(update={"replies": tuple(left)}), None, dirty=False)

    return drop
