"""Ingest: alerts from any source join their groups in the store, once each.

Both sources come through here: the Alertmanager webhook and the passive sweep. An alert finds
its group by its fingerprint first (a resolved alert keeps the group it fired in, even if the
topology changed since), otherwise by its group key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from bot.alerts.config import AlertsConfig
from bot.alerts.dispatch import Change, group_key, merge
from bot.alerts.lines import repeat_line
from bot.alerts.models import Alert, AlertGroup, GroupKey
from bot.alerts.ports import AlertStore, Update
from bot.give_way import give_way
from bot.offload import Offload
from bot.ports import Fence, Located

MAX_REPLIES = 50  # waiting thread lines a group keeps; a flapping alert cannot grow it forever

# Changes that need the group's message posted or updated. A REPEAT (the same alert in the same
# state again: a webhook delivered twice, or to three replicas) changes nothing anyone sees.
_SHOWN = {
    Change.NEW_GROUP,
    Change.JOINED,
    Change.RESOLVED_MEMBER,
    Change.GROUP_RESOLVED,
    Change.REOPENED,
    Change.REFIRED,
}


BATCH = 64
"""Alerts of one group a transaction takes: bounded, so that folding them never holds the
event loop for long (a merge is tens of microseconds; 64 of them a few milliseconds)."""


@dataclass
class Ingested:
    changes: Counter[Change] = field(default_factory=Counter)
    groups: set[str] = field(default_factory=set)

    @property
    def alerts(self) -> int:
        return sum(self.changes.values())


async def ingest(
    store: AlertStore,
    alerts: Iterable[Alert],
    topology: Callable[[str], Located | None],
    cfg: AlertsConfig,
    now: datetime,
    *,
    fence: Fence | None = None,
    describe: Callable[[str], Mapping[str, str]] | None = None,
    pause: Callable[[], Awaitable[None]] | None = None,
    cpu: Offload | None = None,
) -> Ingested:
    """`describe`: what the inventory knows of a node (`Alert.facts`); an alert's own labels
    win over it. `pause` is awaited before each write: a sweep's thousands of alerts give way
    to the acks of commands arriving meanwhile (bot/inflight.py: acks_out).

    The alerts of one group are written together, up to BATCH at a time: one transaction for
    them, not one each (a sweep of 50,000 nodes made some 26,000 Redis round trips, each of
    them a wait for the interpreter lock while workers evaluate the fleet). Within a batch
    they join in the order given, as they would one by one. With `cpu` (the bot's worker
    pool), the alerts are described and grouped on a worker: a sweep's thousands at once."""
    done = Ingested()
    given = list(alerts)
    known = await store.groups_of([a.fingerprint for a in given])
    grouping = (given, known, topology, cfg, describe)
    by_group = await cpu.run(_grouped, *grouping) if cpu is not None else _grouped(*grouping)
    for gid, members in by_group.items():
        key = GroupKey.parse(gid)
        for first in range(0, len(members), BATCH):
            if pause is not None:
                await pause()
            batch = members[first : first + BATCH]
            whats = await store.update(gid, partial(_join, batch, key, now), fence=fence)
            done.changes.update(whats)
            done.groups.add(gid)
    return done


def _grouped(
    alerts: list[Alert],
    known: list[str | None],
    topology: Callable[[str], Located | None],
    cfg: AlertsConfig,
    describe: Callable[[str], Mapping[str, str]] | None,
) -> dict[str, list[Alert]]:
    """Group id -> its alerts in the order given, each with what the inventory knows of its
    node: the group it fired in (`known`, by fingerprint), else the group its key names."""
    by_group: dict[str, list[Alert]] = {}
    for i, (alert, gid) in enumerate(zip(alerts, known, strict=True)):
        if i % BATCH == BATCH - 1:
            give_way()
        if describe is not None and alert.node:
            alert = alert.model_copy(update={"facts": {**describe(alert.node), **alert.facts}})
        by_group.setdefault(gid or group_key(alert, topology, cfg).id, []).append(alert)
    return by_group


def _join(
    alerts: list[Alert], key: GroupKey, now: datetime, group: AlertGroup | None
) -> Update[list[Change]]:
    """`alerts` joined to `group` one after the other, as one write: the changes each made."""
    whats: list[Change] = []
    fingerprints: list[str] = []
    dirty = changed = False
    for alert in alerts:
        merged, what = merge(group, alert, now, key=key if group is None else None)
        whats.append(what)
        if what in (Change.REPEAT, Change.IGNORED):
            continue
        if what is Change.REFIRED:
            # Repeats go into the thread, besides the message's own update.
            merged = merged.model_copy(
                update={"replies": (*merged.replies, repeat_line(alert))[-MAX_REPLIES:]}
            )
        group, changed = merged, True
        dirty = dirty or what in _SHOWN
        fingerprints.append(alert.fingerprint)
    return Update(group if changed else None, whats, dirty=dirty, fingerprints=tuple(fingerprints))
