"""The pure alert pipeline: grouping, dedup, routing, quiet hours, the rate planner, policy."""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from bot.alerts import pages
from bot.alerts.config import AlertsConfig
from bot.alerts.dispatch import Change, group_key, merge, scope_for
from bot.alerts.models import Alert, AlertGroup, AlertSource, AlertStatus, GroupKey, Page, Scope
from bot.alerts.notify import StepKind, drawn, needs_message, plan
from bot.alerts.policy import (
    ACK,
    DRAIN_AFTER_JOBS,
    DRAIN_NOW,
    RESUME,
    SILENCE,
    Outcome,
    auto_drain,
    blast_radius,
    offered_actions,
)
from bot.alerts.route import route
from bot.alerts.runtime import next_sweep
from bot.alerts.sweep import alerts_from_faults, resolved_by_sweep
from bot.config import ConfigError, load_settings
from bot.drain_reason import by_user as drain_reason
from bot.models import Action, Fault, FaultKind, Node, Severity

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
CFG = AlertsConfig(default_channel="C_ALERTS")


def node(name: str, leaf: str = "leaf-07", rack: str = "r01") -> Node:
    return Node(
        name=name,
        rack=rack,
        leaf_switch=leaf,
        spine="spine-1",
        gpus=(),
        nics=(),
        numa_nodes=2,
        driver_version="550",
        kernel_version="6.1",
        firmware_version="96",
        expected_gpus=8,
    )


def alert(
    fp: str,
    *,
    cause: str = "ib_link_down",
    node_name: str | None = "n001",
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    source: AlertSource = AlertSource.SWEEP,
    labels: dict[str, str] | None = None,
    summary: str = "link down",
) -> Alert:
    return Alert(
        fingerprint=fp,
        source=source,
        status=status,
        cause=cause,
        node=node_name,
        severity=severity,
        summary=summary,
        labels=labels or {},
        starts_at=T0,
    )


def apply(
    groups: dict[str, AlertGroup],
    a: Alert,
    topology,  # type: ignore[no-untyped-def]
    cfg: AlertsConfig = CFG,
) -> Change:
    key = group_key(a, topology, cfg)
    group, change = merge(groups.get(key.id), a, T0, key=key)
    if change not in (Change.REPEAT, Change.IGNORED):
        groups[key.id] = group
    return change


# --- dispatch -------------------------------------------------------------------------------


def test_scope_defaults_to_the_event_and_config_overrides_it() -> None:
    assert scope_for("ib_link_down", CFG) is Scope.EVENT
    assert scope_for("GpuFellOffBus", CFG) is Scope.EVENT
    cfg = AlertsConfig(group_scope={"xid": Scope.RACK})
    assert scope_for("xid", cfg) is Scope.RACK


def test_32_ib_down_alerts_are_one_event_whatever_their_leaves() -> None:
    nodes = {f"n{i:03d}": node(f"n{i:03d}", leaf=f"leaf-{i % 2}") for i in range(32)}
    groups: dict[str, AlertGroup] = {}
    changes = [apply(groups, alert(f"fp{i}", node_name=n), nodes.get) for i, n in enumerate(nodes)]
    assert changes[0] is Change.NEW_GROUP
    assert set(changes[1:]) == {Change.JOINED}
    assert list(groups) == ["ib_link_down|event|"]
    assert len(groups["ib_link_down|event|"].nodes) == 32
    # A cause configured to group by its leaf switch: one group a leaf.
    by_leaf: dict[str, AlertGroup] = {}
    cfg = AlertsConfig(group_scope={"ib_link_down": Scope.LEAF_SWITCH})
    for i, n in enumerate(nodes):
        apply(by_leaf, alert(f"fp{i}", node_name=n), nodes.get, cfg)
    assert sorted(by_leaf) == ["ib_link_down|leaf_switch|leaf-0", "ib_link_down|leaf_switch|leaf-1"]


def test_an_alertmanager_grouping_beyond_the_cause_keeps_events_apart() -> None:
    a = alert("a", source=AlertSource.ALERTMANAGER).model_copy(update={"event": "c0ffee"})
    b = alert("b", source=AlertSource.ALERTMANAGER)
    assert group_key(a, lambda _: None, CFG).id == "ib_link_down|event|c0ffee"
    assert group_key(b, lambda _: None, CFG).id == "ib_link_down|event|"


