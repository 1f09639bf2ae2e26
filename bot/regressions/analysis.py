"""The finder's pure part: node histories and job paces in, a `RegressionReport` out. No I/O.

For each rollout of the components asked about: the jobs that crossed it, their effects, the
verdict (bot/regressions/stats.py), what it was confounded with, and what it costs. Jobs whose
nodes changed nothing else around their switch ("clean") are the evidence when there are
enough of them; otherwise every crossing job is, and the other changes they went through are
named as what the effect cannot be told apart from.

CPU-bound (a bootstrap per rollout): `analyse` is synchronous so the caller can run it off the
event loop.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from bot.regressions.aligned import align
from bot.regressions.cohorts import find_rollouts, node_changes
from bot.regressions.cost import gpu_days_per_week
from bot.regressions.effects import Crossing, EffectConfig, Series, crossings, first_changes, series
from bot.regressions.fleet_time import without_fleet_time
from bot.regressions.models import (
    Finding,
    JobPace,
    NodeChange,
    NodeCompute,
    RegressionReport,
    Rollout,
    Verdict,
    VersionSpan,
)
from bot.regressions.same_work import SameWorkConfig, job_splits, same_work
from bot.regressions.stats import StatsConfig, estimate
from bot.words import count

ORDER = {Verdict.REGRESSION: 0, Verdict.IMPROVEMENT: 1, Verdict.NO_EFFECT: 2, Verdict.TOO_FEW: 3}


@dataclass(frozen=True)
class FinderConfig:
    effects: EffectConfig = field(default_factory=EffectConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    same_work: SameWorkConfig = field(default_factory=SameWorkConfig)


def _finding(
    rollout: Rollout,
    crossed: list[Crossing],
    jobs: Sequence[Series],
    end: datetime,
    cfg: FinderConfig,
    notes: list[str],
    spans: Sequence[VersionSpan] = (),
    computes: Sequence[NodeCompute] = (),
) -> Finding:
    clean = [c for c in crossed if c.clean]
    evidence = clean if len(clean) >= cfg.stats.min_jobs else crossed
    est = estimate([c.effect for c in evidence], [c.placebo for c in evidence], cfg.stats)
    confounded: tuple[str, ...] = ()
    if evidence is not clean:
        seen = Counter(o for c in crossed for o in c.others)
        confounded = tuple(o for o, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0])))
    claimed = est.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    by_id = {s.job.job_id: s.job for s in jobs}
    if est.verdict is not Verdict.TOO_FEW and not est.placebo_measured:
        notes.append(
            f"{rollout.component} {rollout.new}: too few jobs ran far enough from their switch "
            "to measure the margin; the interval's own width stands in for it."
        )
    by_node = same_work(
        job_splits(computes, spans, rollout, cfg.same_work) if computes else [],
        est.low * 100,
        est.high * 100,
        cfg.stats,
    )
    return Finding(
        same_work=by_node,
        rollout=rollout,
        verdict=est.verdict,
        effect_pct=est.effect * 100,
        low_pct=est.low * 100,
        high_pct=est.high * 100,
        margin_pct=est.margin * 100,
        jobs=len(crossed),
        nodes=len({n for c in crossed for n in c.nodes}),
        clean_jobs=len(clean),
        confounded_with=confounded,
        gpu_days_per_week=gpu_days_per_week(est.effect, rollout, jobs, end) if claimed else 0.0,
        job_effects=tuple((c.job_id, c.effect * 100) for c in evidence),
        aligned=tuple(
            a for c in evidence if (a := align(by_id[c.job_id], c.switch_at)) is not None
        ),
    )


def _rank(f: Finding) -> tuple[int, float]:
    if f.verdict is Verdict.REGRESSION:
        return (0, -f.effect_pct)
    if f.verdict is Verdict.IMPROVEMENT:
        return (1, f.effect_pct)
    return (ORDER[f.verdict], -f.jobs)


def analyse(
    spans: Sequence[VersionSpan],
    paces: Sequence[JobPace],
    components: Sequence[str],
    start: datetime,
    end: datetime,
    cfg: FinderConfig | None = None,
    computes: Sequence[NodeCompute] = (),
) -> RegressionReport:
    """Findings for every rollout of `components` in the window, worst first. `spans` may hold
    further components: they are read only to tell what else changed on the jobs' nodes.
    `computes` (per-node compute time, where jobs export it) give each finding its per-node
    evidence (bot/regressions/same_work.py)."""
    cfg = cfg or FinderConfig()
    jobs, by_rollout = _crossings(spans, paces, components, cfg)
    notes = _component_notes(spans, components, by_rollout)
    findings = [
        _finding(r, crossed, jobs, end, cfg, notes, spans, computes)
        for r, crossed in by_rollout.items()
    ]
    findings.sort(key=_rank)
    notes.extend(_pace_notes(paces, jobs))
    for f in findings:
        notes.extend(_finding_notes(f, by_rollout[f.rollout], cfg))
    nodes = {s.node for s in spans} | {n for p in paces for n in p.nodes}
    return RegressionReport(
        start=start,
        end=end,
        component=components[0] if len(components) == 1 else None,
        findings=tuple(findings),
        jobs_read=len(paces),
        nodes_read=len(nodes),
        notes=tuple(notes),
    )


def _crossings(
    spans: Sequence[VersionSpan],
    paces: Sequence[JobPace],
    components: Sequence[str],
    cfg: FinderConfig,
) -> tuple[list[Series], dict[Rollout, list[Crossing]]]:
    """The jobs' paces that can be read, and for each rollout of `components` the jobs that
    crossed it, fleet time taken out."""
    changes = node_changes(spans)
    by_node: defaultdict[str, list[NodeChange]] = defaultdict(list)
    for change in changes:
        by_node[change.node].append(change)
    jobs = [s for s in (series(p, cfg.effects) for p in paces) if s is not None]
    firsts = [first_changes(s, by_node) for s in jobs]
    steady = without_fleet_time([(s, list(f.values())) for s, f in zip(jobs, firsts, strict=True)])
    with_changes = list(zip(steady, firsts, strict=True))
    by_rollout = {
        r: crossings(r, with_changes, cfg.effects)
        for r in find_rollouts(spans, changes)
        if r.component in components
    }
    return jobs, by_rollout


def _component_notes(
    spans: Sequence[VersionSpan],
    components: Sequence[str],
    by_rollout: dict[Rollout, list[Crossing]],
) -> list[str]:
    """What was asked about that no node has a history of, or that no node changed."""
    notes: list[str] = []
    read = {s.component for s in spans}
    moved = {r.component for r in by_rollout}
    for c in components:
        if c not in read:
            notes.append(f"No {c} history of any node in the window.")
        elif c not in moved:
            notes.append(f"No node changed its {c} in the window.")
    return notes


def _pace_notes(paces: Sequence[JobPace], jobs: Sequence[Series]) -> list[str]:
    if not paces:
        return ["No job pace in the window."]
    if len(jobs) < len(paces):
        return [f"{len(paces) - len(jobs)} of {len(paces)} jobs had too little pace to read."]
    return []


def _finding_notes(f: Finding, crossed: Sequence[Crossing], cfg: FinderConfig) -> list[str]:
    """How far a finding may be trusted: how its jobs stepped at the switch, whether the
    per-node compute time agrees, what else changed with it."""
    notes: list[str] = []
    if f.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        lined = sum(1 for c in crossed if c.stepped_at_switch(cfg.effects.line_up))
        notes.append(
            f"{f.rollout.component} {f.rollout.new}: the pace of {lined} of "
            f"{count(len(crossed), 'crossing job')} steps within "
            f"{cfg.effects.line_up.total_seconds() / 60:.0f} minutes of its first node's "
            "switch."
        )
    sw = f.same_work
    if sw is not None and not sw.agrees and f.verdict is not Verdict.TOO_FEW:
        notes.append(
            f"{f.rollout.component} {f.rollout.new}: the two lines of evidence disagree: "
            f"the pace says {f.effect_pct:+.1f} % ({f.low_pct:+.1f} to {f.high_pct:+.1f}), "
            f"the per-node compute time of {count(sw.jobs, 'job')} on both cohorts at once "
            f"{sw.effect_pct:+.1f} % ({sw.low_pct:+.1f} to {sw.high_pct:+.1f}). Something "
            "else moved the jobs' pace at their switch, or the new value slows what the "
            "compute time does not time."
        )
    if f.confounded_with and f.verdict is not Verdict.TOO_FEW:
        notes.append(
            f"{f.rollout.component} {f.rollout.new}: {f.clean_jobs} of {f.jobs} crossing jobs "
            f"changed nothing else; the others also went through "
            f"{', '.join(f.confounded_with)} at the same time, so the effect is theirs "
            "together."
        )
    return notes
