"""The precursor ranking on hand-made histories, hardest honest cases first: a precursor
before only some events, a metric high on the faulty nodes all the time (not a precursor), a
daily cycle that events happen to follow, too few events, none separating."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from bot.precursors.ask import BadInput, parse_why
from bot.precursors.models import Candidate, Event, Series
from bot.precursors.ranking import RankConfig, rank
from bot.precursors.rule import alert_rule, unselected
from bot.precursors.stats import fisher_greater, wilson

START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 3
LEAD = 600.0
NODES = [f"gpu-{i:04d}" for i in range(40)]
Value = Callable[[str, float], float]

TX = Candidate("network transmit", "rate(x{$nodes}[2m])", "Gbps")
POWER = Candidate("GPU power", "p{$nodes}", "W", host_label="Hostname")
TEMP = Candidate("GPU temperature", "t{$nodes}", "°C", host_label="Hostname")
CLOCK = Candidate("SM clock", "c{$nodes}", "MHz", host_label="Hostname", direction="below")


def _noise(node: str, t: float, salt: str) -> float:
    return random.Random(f"{salt}:{node}:{int(t // 60)}").gauss(0.0, 1.0)


def _history(
    events: list[Event], values: dict[Candidate, Value]
) -> tuple[list[Series], list[Series]]:
    """Fine series (a point a minute around each event) and coarse window maxima (minimum for
    a falling candidate) of every node over the days, as a history port would return."""
    end = START.timestamp() + DAYS * 86400
    fine: list[Series] = []
    coarse: list[Series] = []
    for c, f in values.items():
        pick = min if c.direction == "below" else max
        for node in NODES:
            times, vals = [], []
            t = math.ceil(START.timestamp() / LEAD) * LEAD
            while t <= end:
                times.append(t)
                vals.append(pick(f(node, t - k * 60) for k in range(10)))
                t += LEAD
            coarse.append(Series(node, c.name, "", tuple(times), tuple(vals)))
        for e in events:
            at = e.at.timestamp()
            ts = [at - 1800 + 60 * k for k in range(36)]
            fine.append(Series(e.node, c.name, "", tuple(ts), tuple(f(e.node, x) for x in ts)))
    return _merge(fine), coarse


def _merge(fine: list[Series]) -> list[Series]:
    by: dict[tuple[str, str, str], dict[float, float]] = {}
    for s in fine:
        by.setdefault((s.node, s.candidate, s.part), {}).update(zip(s.times, s.values, strict=True))
    return [
        Series(n, c, p, tuple(sorted(v)), tuple(v[t] for t in sorted(v)))
        for (n, c, p), v in by.items()
    ]


def _events(n: int, seed: int = 1, hours: tuple[int, int] = (0, 24)) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        day = rng.randrange(DAYS)
        at = START + timedelta(days=day, hours=rng.uniform(*hours))
        at = max(at, START + timedelta(hours=2))
        out.append(Event("unexpected_reboot", NODES[(i * 7) % 15], at.replace(microsecond=0)))
    return sorted(out, key=lambda e: e.at)


def _bump(events: list[Event], preceded: set[int], lead_s: float, high: float) -> Value:
    """`high` for `lead_s` before each preceded event, noise around 10 otherwise."""
    spans = [
        (e.node, e.at.timestamp() - lead_s, e.at.timestamp())
        for i, e in enumerate(events)
        if i in preceded
    ]

    def f(node: str, t: float) -> float:
        for n, a, b in spans:
            if n == node and a <= t < b:
                return high + _noise(node, t, "b")
        return 10.0 + 2.0 * _noise(node, t, "tx")

    return f


def _flat(salt: str, level: float = 300.0) -> Value:
    return lambda node, t: level + 20 * _noise(node, t, salt)


def test_a_precursor_before_only_some_events_is_found_with_its_counts() -> None:
    events = _events(10)
    tx = _bump(events, {0, 1, 3, 4, 6, 8, 9}, 240.0, 30.0)
    fine, coarse = _history(events, {TX: tx, POWER: _flat("p"), TEMP: _flat("t", 60)})
    ranked, tried = rank(events, [TX, POWER, TEMP], fine, coarse)
    top = ranked[0]
    assert top.candidate is TX and top.claimed
    assert (top.preceded, top.events) == (7, 10)
    assert top.threshold is not None and 20 < top.threshold < 35
    assert all(60 <= lead <= 240 for lead in top.leads_s)
    assert top.ordinary.rate < 0.01 and top.p_corrected < 1e-6
    assert tried >= 3
    assert {r.name for r in ranked if r.no_difference} == {"GPU power", "GPU temperature"}


def test_a_metric_high_on_the_faulty_nodes_all_the_time_is_no_precursor() -> None:
    events = _events(10)
    faulty = {e.node for e in events}

    def hot(node: str, t: float) -> float:
        return (80.0 if node in faulty else 55.0) + _noise(node, t, "hot")

    fine, coarse = _history(events, {TEMP: hot})
    (temp,), _ = rank(events, [TEMP], fine, coarse)
    assert not temp.claimed and temp.no_difference
    # Against the peers alone every event would have crossed (80 against 55): the same nodes'
    # ordinary windows are what tells it apart.
    peers = next(r for r in temp.references if r.name == "peers at other times")
    assert temp.threshold is not None and temp.threshold > 75 and peers.crossed == 0
    assert temp.gap < 0.3


def test_a_daily_cycle_the_events_follow_is_no_precursor() -> None:
    # Every event in the afternoon, when the whole fleet's load peaks.
    events = _events(12, seed=4, hours=(13, 17))

    def diurnal(node: str, t: float) -> float:
        hour = (t % 86400) / 3600
        return 50 + 40 * math.sin((hour - 9) / 24 * 2 * math.pi) + 3 * _noise(node, t, "d")

    fine, coarse = _history(events, {POWER: diurnal})
    (power,), _ = rank(events, [POWER], fine, coarse)
    assert not power.claimed and power.no_difference
    # What rules it out: the peers at the same moments were as high as the events' nodes.
    assert power.ordinary.name == "peers at the same time"


def test_a_falling_candidate_is_found_below_its_threshold() -> None:
    events = _events(8, seed=2)
    drop = _bump(events, set(range(8)), 300.0, -30.0)

    def clock(node: str, t: float) -> float:
        return 1980.0 + 10 * drop(node, t)  # about 2,080 MHz; 1,680 before the events

    fine, coarse = _history(events, {CLOCK: clock})
    (top,), _ = rank(events, [CLOCK], fine, coarse)
    assert top.claimed and top.preceded == 8
    assert top.threshold is not None and top.threshold < 1800


def test_few_events_are_thin_evidence_and_one_is_never_a_cause() -> None:
    for n in (1, 3):
        events = _events(n)
        tx = _bump(events, set(range(n)), 300.0, 40.0)
        fine, coarse = _history(events, {TX: tx})
        (top,), _ = rank(events, [TX], fine, coarse, RankConfig(min_events=4))
        assert top.preceded == n and not top.claimed


def test_no_separating_candidate_claims_nothing() -> None:
    events = _events(12, seed=7)
    fine, coarse = _history(events, {POWER: _flat("p"), TEMP: _flat("t", 60), TX: _flat("x", 10)})
    ranked, _ = rank(events, [POWER, TEMP, TX], fine, coarse)
    assert not any(r.claimed for r in ranked)


def test_benign_spikes_raise_the_ordinary_rate_and_are_counted() -> None:
    events = _events(10, seed=9)
    tx = _bump(events, set(range(10)), 300.0, 30.0)

    def spiky(node: str, t: float) -> float:
        # A spike of 45 Gbps for 10 minutes every 8 hours on some nodes, no fault after it.
        if int(node[-2:]) % 3 == 0 and (t % (8 * 3600)) < 600:
            return 45.0
        return tx(node, t)

    fine, coarse = _history(events, {TX: spiky})
    (top,), _ = rank(events, [TX], fine, coarse)
    assert top.claimed and top.preceded == 10
    assert top.ordinary.crossed > 0  # the spikes crossed too, and are said


def test_fisher_and_wilson_match_known_values() -> None:
    # 7 of 8 events against 3 % of 2,304 ordinary windows: far beyond chance.
    assert fisher_greater(7, 8, 69, 2304) < 1e-8
    # Nothing beyond the ordinary rate: no evidence.
    assert fisher_greater(1, 10, 230, 2300) > 0.5
    # The hypergeometric tail by hand: 2 of 2 against 1 of 3 -> C(3,2)/C(5,2) = 0.3.
    assert fisher_greater(2, 2, 1, 3) == pytest.approx(0.3)
    lo, hi = wilson(7, 8)
    assert lo == pytest.approx(0.529, abs=0.01) and hi == pytest.approx(0.978, abs=0.01)


def test_the_alert_rule_warns_short_of_the_threshold_on_every_node() -> None:
    events = _events(10)
    fine, coarse = _history(events, {TX: _bump(events, set(range(10)), 300.0, 30.0)})
    (top,), _ = rank(events, [TX], fine, coarse)
    rule = alert_rule("unexpected_reboot", top)
    assert "alert: UnexpectedRebootPrecursor" in rule
    assert "expr: 'max by (instance) (rate(x[2m])) > " in rule
    warn = float(rule.split(") > ")[1].split("'")[0])
    assert top.threshold is not None and warn == pytest.approx(top.threshold * 0.9, rel=0.01)
    assert unselected('rate(a{device="eth0",$nodes}[2m])') == 'rate(a{device="eth0"}[2m])'


KINDS = ("unexpected_reboot", "xid", "ib_link_down")


def test_the_ask_reads_a_kind_a_hostlist_and_a_window() -> None:
    ask = parse_why("unexpected-reboot gpu-[0001-0004] --since 3d", KINDS)
    assert ask.kind == "unexpected_reboot" and ask.nodes is not None and len(ask.nodes) == 4
    assert ask.window_s == 3 * 86400
    assert parse_why("xid", KINDS).window_s == 7 * 86400
    for bad in ("", "temperature", "xid --since 90d", "xid a b", "xid gpu-[1-", "xid --since"):
        with pytest.raises(BadInput):
            parse_why(bad, KINDS)


def test_the_prometheus_queries_select_the_nodes_and_stay_within_11000_steps() -> None:
    from bot.backends.prometheus_precursors import chunked, extremes_expr, matcher, time_mask

    assert matcher("instance", ["gpu-0001", "gpu-0002"]) == (
        r'instance=~"(gpu\\-0001|gpu\\-0002)(:[0-9]+)?"'
    )
    assert extremes_expr(CLOCK, ["gpu-0001"], 600) == (
        r'min_over_time((min by (Hostname) (c{Hostname=~"(gpu\\-0001)"}))[600s:60s])'
    )
    assert time_mask([(100, 200), (150, 300), (500, 600)]) == (
        "(vector(time()) >= 100 <= 300) or (vector(time()) >= 500 <= 600)"
    )
    spans = [("a", START + timedelta(days=d), START + timedelta(days=d, minutes=35)) for d in
             (0, 1, 5, 6.9, 7.4, 13)]  # fmt: skip
    # A week's events in one query a candidate; two weeks' in two.
    assert [len(c) for c in chunked(spans[:4], 60)] == [4]
    assert [len(c) for c in chunked(spans, 60)] == [5, 1]


def test_the_recorded_reads_ask_the_rules_series_and_check_that_it_ran_all_along() -> None:
    from bot.backends.prometheus_precursors import (
        covered,
        masked_steps,
        recorded_extremes_expr,
        recorded_selector,
    )
    from bot.backends.prometheus_rules import candidate_record

    name = candidate_record(CLOCK)
    assert recorded_selector(CLOCK, None) == f'{name}{{meowbot_recorded=""}}'
    assert recorded_extremes_expr(CLOCK, ["gpu-0001"], 600) == (
        f'min_over_time({name}{{Hostname=~"(gpu\\\\-0001)"}}[600s]) '
        f'or count_over_time({name}{{meowbot_recorded!=""}}[600s])'
    )
    assert masked_steps([(100, 200), (150, 300), (500, 600)], 60, 600, 60) == {
        120.0,
        180.0,
        240.0,
        300.0,
        540.0,
        600.0,
    }

    def sentinel(counts: dict[float, float]) -> dict[str, object]:
        values = [[t, str(v)] for t, v in sorted(counts.items())]
        return {"metric": {"meowbot_recorded": "60"}, "values": values}

    data = {"metric": {"Hostname": "gpu-0001"}, "values": [[600, "1"], [1200, "2"]]}
    steps = {600.0, 1200.0}
    assert covered([data, sentinel({600: 11, 1200: 10})], steps, 600) == [data]
    # A rule that missed three of its ten runs in a window, or none at a step: read raw.
    assert covered([data, sentinel({600: 11, 1200: 7})], steps, 600) is None
    assert covered([data, sentinel({600: 11})], steps, 600) is None
    assert covered([data], steps, 600) is None
    # Around the events: a run within each minute read.
    assert covered([data, sentinel({600: 1, 1200: 1})], steps, 60) == [data]
    assert covered([data, sentinel({600: 1, 1200: 0})], steps, 60) is None