def test_unknown_topology_falls_back_to_node_and_no_node_to_none() -> None:
    cfg = AlertsConfig(group_scope={"ib_link_down": Scope.LEAF_SWITCH})
    key = group_key(alert("a", node_name="ghost"), lambda _: None, cfg)
    assert key == GroupKey(cause="ib_link_down", scope=Scope.NODE, scope_value="ghost")
    key = group_key(alert("b", node_name=None), lambda _: None, cfg)
    assert key.scope is Scope.NONE


def test_alertmanager_labels_win_over_inventory_for_a_configured_scope() -> None:
    cfg = AlertsConfig(group_scope={"ib_link_down": Scope.LEAF_SWITCH, "xid": Scope.JOB})
    nodes = {"n001": node("n001", leaf="leaf-01")}
    am = alert("a", source=AlertSource.ALERTMANAGER, labels={"leaf_switch": "leaf-99"})
    assert group_key(am, nodes.get, cfg).scope_value == "leaf-99"
    job = alert("b", cause="xid", source=AlertSource.ALERTMANAGER, labels={"job_id": "4242"})
    assert group_key(job, nodes.get, cfg) == GroupKey(
        cause="xid", scope=Scope.JOB, scope_value="4242"
    )
    # a sweep alert's labels are not topology
    sweep = alert("c", labels={"leaf_switch": "leaf-99"})
    assert group_key(sweep, nodes.get, cfg).scope_value == "leaf-01"


def test_same_alert_twice_is_a_repeat_and_changes_nothing() -> None:
    groups: dict[str, AlertGroup] = {}
    nodes = {"n001": node("n001")}
    assert apply(groups, alert("fp"), nodes.get) is Change.NEW_GROUP
    before = dict(groups)
    assert apply(groups, alert("fp"), nodes.get) is Change.REPEAT
    assert groups == before
    assert len(next(iter(groups.values())).alerts) == 1


def test_resolve_all_then_reopen() -> None:
    nodes = {f"n{i}": node(f"n{i}") for i in range(3)}
    groups: dict[str, AlertGroup] = {}
    for i in range(3):
        apply(groups, alert(f"fp{i}", node_name=f"n{i}"), nodes.get)
    resolved = AlertStatus.RESOLVED
    assert apply(groups, alert("fp0", node_name="n0", status=resolved), nodes.get) is (
        Change.RESOLVED_MEMBER
    )
    assert apply(groups, alert("fp1", node_name="n1", status=resolved), nodes.get) is (
        Change.RESOLVED_MEMBER
    )
    assert apply(groups, alert("fp2", node_name="n2", status=resolved), nodes.get) is (
        Change.GROUP_RESOLVED
    )
    (group,) = groups.values()
    assert group.resolved and len(group.alerts) == 3
    assert apply(groups, alert("fp2", node_name="n2", status=resolved), nodes.get) is Change.REPEAT
    assert apply(groups, alert("fp1", node_name="n1"), nodes.get) is Change.REOPENED
    assert not groups[group.key.id].resolved
    # fp0 had resolved inside a group that is open again: its return is a repeat for the thread.
    assert apply(groups, alert("fp0", node_name="n0"), nodes.get) is Change.REFIRED
    assert len(groups[group.key.id].firing) == 2


def test_resolved_alert_for_unknown_fingerprint_changes_nothing() -> None:
    groups: dict[str, AlertGroup] = {}
    nodes = {"n001": node("n001")}
    assert apply(groups, alert("x", status=AlertStatus.RESOLVED), nodes.get) is Change.IGNORED
    assert groups == {}
    apply(groups, alert("fp"), nodes.get)
    assert apply(groups, alert("other", status=AlertStatus.RESOLVED), nodes.get) is Change.IGNORED
    assert len(next(iter(groups.values())).alerts) == 1


# --- sweep ----------------------------------------------------------------------------------


def fault(kind: FaultKind, node_name: str, gpu: int | None = None) -> Fault:
    return Fault(
        kind=kind,
        node=node_name,
        gpu=gpu,
        since=T0 - timedelta(minutes=5),
        severity=Severity.CRITICAL,
        action=Action.DRAIN,
        summary="Xid 79: GPU fell off the bus",
    )


