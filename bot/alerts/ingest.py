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

from bot.alerts.config import AlertsConfig
from bot.alerts.dispatch import Change, group_key, merge
from bot.alerts.lines import repeat_line
from bot.alerts.models import Alert, AlertGroup, GroupKey
from bot.alerts.ports import AlertStore, Update
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
) -> Ingested:
    """`describe`: what the inventory knows of a node (`Alert.facts`); an alert's own labels
    win over it. `pause` is awaited before each alert: a sweep's thousands of alerts give way
    to the acks of commands arriving meanwhile (bot/inflight.py: acks_out)."""
    done = Ingested()
    for alert in alerts:
        if pause is not None:
            await pause()
        if describe is not None and alert.node:
            alert = alert.model_copy(update={"facts": {**describe(alert.node), **alert.facts}})
        gid = await store.group_of(alert.fingerprint) or group_key(alert, topology, cfg).id
        key = GroupKey.parse(gid)

        def change(
            group: AlertGroup | None, alert: Alert = alert, key: GroupKey = key
        ) -> Update[Change]:
            merged, what = merge(group, alert, now, key=key if group is None else None)
            if what in (Change.REPEAT, Change.IGNORED):
                return Update(None, what, dirty=False)
            if what is Change.REFIRED:
                # Repeats go into the thread, besides the message's own update.
                merged = merged.model_copy(
                    update={"replies": (*merged.replies, repeat_line(alert))[-MAX_REPLIES:]}
                )
            return Update(
                merged,
                what,
                dirty=what in _SHOWN,
                fingerprints=(alert.fingerprint,),
            )

        what = await store.update(gid, change, fence=fence)
        done.changes[what] += 1
        done.groups.add(gid)
    return done
