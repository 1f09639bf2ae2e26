"""The PNG chart for `/regressions`: job paces around the rollout, and the effect per cohort.

Top: the headline rollout's jobs, each aligned on its own switch (the moment its first node
joined the new cohort), as the percent change of its pace from its own median before: a step
at zero hours that the jobs share is the regression; jobs that merely drift do not line up.
Bottom: every rollout's effect with its 95 % interval and the margin it had to clear, each
job's own effect as a faint dot behind it, so a claim resting on three jobs looks like it; under
it, where jobs ran on both cohorts at once, the per-node evidence at the same work (a diamond
with its own interval) and whether the two agree.

Same conventions as bot/render/charts.py (bare `Figure`, opaque light card, Okabe-Ito).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Final, TypeGuard

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from bot.regressions.models import Finding, RegressionReport, SameWork, Verdict
from bot.render.charts import BACKGROUND, GRID, TEXT, _empty, _png, _style
from bot.render.regressions import digits, ordered

__all__ = ["headline", "regressions_chart"]

WIDTH_IN, HEIGHT_IN = 12.0, 9.0
MAX_ROWS: Final = 12
MAX_JOB_LINES: Final = 60

VERDICT_COLOUR: Final = {
    Verdict.REGRESSION: "#D55E00",  # vermillion
    Verdict.IMPROVEMENT: "#009E73",  # bluish green
    Verdict.NO_EFFECT: "#555555",
    Verdict.TOO_FEW: "#999999",
}
JOB_COLOUR: Final = "#0072B2"  # blue, faint: one line a job
MEDIAN_COLOUR: Final = "#1A1A1A"
MARGIN_COLOUR: Final = "#E0E0E0"
SAME_WORK_COLOUR: Final = "#CC79A7"  # reddish purple: the per-node evidence


def headline(report: RegressionReport) -> Finding | None:
    """The finding the top panel shows: the worst regression, else the biggest change."""
    judged = [f for f in report.findings if f.verdict is not Verdict.TOO_FEW]
    regressions = [f for f in judged if f.verdict is Verdict.REGRESSION]
    pool = regressions or judged
    if not pool:
        return None
    # As the text orders them: a clean claim before a confounded one.
    return max(pool, key=lambda f: (not f.confounded_with, f.gpu_days_per_week, abs(f.effect_pct)))


def regressions_chart(report: RegressionReport, *, title: str) -> bytes:
    """Two stacked panels as PNG bytes, under charts.MAX_BYTES."""
    return _png(_figure(report, title=title))


def _figure(report: RegressionReport, *, title: str) -> Figure:
    """The figure before rendering (the tests read its texts)."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), facecolor=BACKGROUND, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title, color=TEXT, fontsize=14)
    rows = min(len(report.findings), MAX_ROWS)
    top, bottom = fig.subplots(2, 1, height_ratios=(3, max(2, 1 + rows // 3)))
    for ax in (top, bottom):
        _style(ax)
    _aligned_panel(top, headline(report))
    _effects_panel(bottom, ordered(report.findings)[:MAX_ROWS])
    return fig


def _label(f: Finding) -> str:
    r = f.rollout
    label = f"{r.component} {_short(r.new)}\nagainst {_short(r.old)}"
    if f.confounded_with:
        label += "\n(with " + ", ".join(f.confounded_with)[:30] + ")"
    return label


def _faint(n: int) -> float:
    """One job's opacity: a few jobs must each show, a hundred must not hide the median."""
    return max(0.12, min(0.5, 4 / max(n, 1)))


def _verdict_words(f: Finding) -> str:
    if f.verdict is Verdict.REGRESSION:
        return f"{f.effect_pct:.{digits(f)}f} % slower"
    if f.verdict is Verdict.IMPROVEMENT:
        return f"{-f.effect_pct:.{digits(f)}f} % faster"
    return "no effect seen" if f.verdict is Verdict.NO_EFFECT else "too few jobs"


def _short(version: str) -> str:
    return version if len(version) <= 24 else version[:23] + "…"


def _aligned_panel(ax: Axes, f: Finding | None) -> None:
    if f is None:
        _empty(ax, "no rollout with jobs on both sides of it in this window")
        return
    r = f.rollout
    how = "each aligned on its switch" if f.aligned else "each job's own effect"
    # The jobs drawn are those the estimate rests on, which may be fewer than crossed.
    drawn = len(f.aligned) or len(f.job_effects)
    ax.set_title(
        f"{r.component} {r.new} against {r.old}: {_verdict_words(f)}"
        f"{', confounded' if f.confounded_with else ''}; {drawn} jobs, {how}",
        color=TEXT,
        fontsize=11,
        loc="left",
    )
    if not f.aligned:
        _job_effects_hist(ax, f)
        return
    hours_all: list[float] = []
    alpha = _faint(len(f.aligned))
    for a in f.aligned[:MAX_JOB_LINES]:
        xs = [h for h, _ in a.points]
        ys = [(v - 1) * 100 for _, v in a.points]
        hours_all.extend(xs)
        ax.plot(xs, ys, color=JOB_COLOUR, alpha=alpha, linewidth=0.8)
    # The median of every job hour by hour: the shared step the eye looks for.
    by_hour: dict[int, list[float]] = {}
    for a in f.aligned:
        for h, v in a.points:
            by_hour.setdefault(round(h), []).append((v - 1) * 100)
    hours = sorted(by_hour)
    ax.plot(
        hours,
        [statistics.median(by_hour[h]) for h in hours],
        color=MEDIAN_COLOUR,
        linewidth=2.2,
        label="median of the jobs, hour by hour",
    )
    colour = VERDICT_COLOUR[f.verdict]
    right = max(hours_all, default=1.0)
    ax.axhline(0, color=TEXT, linewidth=0.8)
    ax.axvline(0, color=TEXT, linestyle=":", linewidth=1.2, label="each job's first node switched")
    ax.fill_between(
        [0, right], f.low_pct, f.high_pct, color=colour, alpha=0.15, label="95 % interval"
    )
    ax.hlines(
        f.effect_pct,
        0,
        right,
        color=colour,
        linewidth=1.6,
        linestyle="--",
        label=f"effect {f.effect_pct:+.{digits(f)}f} %",
    )
    values = [(v - 1) * 100 for a in f.aligned for _, v in a.points]
    _robust_ylim(ax, values, f)
    ax.set_xlabel("hours from the job's switch", color=TEXT)
    ax.set_ylabel("step time vs the job's own before (%)", color=TEXT)
    _inner_legend(ax)


def _robust_ylim(ax: Axes, values: Sequence[float], f: Finding) -> None:
    """Limits from the middle of the data, so one job's restart spike cannot flatten a 2 %
    step to a line; at least +-3 % so noise is not blown up into a cliff."""
    if not values:
        return
    ordered = sorted(values)
    lo = ordered[int(0.02 * (len(ordered) - 1))]
    hi = ordered[int(0.98 * (len(ordered) - 1))]
    lo, hi = min(lo, f.low_pct, -3.0), max(hi, f.high_pct, 3.0)
    pad = 0.1 * (hi - lo)
    ax.set_ylim(lo - pad, hi + pad)


def _job_effects_hist(ax: Axes, f: Finding) -> None:
    """Without aligned paces: how the crossing jobs' effects spread, with the estimate."""
    effects = [e for _, e in f.job_effects]
    if not effects:
        _empty(ax, "no job paces kept for this rollout")
        return
    colour = VERDICT_COLOUR[f.verdict]
    ax.hist(effects, bins=min(40, max(5, len(effects) // 2)), color=JOB_COLOUR, alpha=0.6)
    ax.axvspan(f.low_pct, f.high_pct, color=colour, alpha=0.18, label="95 % interval")
    ax.axvline(
        f.effect_pct, color=colour, linewidth=2, label=f"effect {f.effect_pct:+.{digits(f)}f} %"
    )
    ax.axvline(0, color=TEXT, linewidth=0.8)
    ax.set_xlabel("each job's step time after its switch vs before (%)", color=TEXT)
    ax.set_ylabel("jobs", color=TEXT)
    _inner_legend(ax)


def _effects_panel(ax: Axes, findings: Sequence[Finding]) -> None:
    if not findings:
        _empty(ax, "no rollout in this window")
        return
    ax.set_title(
        "effect per cohort, 95 % interval, and the margin each had to clear",
        color=TEXT,
        fontsize=11,
        loc="left",
    )
    n = len(findings)
    for row, f in enumerate(findings):
        y = n - 1 - row
        colour = VERDICT_COLOUR[f.verdict]
        ax.add_patch(
            Rectangle(
                (-f.margin_pct, y - 0.4),
                2 * f.margin_pct,
                0.8,
                color=MARGIN_COLOUR,
                zorder=0,
                label="margin from the data" if row == 0 else None,
            )
        )
        effects = [e for _, e in f.job_effects]
        if effects:
            # Spread the dots a little vertically, the same way every time.
            jitter = [((i * 37) % 11 - 5) / 20 for i in range(len(effects))]
            ax.scatter(
                effects,
                [y + j for j in jitter],
                s=10,
                color=JOB_COLOUR,
                alpha=_faint(len(effects)) + 0.1,
                linewidths=0,
                label="one job" if row == 0 else None,
            )
        if f.verdict is Verdict.TOO_FEW:
            ax.text(0, y, "too few jobs", color=colour, ha="center", va="center", fontsize=9)
            continue
        hollow = bool(f.confounded_with)
        ax.errorbar(
            [f.effect_pct],
            [y],
            xerr=[[f.effect_pct - f.low_pct], [f.high_pct - f.effect_pct]],
            fmt="o",
            color=colour,
            markerfacecolor=BACKGROUND if hollow else colour,
            markersize=8,
            capsize=4,
            linewidth=2,
        )
        _same_work_marker(ax, f, y, first=not any(g.same_work for g in findings[:row]))
        # Above its point, not past the interval's end: there it runs off the panel.
        ax.text(
            f.effect_pct,
            y + 0.22,
            f"{f.effect_pct:+.{digits(f)}f} %" + (" confounded" if hollow else ""),
            color=colour,
            ha="center",
            va="bottom",
            fontsize=9,
        )
    ax.axvline(0, color=TEXT, linewidth=0.8)
    ax.set_yticks(range(n), [_label(f) for f in reversed(findings)], fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    spans = [x for f in findings for x in (f.low_pct, f.high_pct)]
    spans += [x for f in findings if _drawn(f.same_work) for x in _span(f.same_work)]
    lo, hi = min(-1.0, *spans), max(1.0, *spans)
    pad = 0.15 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)  # job dots beyond it are cut: the interval is the point
    ax.set_xlabel("step time after the switch vs before (%): right is slower", color=TEXT)
    ax.grid(True, axis="x", color=GRID, linewidth=0.6)
    ax.grid(False, axis="y")
    # Right of the title, above the panel: inside it would sit on a row's dots.
    ax.legend(
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncols=2,
        frameon=False,
        labelcolor=TEXT,
        borderaxespad=0.2,
        fontsize=9,
    )


def _drawn(same: SameWork | None) -> TypeGuard[SameWork]:
    return same is not None and same.verdict is not Verdict.TOO_FEW


def _span(same: SameWork) -> tuple[float, float]:
    return same.low_pct, same.high_pct


def _same_work_marker(ax: Axes, f: Finding, y: float, *, first: bool) -> None:
    """The per-node evidence under the pace's point: a diamond with its own interval, so the
    eye sees at once whether the two lines of evidence meet."""
    same = f.same_work
    if not _drawn(same):
        return
    ax.errorbar(
        [same.effect_pct],
        [y - 0.25],
        xerr=[[same.effect_pct - same.low_pct], [same.high_pct - same.effect_pct]],
        fmt="D",
        color=SAME_WORK_COLOUR,
        markersize=5,
        capsize=3,
        linewidth=1.2,
        label="per node at the same work" if first else None,
    )
    words = "agrees" if same.agrees else "disagrees"
    # Under its diamond, centred as the pace's words are above its point: past the interval's
    # end it runs off the panel.
    ax.text(
        same.effect_pct,
        y - 0.33,
        f"per node {same.effect_pct:+.{digits(f)}f} % ({words}, {same.jobs} jobs)",
        color=SAME_WORK_COLOUR,
        ha="center",
        va="top",
        fontsize=8,
    )


def _inner_legend(ax: Axes) -> None:
    # Inside, top left: before the switch the jobs sit around zero, so that corner is free;
    # above the panel it would run into the title.
    ax.legend(loc="upper left", fontsize=9, labelcolor=TEXT, facecolor=BACKGROUND, framealpha=0.9)