def test_sweep_alerts_have_stable_fingerprints_and_resolve_when_gone() -> None:
    faults = [
        fault(FaultKind.XID, "n1", 3),
        fault(FaultKind.XID, "n1", 3),
        fault(FaultKind.XID, "n2"),
    ]
    first = alerts_from_faults(faults, T0)
    assert len(first) == 2  # the same fault twice is one alert
    again = alerts_from_faults([fault(FaultKind.XID, "n1", 3)], T0 + timedelta(minutes=1))
    assert again[0].fingerprint == first[0].fingerprint
    assert first[0].cause == "xid" and first[0].labels == {"node": "n1", "gpu": "3"}
    assert first[0].severity is Severity.CRITICAL and first[0].starts_at == T0 - timedelta(
        minutes=5
    )
    later = T0 + timedelta(minutes=1)
    gone = resolved_by_sweep({a.fingerprint: a for a in first}, again, later)
    assert [(a.node, a.status, a.ends_at) for a in gone] == [("n2", AlertStatus.RESOLVED, later)]


# --- route ----------------------------------------------------------------------------------


def group_of(*alerts: Alert, channel: str = "C_ALERTS", ts: str | None = None) -> AlertGroup:
    a = alerts[0]
    key = GroupKey(cause=a.cause, scope=Scope.NODE, scope_value=a.node or "")
    return AlertGroup(
        key=key, alerts=alerts, opened_at=T0 - timedelta(minutes=1), channel=channel, ts=ts
    )


def test_routes_first_match_wins_else_default() -> None:
    cfg = AlertsConfig.parse(
        {
            "default_channel": "C_DEFAULT",
            "routes": [
                {"match": {"severity": "critical", "cause": "xid"}, "channel": "C_XID"},
                {"match": {"severity": "critical"}, "channel": "C_CRIT"},
                {"match": {"cause": "xid"}, "channel": "C_XID_LOW"},
            ],
        }
    )
    assert (
        route(group_of(alert("a", cause="xid", severity=Severity.CRITICAL)), cfg, T0).channel
        == "C_XID"
    )
    assert (
        route(group_of(alert("a", cause="ecc_dbe", severity=Severity.CRITICAL)), cfg, T0).channel
        == "C_CRIT"
    )
    assert route(group_of(alert("a", cause="xid")), cfg, T0).channel == "C_XID_LOW"
    assert route(group_of(alert("a", cause="nic_errors")), cfg, T0).channel == "C_DEFAULT"


def test_no_channel_is_an_error_value() -> None:
    r = route(group_of(alert("a")), AlertsConfig(), T0)
    assert not r.ok and r.channel == "" and "MEOWBOT_ALERT_CHANNEL" in r.error


def test_quiet_hours_in_a_non_utc_timezone_hold_low_severity() -> None:
    cfg = AlertsConfig.parse(
        {
            "default_channel": "C",
            "quiet_hours": {
                "start": "22:00",
                "end": "07:00",
                "timezone": "America/New_York",
                "max_severity": "warning",
            },
        }
    )
    # 03:30 UTC on 3 Dec is 22:30 in New York (EST, UTC-5): quiet.
    night = datetime(2026, 12, 4, 3, 30, tzinfo=UTC)
    low = route(group_of(alert("a", severity=Severity.WARNING)), cfg, night)
    assert low.quiet and low.hold_until == datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    high = route(group_of(alert("a", severity=Severity.CRITICAL)), cfg, night)
    assert not high.quiet and high.hold_until is None
    # 23:30 UTC is 18:30 in New York: not quiet, though it would be in UTC.
    evening = datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
    assert not route(group_of(alert("a", severity=Severity.INFO)), cfg, evening).quiet


# --- config ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (
            {"quiet_hours": {"start": "22:00", "end": "07:00", "timezone": "Mars/Olympus"}},
            "timezone",
        ),
        ({"storm_groups": 0}, "storm_groups"),
        ({"routes": [{"match": {"severity": "loud"}, "channel": "C"}]}, "severity"),
        ({"runbooks": {"xid": "ftp://x"}}, "runbooks"),
        ({"silence_durations_s": [10]}, "silence_durations_s"),
        ({"drain_share_per_hour": 2}, "drain_share_per_hour"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_config_errors_are_one_sentence(data: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        AlertsConfig.parse(data)
    text = str(info.value)
    assert where in text and text.endswith(".") and "\n" not in text


def test_config_from_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "meowbot.yaml"
    path.write_text("alerts:\n  storm_groups: 5\n  auto_drain_causes: [xid]\n")
    settings = load_settings(
        MEOWBOT_CONFIG=str(path), MEOWBOT_ALERT_CHANNEL="C_ENV", MEOWBOT_SWEEP_INTERVAL="30"
    )
    cfg = AlertsConfig.from_settings(settings)
    assert (cfg.default_channel, cfg.sweep_interval_s, cfg.storm_groups) == ("C_ENV", 30, 5)
    assert cfg.auto_drain_causes == frozenset({"xid"}) and cfg.drain_share_per_hour == 0.02
    with pytest.raises(ConfigError, match="MEOWBOT_SWEEP_INTERVAL"):
        load_settings(MEOWBOT_SWEEP_INTERVAL="0")


# --- notify: the rate planner ---------------------------------------------------------------


def test_a_burst_is_gathered_before_its_first_event_is_posted() -> None:
    """Alertmanager sends one burst as a webhook per group: until the channel has been quiet
    for `burst_quiet_s` nothing new is posted, so the burst is counted whole (a storm summary
    rather than its first few events one by one); a steady trickle is held `burst_hold_s` at
    most."""
    AM = AlertSource.ALERTMANAGER
    cfg = AlertsConfig(default_channel="C", burst_quiet_s=2, burst_hold_s=15)
    first = group_of(alert("a", node_name="n1", source=AM), channel="C").model_copy(
        update={"opened_at": T0}
    )
    assert plan([first], T0 + timedelta(seconds=1), {}, cfg) == []
    (step,) = plan([first], T0 + timedelta(seconds=2), {}, cfg)
    assert step.kind is StepKind.POST and step.group is not None and step.group.key == first.key
    # One opening a second for 20 s: held until the oldest has waited 15 s, then posted.
    trickle = [
        group_of(alert(f"t{i}", node_name=f"n{i}", source=AM), channel="C").model_copy(
            update={"opened_at": T0 + timedelta(seconds=i)}
        )
        for i in range(20)
    ]
    assert plan(trickle[:15], T0 + timedelta(seconds=14.5), {}, cfg) == []
    (step,) = plan(trickle[:16], T0 + timedelta(seconds=15.5), {}, cfg)
    assert step.kind is StepKind.POST
    # The wall clock set back an hour after an event opened: the new one is posted, not held
    # until the clock catches up or the hold runs out.
    later = group_of(alert("b", node_name="n2", source=AM), channel="C").model_copy(
        update={"opened_at": T0 - timedelta(hours=1)}
    )
    posted = first.model_copy(update={"ts": "1.0"})
    (step,) = plan([later], T0 - timedelta(hours=1), {}, cfg, open_groups=[posted, later])
    assert step.kind is StepKind.POST and step.group is not None and step.group.key == later.key
    # A sweep opens all its events in one pass: they are posted at once.
    swept = group_of(alert("s", node_name="n9"), channel="C").model_copy(update={"opened_at": T0})
    (step,) = plan([swept], T0, {}, cfg)
    assert step.kind is StepKind.POST
    # Quiet 0 posts at once (the old behaviour, for a channel that wants it).
    (step,) = plan([first], T0, {}, cfg.model_copy(update={"burst_quiet_s": 0}))
    assert step.kind is StepKind.POST


def test_storm_of_500_alerts_never_plans_more_than_one_call_a_second_a_channel() -> None:
    cfg = AlertsConfig(default_channel="C", storm_groups=20)
    nodes = {f"n{i:03d}": node(f"n{i:03d}", leaf=f"leaf-{i % 16:02d}") for i in range(500)}
    channels = ["C_A", "C_B"]
    groups: dict[str, AlertGroup] = {}
    dirty: set[str] = set()
    last_call: dict[str, datetime] = {}
    shown: dict[str, str] = {}
    calls: dict[str, list[datetime]] = defaultdict(list)
    kinds: list[StepKind] = []
    posted = 0
    names = list(nodes)
    # 250 distinct causes on half the nodes make 250 one-node events; the rest are one event
    pending = [
        alert(f"fp{i}", node_name=n, cause="ib_link_down" if i % 2 else f"xid_{i}")
        for i, n in enumerate(names)
    ]
    now = T0
    for tick in range(400):  # ticks of 250 ms: 10 s of arrivals, then the backlog drains
        now = T0 + timedelta(milliseconds=250 * tick)
        for a in pending[tick * 13 : tick * 13 + 13]:
            key = group_key(a, nodes.get, cfg)
            g, change = merge(groups.get(key.id), a, now, key=key)
            if change is Change.NEW_GROUP:
                g = g.model_copy(update={"channel": channels[len(groups) % 2]})
            groups[key.id] = g
            dirty.add(key.id)
        steps = plan(
            [groups[i] for i in dirty],
            now,
            last_call,
            cfg,
            open_groups=list(groups.values()),
            storm_digest_shown=shown,
        )
        assert len({s.channel for s in steps}) == len(steps)
        for step in steps:
            calls[step.channel].append(now)
            last_call[step.channel] = now
            kinds.append(step.kind)
            if step.kind is StepKind.STORM_SUMMARY:
                shown[step.channel] = step.text
                assert len(step.groups) > 0
            else:
                assert step.group is not None
                gid = step.group.key.id
                if step.kind is StepKind.POST:
                    posted += 1
                    groups[gid] = groups[gid].model_copy(update={"ts": f"{tick}.0"})
                if step.kind in (StepKind.POST, StepKind.UPDATE):
                    groups[gid] = groups[gid].model_copy(update={"drawn": drawn(groups[gid])})
                if step.kind is StepKind.PAGE:
                    rows = pages.pages(groups[gid])[step.page]
                    have = [*groups[gid].pages, Page(ts="p", digest="")][: step.page + 1]
                    have[step.page] = Page(ts="p", digest=pages.digest(rows, False))
                    groups[gid] = groups[gid].model_copy(update={"pages": tuple(have)})
                if pages.stale(groups[gid]) is None:
                    dirty.discard(gid)
    for _channel, times in calls.items():
        assert all(b - a >= timedelta(seconds=1) for a, b in itertools.pairwise(times))
    # odd nodes (ib_link_down) are one event across their 8 leaves; even ones one each
    assert len(groups) == 250 + 1
    assert sum(len(g.alerts) for g in groups.values()) == 500  # none lost, none twice
    assert not dirty - {gid for gid, g in groups.items() if g.ts is None}  # only storm-held wait
    # above the threshold, nothing new is posted one by one: only the storm summary
    assert posted <= 2 * cfg.storm_groups + 2
    assert StepKind.STORM_SUMMARY in kinds
    assert sum(len(t) for t in calls.values()) < 2 * 100  # bounded: 100 s at most


def test_planner_coalesces_changes_and_waits_a_second() -> None:
    g = group_of(alert("a"), ts="1.0")
    newer = g.model_copy(update={"alerts": (*g.alerts, alert("b", node_name="n002"))})
    steps = plan([g, newer], T0, {}, CFG)
    assert [(s.kind, s.group) for s in steps] == [(StepKind.UPDATE, newer)]
    assert plan([newer], T0 + timedelta(milliseconds=999), {"C_ALERTS": T0}, CFG) == []
    assert len(plan([newer], T0 + timedelta(seconds=1), {"C_ALERTS": T0}, CFG)) == 1


def test_planner_replies_posts_worst_first_and_skips_never_posted_resolved() -> None:
    warn = group_of(alert("w", node_name="n1"))
    crit = group_of(alert("c", node_name="n2", severity=Severity.CRITICAL))
    (step,) = plan([warn, crit], T0, {}, CFG)
    assert step.kind is StepKind.POST and step.group == crit
    gone = group_of(alert("r", node_name="n3", status=AlertStatus.RESOLVED))
    assert not needs_message(gone) and plan([gone], T0, {}, CFG) == []
    posted = group_of(alert("p", node_name="n4"), ts="9.9")
    (reply,) = plan([], T0, {}, CFG, open_groups=[posted], replies={posted.key.id: ["x", "y"]})
    assert reply.kind is StepKind.THREAD_REPLY and reply.text == "x\ny"


def test_storm_summary_above_threshold_then_over() -> None:
    cfg = AlertsConfig(default_channel="C", storm_groups=3)
    open_groups = [group_of(alert(f"a{i}", node_name=f"n{i}")) for i in range(4)]
    (step,) = plan(open_groups, T0, {}, cfg)
    assert step.kind is StepKind.STORM_SUMMARY and len(step.groups) == 4
    # unchanged: no second summary; instead nothing else to do for unposted groups
    assert (
        plan(
            open_groups,
            T0 + timedelta(seconds=2),
            {},
            cfg,
            storm_digest_shown={"C_ALERTS": step.text},
        )
        == []
    )
    # back under the threshold: the summary says the storm is over once, then posts resume
    three = open_groups[:3]
    (over,) = plan(three, T0, {}, cfg, storm_digest_shown={"C_ALERTS": step.text})
    assert over.kind is StepKind.STORM_SUMMARY and over.groups == ()
    (post,) = plan(three, T0, {}, cfg, storm_digest_shown={"C_ALERTS": ""})
    assert post.kind is StepKind.POST


class Notifier:
    """The loop's side of the planner's contract, in memory: posts get ts in order, the
    summary's digest and ts are kept, pages and drawn states are stored, one tick a second."""

    def __init__(self, groups: list[AlertGroup], cfg: AlertsConfig) -> None:
        self.cfg = cfg
        self.groups = {g.key.id: g for g in groups}
        self.dirty = set(self.groups)
        self.shown: dict[str, str] = {}
        self.since: dict[str, str] = {}
        self.summary_ts: str | None = None
        self.summaries: list[tuple[AlertGroup, ...]] = []
        self.posted: list[str] = []
        self.kinds: list[StepKind] = []
        self.calls: list[datetime] = []
        self.now = T0
        self._ts = 1000

    def ts(self) -> str:
        self._ts += 1
        return f"{self._ts}.000100"

    def tick(self) -> None:
        self.now += timedelta(seconds=1)
        last = {"C_ALERTS": self.calls[-1]} if self.calls else {}
        steps = plan(
            [self.groups[i] for i in self.dirty],
            self.now,
            last,
            self.cfg,
            open_groups=list(self.groups.values()),
            storm_digest_shown=self.shown,
            storm_since=self.since,
        )
        assert len(steps) <= 1
        for step in steps:
            self.calls.append(self.now)
            self.kinds.append(step.kind)
            if step.kind is StepKind.STORM_SUMMARY:
                self.shown["C_ALERTS"] = step.text
                self.summaries.append(step.groups)
                if self.summary_ts is None:
                    self.summary_ts = self.ts()
                self.since["C_ALERTS"] = self.summary_ts
                if not step.groups:
                    self.summary_ts = None
                    del self.since["C_ALERTS"]
                continue
            assert step.group is not None
            gid = step.group.key.id
            g = self.groups[gid]
            if step.kind is StepKind.POST:
                self.posted.append(gid)
                g = g.model_copy(update={"ts": self.ts()})
            if step.kind in (StepKind.POST, StepKind.UPDATE):
                g = g.model_copy(update={"drawn": drawn(g)})
            if step.kind is StepKind.PAGE:
                rows = pages.pages(g)[step.page]
                have = [*g.pages, Page(ts="p", digest="")][: step.page + 1]
                have[step.page] = Page(ts=self.ts(), digest=pages.digest(rows, g.resolved))
                g = g.model_copy(update={"pages": tuple(have)})
            self.groups[gid] = g
            if pages.stale(g) is None and g.drawn == drawn(g):
                self.dirty.discard(gid)

    def run(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def resolve(self, gids: list[str]) -> None:
        for gid in gids:
            g = self.groups[gid]
            done = tuple(a.model_copy(update={"status": AlertStatus.RESOLVED}) for a in g.alerts)
            self.groups[gid] = g.model_copy(update={"alerts": done})
            self.dirty.add(gid)


def big_event(cause: str, nodes: int, severity: Severity = Severity.CRITICAL) -> AlertGroup:
    return group_of(
        *(
            alert(f"{cause}-{i}", cause=cause, node_name=f"gpu-{i:04d}", severity=severity)
            for i in range(nodes)
        )
    )


def small_events(count: int) -> list[AlertGroup]:
    return [
        group_of(
            *(alert(f"r{k}-{j}", cause=f"rule{k:02d}", node_name=f"n{k}-{j}") for j in range(2))
        )
        for k in range(count)
    ]


def test_a_big_event_in_a_storm_of_small_ones_is_posted_on_its_own_with_its_pages() -> None:
    cfg = AlertsConfig(default_channel="C", storm_groups=20)
    assert (cfg.storm_own_nodes, cfg.storm_own_events) == (10, 3)
    xid = big_event("xid_79", 200)
    small = small_events(25)
    n = Notifier([*small, xid], cfg)
    n.run(30)
    # the summary first, listing every event (26), then the big one's own message, then the
    # summary again (it now links that message), then its 8 pages; no small one is posted
    assert n.kinds[:3] == [StepKind.STORM_SUMMARY, StepKind.POST, StepKind.STORM_SUMMARY]
    assert n.kinds[3:] == [StepKind.PAGE] * 8
    assert n.posted == [xid.key.id]
    assert len(n.summaries[0]) == 26 and n.summaries[0][0].key == xid.key  # worst, biggest first
    assert n.summaries[1][0].ts is not None  # what the summary links
    assert all(b - a >= timedelta(seconds=1) for a, b in itertools.pairwise(n.calls))
    # the storm passes (the small ones resolve down to 20 open): said once, the rest posted,
    # the big event never twice
    n.resolve([g.key.id for g in small[:6]])
    n.run(40)
    assert n.summaries[-1] == ()
    assert sorted(n.posted) == sorted([xid.key.id, *(g.key.id for g in small[6:])])
    assert len(n.posted) == len(set(n.posted)) == 20
    assert all(b - a >= timedelta(seconds=1) for a, b in itertools.pairwise(n.calls))


def test_a_storm_of_big_events_posts_at_most_storm_own_events_worst_and_biggest_first() -> None:
    cfg = AlertsConfig(default_channel="C", storm_groups=5)
    bigs = [
        big_event("xid_48", 12),
        big_event("xid_79", 40),
        big_event("xid_13", 30),
        big_event("ecc", 60, Severity.WARNING),
        big_event("xid_31", 9),  # under storm_own_nodes: summed up only
    ]
    n = Notifier([*bigs, *small_events(3)], cfg)
    n.run(40)
    # critical before warning, then most nodes: 40, 30, 12; the 60-node warning waits
    assert n.posted == [bigs[1].key.id, bigs[2].key.id, bigs[0].key.id]
    assert StepKind.STORM_SUMMARY in n.kinds
    # one of them resolves: its slot goes to the next (at most 3 stand on their own at once)
    n.resolve([bigs[1].key.id])
    n.run(10)
    assert n.posted[3:] == [bigs[3].key.id]
    assert bigs[4].key.id not in n.posted


def test_big_events_posted_before_the_storm_do_not_use_its_slots() -> None:
    cfg = AlertsConfig(default_channel="C", storm_groups=5, storm_own_events=1)
    before = [
        g.model_copy(update={"ts": f"{900 + i}.000100"})
        for i, g in enumerate([big_event("xid_48", 12), big_event("xid_13", 30)])
    ]
    xid = big_event("xid_79", 200)
    n = Notifier([*before, xid, *small_events(4)], cfg)
    n.run(20)
    assert n.posted == [xid.key.id]
    assert {g.key.id for g in n.summaries[0]} >= {g.key.id for g in before}  # listed, linked
    # without the summary's ts the planner cannot tell: every posted big event counts
    steps = plan(
        list(n.groups.values()),
        T0 + timedelta(days=1),
        {},
        cfg,
        storm_digest_shown=n.shown,
    )
    assert all(s.kind is not StepKind.POST for s in steps)
    cfg0 = AlertsConfig(default_channel="C", storm_groups=5, storm_own_events=0)
    n0 = Notifier([xid, *small_events(6)], cfg0)
    n0.run(10)
    assert n0.posted == []


# --- policy ---------------------------------------------------------------------------------


def test_offered_actions_follow_severity() -> None:
    xid79 = alert("a", cause="xid_79", severity=Severity.CRITICAL)
    assert DRAIN_NOW in offered_actions(group_of(xid79.model_copy(update={"action": Action.RMA})))
    warn = alert("a", severity=Severity.WARNING).model_copy(update={"action": Action.DRAIN})
    low = offered_actions(group_of(warn))
    assert DRAIN_AFTER_JOBS in low and DRAIN_NOW not in low
    # An Xid the catalog says to ignore (45: cleanup after another fault) drains nothing.
    xid45 = alert("a", cause="xid_45", severity=Severity.INFO)
    assert offered_actions(group_of(xid45)) == [ACK, SILENCE, RESUME]
    assert offered_actions(group_of(alert("a", status=AlertStatus.RESOLVED))) == []
    # A warning /node-health only watches (a drift): a person may still drain it, after jobs.
    drift = alert("a", cause="driver_drift", severity=Severity.WARNING).model_copy(
        update={"action": Action.WATCH}
    )
    assert offered_actions(group_of(drift)) == [ACK, SILENCE, DRAIN_AFTER_JOBS, RESUME]
    remap = alert("a", cause="row_remap_pending").model_copy(update={"action": Action.RESET_GPU})
    assert DRAIN_AFTER_JOBS in offered_actions(group_of(remap))
    from_am = drift.model_copy(update={"source": AlertSource.ALERTMANAGER})
    assert DRAIN_AFTER_JOBS in offered_actions(group_of(from_am))


def test_drain_reason_is_owned_and_bounded() -> None:
    assert drain_reason("xid", "ana") == "meowbot: xid by @ana"
    long = drain_reason("x" * 300, "ana")
    assert len(long) <= 120 and long.startswith("meowbot: ") and long.endswith(" by @ana")


def test_blast_radius_at_the_boundary() -> None:
    # 2% of 500 is 10
    assert blast_radius(9, 500, 0.02).outcome is Outcome.ALLOW
    refused = blast_radius(10, 500, 0.02)
    assert refused.outcome is Outcome.NEEDS_SECOND_PERSON and "second" in refused.sentence
    assert blast_radius(8, 500, 0.02, asking=2).allowed
    assert not blast_radius(8, 500, 0.02, asking=3).allowed


def test_auto_drain_only_for_named_causes() -> None:
    g = group_of(
        alert("a", cause="xid", severity=Severity.CRITICAL).model_copy(
            update={"action": Action.DRAIN}
        )
    )
    assert not auto_drain(g, AlertsConfig())
    assert auto_drain(g, AlertsConfig(auto_drain_causes=frozenset({"xid"})))
    assert not auto_drain(
        group_of(alert("a", cause="ecc_dbe")), AlertsConfig(auto_drain_causes=frozenset({"xid"}))
    )
    # `xid` does not drain a node for an application's Xid (info): nothing against the node.
    xid13 = group_of(alert("a", cause="xid_13", severity=Severity.INFO))
    assert not auto_drain(xid13, AlertsConfig(auto_drain_causes=frozenset({"xid"})))


def test_only_what_alerts_post_names_goes_to_a_channel() -> None:
    from bot.alerts.policy import posted

    xid13 = alert("a", cause="xid_13", severity=Severity.INFO)
    warn = alert("b", severity=Severity.WARNING)
    crit = alert("c", cause="xid_79", severity=Severity.CRITICAL)
    default = AlertsConfig()
    # An application's Xid on a healthy node asks nobody to act: kept, not posted.
    assert not posted(group_of(xid13), default)
    assert posted(group_of(warn), default) and posted(group_of(crit), default)
    # A warning joining the info finding makes it one to post.
    assert posted(group_of(xid13, warn.model_copy(update={"cause": "xid_13"})), default)
    # A group already posted keeps its message, whatever it now is.
    assert posted(group_of(xid13, ts="1.0"), default)
    # Configured: by severity (any case), by cause, or by fault kind (`xid` names every Xid).
    assert posted(group_of(xid13), AlertsConfig.parse({"post": ["Critical", "info"]}))
    assert not posted(group_of(warn), AlertsConfig.parse({"post": ["critical", "xid"]}))
    assert posted(group_of(xid13), AlertsConfig.parse({"post": ["critical", "xid"]}))
    assert posted(group_of(xid13), AlertsConfig.parse({"post": ["xid_13"]}))
    with pytest.raises(ConfigError, match=r"alerts\.post"):
        AlertsConfig.parse({"post": []})


def test_sweeps_start_on_a_fixed_beat_and_rest_after_one_that_overran() -> None:
    # A 1.2 s sweep every 5 s starts again at 5, not at 6.2: a fault found half an interval on.
    assert next_sweep(100.0, 5.0, 101.2, 1.2) == 105.0
    # A 3 s sweep is followed 6 s after it began: the source busy half of the time at most.
    assert next_sweep(100.0, 5.0, 103.0, 3.0) == 106.0
    # One that took 7 s (past its interval) is followed after a quarter interval, not at once.
    assert next_sweep(100.0, 5.0, 107.0) == 108.25
    # The beat holds over many sweeps of varying length.
    due = 0.0
    for took in (0.4, 2.0, 3.7, 0.1):
        due = next_sweep(due, 5.0, due + took)
    assert due == 20.0
