"""The PNG chart for `/job-slow`: step time over 48 h, and the lagging metric per node.

`job_chart(...)` returns PNG bytes and does nothing else (no files, no Slack), so a handler
hands it to `handlers/reply.py: upload_chart` as a `Chart`, drawn on the worker pool.

Why `Figure` + `FigureCanvasAgg` and never `pyplot`: pyplot keeps a global registry of
figures and a "current figure", which is not thread safe and leaks figures unless closed.
A bare `Figure` is an ordinary object that is garbage collected like any other.

Why an opaque light background: a transparent PNG puts dark text on Slack's dark theme, or
light text on the light one, depending on who looks. A neutral light-grey card with dark text
reads on both (contrast ratio >= 4.5, WCAG AA); it is a little softer than pure white on the
dark theme. The data colours come from the Okabe-Ito palette, which stays distinguishable
for the common colour-vision deficiencies.
"""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Final

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator

from bot.highlights.stats import week_spans
from bot.words import number

__all__ = [
    "DEFAULT_JITTER",
    "DEFAULT_SPREAD",
    "MAX_BYTES",
    "NodeValue",
    "highlights_chart",
    "job_chart",
]

MAX_BYTES: Final = 1_000_000  # our budget per upload; the thread stays quick to load
WIDTH_IN, HEIGHT_IN, DPI = 12.0, 8.0, 100  # 1200 x 800 px
FALLBACK_DPIS: Final = (80, 64, 50)  # tried in turn only while the PNG is over MAX_BYTES

BACKGROUND: Final = "#F2F2F2"  # figure and axes; opaque, see the module docstring
TEXT: Final = "#1A1A1A"  # all text, ticks and spines; 15.6:1 on BACKGROUND
GRID: Final = "#D0D0D0"
# Okabe-Ito.
PACE_COLOUR: Final = "#0072B2"  # blue
YESTERDAY_COLOUR: Final = "#CC79A7"  # reddish purple, dashed
NODE_COLOUR: Final = "#0072B2"  # blue
STRAGGLER_COLOUR: Final = "#D55E00"  # vermillion, used for nothing else
MEDIAN_COLOUR: Final = "#009E73"  # bluish green

BAND_COLOUR: Final = "#CC79A7"  # the baseline's colour, light: the band of ordinary jitter
# How far from the baseline a pace still counts as the same (the straggler config's
# slower_threshold): the band drawn around the baseline, and half the least height of the axis.
DEFAULT_JITTER: Final = 0.03
# The same for the nodes of the lower panel: how far from their median a node is still not a
# straggler (the straggler config's min_excess).
DEFAULT_SPREAD: Final = 0.02

UNEXPLAINED_COLOUR: Final = "#E69F00"  # Okabe-Ito orange: a change the answer does not name
MAX_SHIFTS: Final = 5

MAX_ANNOTATIONS: Final = 10
MAX_NODE_TICKS: Final = 32  # up to this many nodes, name each one on the x axis


@dataclass(frozen=True)
class NodeValue:
    node: str
    value: float


def job_chart(
    *,
    title: str,
    pace: Sequence[tuple[datetime, float]],
    yesterday: Sequence[tuple[datetime, float]],
    since: datetime | None,
    metric_label: str,
    per_node: Sequence[NodeValue],
    stragglers: Collection[str],
    median: float | None,
    baseline: tuple[str, float] | None = None,
    jitter: float = DEFAULT_JITTER,
    spread: float = DEFAULT_SPREAD,
) -> bytes:
    """Two stacked panels as PNG bytes, under MAX_BYTES; the same input gives the same bytes.

    `baseline` is what the answer's text compares the pace with ("24 h earlier", 1.27 s): drawn
    as a level with the band of ordinary jitter (+-`jitter`) around it, whether or not its
    series (`yesterday`) is there to draw. `spread` is the share around the nodes' median
    within which a node is not a straggler, drawn as a band on the lower panel.
    """
    fig = _figure(
        title=title,
        pace=pace,
        yesterday=yesterday,
        since=since,
        metric_label=metric_label,
        per_node=per_node,
        stragglers=stragglers,
        median=median,
        baseline=baseline,
        jitter=jitter,
        spread=spread,
    )
    return _png(fig)


def _figure(
    *,
    title: str,
    pace: Sequence[tuple[datetime, float]],
    yesterday: Sequence[tuple[datetime, float]],
    since: datetime | None,
    metric_label: str,
    per_node: Sequence[NodeValue],
    stragglers: Collection[str],
    median: float | None,
    baseline: tuple[str, float] | None = None,
    jitter: float = DEFAULT_JITTER,
    spread: float = DEFAULT_SPREAD,
) -> Figure:
    """The figure before rendering (the tests read its texts)."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), facecolor=BACKGROUND, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title, color=TEXT, fontsize=14)
    top, bottom = fig.subplots(2, 1)
    for ax in (top, bottom):
        _style(ax)
    _pace_panel(top, pace, yesterday, since, baseline, jitter)
    _node_panel(bottom, metric_label, per_node, set(stragglers), median, spread)
    fig.align_ylabels()
    return fig


def _style(ax: Axes) -> None:
    ax.set_facecolor(BACKGROUND)
    ax.tick_params(colors=TEXT, labelcolor=TEXT)
    for spine in ax.spines.values():
        spine.set_color(TEXT)
    ax.grid(True, color=GRID, linewidth=0.6)
    ax.set_axisbelow(True)


def _legend(ax: Axes) -> None:
    # One row above the panel: inside it would hide data or straggler names.
    ax.legend(
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncols=4,
        frameon=False,
        labelcolor=TEXT,
        borderaxespad=0.2,
        fontsize=9,
    )


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color=TEXT)
    ax.set_xticks([])
    ax.set_yticks([])


def _utc(x: float) -> datetime:
    return datetime.fromtimestamp(x, UTC)


def _hhmm(x: float, _pos: int | None = None) -> str:
    """HH:MM, with the date under it at midnight, where the day changes."""
    t = _utc(x)
    return f"{t:%H:%M}\n{t:%d %b}" if (t.hour, t.minute) == (0, 0) else f"{t:%H:%M}"


def _pace_panel(
    ax: Axes,
    pace: Sequence[tuple[datetime, float]],
    yesterday: Sequence[tuple[datetime, float]],
    since: datetime | None,
    baseline: tuple[str, float] | None = None,
    jitter: float = DEFAULT_JITTER,
) -> None:
    if not pace:
        _empty(ax, "no step-time series")
        return
    xs = [t.timestamp() for t, _ in pace]  # POSIX seconds: plain floats, UTC by definition
    values = [v for _, v in pace]
    ax.plot(xs, values, color=PACE_COLOUR, linewidth=1.4, label="step time")
    first, last = min(xs), max(xs)
    # One point alone would let matplotlib pad the axis by +-5 % of the epoch (years), and
    # the hourly locator below would then make tens of thousands of ticks.
    lo, hi = (first, last) if last > first else (first - 1800, first + 1800)
    shown = [v for v in values if math.isfinite(v)]
    if yesterday:
        ax.plot(
            [t.timestamp() for t, _ in yesterday],
            [v for _, v in yesterday],
            color=YESTERDAY_COLOUR,
            linewidth=1.2,
            linestyle="--",
            label=baseline[0] if baseline else "24 h earlier",
        )
        shown += [v for _, v in yesterday if math.isfinite(v)]
    if baseline is not None and math.isfinite(baseline[1]) and baseline[1] > 0:
        # The level the text compares with, even where no series of it is drawn (a previous
        # run's pace lies outside this time axis): else "8 % slower than job 41" has nothing
        # to be slower than on the chart.
        name, level = baseline
        ax.axhspan(
            level * (1 - jitter),
            level * (1 + jitter),
            color=BAND_COLOUR,
            alpha=0.18,
            linewidth=0,
            label=f"ordinary jitter (\u00b1{jitter:.0%})",
        )
        ax.axhline(
            level,
            color=YESTERDAY_COLOUR,
            linewidth=1.2,
            linestyle="-.",
            label=f"baseline, {name}: {number(level)} s",
        )
        shown.append(level)
    said = since.timestamp() if since is not None else None
    unexplained = [
        x
        for x in level_shifts(xs, values, jitter)
        if said is None or abs(x - said) > max(3600.0, (last - first) / 48)
    ]
    for k, x in enumerate(unexplained[:MAX_SHIFTS]):
        # A jump the answer does not speak of must not pass for part of the one it does.
        ax.axvline(
            x,
            color=UNEXPLAINED_COLOUR,
            linestyle="--",
            linewidth=1.2,
            label=f"changed at {_utc(x):%H:%M} UTC, not explained" if k == 0 else None,
        )
    if since is not None:
        label = f"slow since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        if first <= since.timestamp() <= last:  # outside, a line would only stretch the axis
            ax.axvline(since.timestamp(), color=TEXT, linestyle=":", linewidth=1.2, label=label)
        else:
            ax.plot([], [], " ", label=label)  # the legend still says when it began
    _honest_y(ax, shown, baseline[1] if baseline else None, jitter)
    ax.set_xlim(lo, hi)
    # Ticks on round UTC times (multiples of the step from the epoch), about 12 at most.
    minutes = (hi - lo) / 60
    steps = (5, 10, 15, 30, 60, 120, 180, 240, 360, 720)
    step = next((m for m in steps if minutes / m <= 12), 1440 * math.ceil(minutes / 17280))
    ax.xaxis.set_major_locator(MultipleLocator(step * 60))
    ax.xaxis.set_major_formatter(FuncFormatter(_hhmm))
    ax.set_xlabel(
        f"time (UTC), {_utc(first):%Y-%m-%d %H:%M} to {_utc(last):%Y-%m-%d %H:%M}", color=TEXT
    )
    ax.set_ylabel("step time (s)", color=TEXT)
    _legend(ax)


def level_shifts(xs: Sequence[float], values: Sequence[float], jitter: float) -> list[float]:
    """Where the pace steps to a new level and stays: the median of a window after a point and
    of one before it differ by more than `jitter` (a share), and nine in ten points of each
    window lie on their own side of the midway level (an oscillation, half on each side, is
    no step). Windows are a 24th of the series (at least 5 points), the one after twice that;
    the step is placed on the first of three points in a row past the midway level."""
    n = len(values)
    width = max(5, n // 24)
    stride = max(1, width // 4)
    shifts: list[float] = []
    i = width
    while i + width <= n:
        before = [v for v in values[i - width : i] if math.isfinite(v)]
        # Two windows after (or to the end): a level held for one window and left again is a
        # swing, not a step.
        after = [v for v in values[i : i + 2 * width] if math.isfinite(v)]
        if len(before) < 3 or len(after) < 3:
            i += stride
            continue
        old, new = statistics.median(before), statistics.median(after)
        if old > 0 and abs(new / old - 1) > jitter:
            mid = (old + new) / 2
            up = new > old
            kept_after = sum((v > mid) == up for v in after) / len(after)
            kept_before = sum((v > mid) != up for v in before) / len(before)
            if kept_after >= 0.9 and kept_before >= 0.9:
                # The first of three points in a row on the new side: one stray point of
                # the old level's jitter does not place the step.
                at = next(
                    (
                        k
                        for k in range(i - width, i + width - 2)
                        if all((values[k + d] > mid) == up for d in range(3))
                    ),
                    i,
                )
                shifts.append(xs[at])
                i = max(at + width, i + stride)  # the new level is the next one's "before"
                continue
        i += stride
    return shifts


def _honest_y(ax: Axes, values: Sequence[float], level: float | None, jitter: float) -> None:
    """A y-axis at least twice the jitter band high on each side of the level (the baseline,
    else the median): matplotlib fits the axis to the data, and 0.5 % of noise then fills the
    panel as if the job had changed pace. Real changes still widen it to fit."""
    if not values:
        return
    centre = level if level is not None else statistics.median(values)
    if not (math.isfinite(centre) and centre > 0):
        return
    least = centre * 2 * max(jitter, 0.005)
    low, high = min(min(values), centre - least), max(max(values), centre + least)
    pad = (high - low) * 0.05
    ax.set_ylim(max(0.0, low - pad), high + pad)


def _node_panel(
    ax: Axes,
    metric_label: str,
    per_node: Sequence[NodeValue],
    stragglers: set[str],
    median: float | None,
    spread: float = DEFAULT_SPREAD,
) -> None:
    ax.set_ylabel(metric_label, color=TEXT)
    if not per_node:
        _empty(ax, "no per-node values")
        return
    n = len(per_node)
    marker_size = 4.0 if n <= 256 else 2.0  # thin markers: 4,096 nodes stay a readable cloud
    ax.plot(
        range(n),
        [p.value for p in per_node],
        linestyle="none",
        marker="o",
        markersize=marker_size,
        color=NODE_COLOUR,
        label=f"node ({n})",
    )
    if median is not None and math.isfinite(median):
        ax.axhline(median, color=MEDIAN_COLOUR, linewidth=1.4, label=f"median {number(median)}")
        if median > 0:
            ax.axhspan(
                median * (1 - spread),
                median * (1 + spread),
                color=MEDIAN_COLOUR,
                alpha=0.12,
                linewidth=0,
                label=f"ordinary spread (\u00b1{spread:.0%})",
            )
    marked = [(i, p) for i, p in enumerate(per_node) if p.node in stragglers]
    if marked:
        ax.plot(
            [i for i, _ in marked],
            [p.value for _, p in marked],
            linestyle="none",
            marker="D",
            markersize=7,
            color=STRAGGLER_COLOUR,
            label=f"straggler ({len(marked)})",
        )
        centre = median if median is not None and math.isfinite(median) else 0.0

        # Name the ones farthest from the median (NaN last); ties keep job order: stable output.
        def distance(ip: tuple[int, NodeValue]) -> float:
            d = abs(ip[1].value - centre)
            return d if math.isfinite(d) else -1.0

        named = sorted(marked, key=lambda ip: -distance(ip))[:MAX_ANNOTATIONS]
        for k, (i, p) in enumerate(sorted(named, key=lambda ip: ip[0])):
            up = p.value >= centre
            # Names sit on three fixed rows in the headroom, cycling along x, so neighbours
            # do not overlap each other or the cloud of nodes.
            row = 0.97 - 0.055 * (k % 3) if up else 0.03 + 0.055 * (k % 3)
            ax.annotate(
                p.node,
                (i, p.value),
                xytext=(i, row),
                textcoords=("data", "axes fraction"),
                ha="center",
                va="top" if up else "bottom",
                fontsize=8,
                color=TEXT,
                arrowprops={"arrowstyle": "-", "color": TEXT, "linewidth": 0.5, "shrinkB": 5},
            )
        if len(marked) > len(named):  # above the panel, at the right end of the legend row
            ax.text(
                1.0,
                1.01,
                f"+{len(marked) - len(named)} more",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                color=TEXT,
                fontsize=9,
            )
    ax.margins(x=0.01, y=0.35)  # headroom for the rows of names
    values = [p.value for p in per_node if math.isfinite(p.value)]
    if median is not None and math.isfinite(median) and median > 0 and values:
        # As on the pace panel: a few tenths of a percent between healthy nodes must not fill
        # the panel; 35 % headroom over the least height keeps room for the names.
        least = median * 2 * max(spread, 0.005)
        low, high = min(min(values), median - least), max(max(values), median + least)
        pad = (high - low) * 0.35
        ax.set_ylim(low - pad, high + pad)
    if n <= MAX_NODE_TICKS:
        ax.set_xticks(range(n), [p.node for p in per_node], rotation=90, fontsize=7)
        ax.set_xlabel("node", color=TEXT)
    else:
        ax.set_xlabel("node rank (job order)", color=TEXT)
    _legend(ax)


HIGHLIGHT_COLOUR: Final = "#E69F00"  # Okabe-Ito orange


def highlights_chart(
    weeks: Sequence[tuple[datetime, int]],
    *,
    title: str,
    now: datetime | None = None,
    zone: tzinfo = UTC,
) -> bytes:
    """Highlights per digest week as PNG bytes, under MAX_BYTES (see `_highlights_figure`)."""
    return _png(_highlights_figure(weeks, title=title, now=now, zone=zone))


def _highlights_figure(
    weeks: Sequence[tuple[datetime, int]],
    *,
    title: str,
    now: datetime | None = None,
    zone: tzinfo = UTC,
) -> Figure:
    """The highlights chart before rendering (the tests read its bars).

    Each bar covers the days of its week (from the previous digest to its own), so a bar
    stands where its highlights happened and the ticks name the week's first day in `zone`, as
    the text does; the week under way at `now` is hatched, named "so far" and stops at `now`
    (drawn whole, it would stand on days that have not come)."""
    fig = Figure(figsize=(WIDTH_IN, 4.5), facecolor=BACKGROUND, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title, color=TEXT, fontsize=14)
    ax = fig.subplots()
    _style(ax)
    if not weeks:
        _empty(ax, "no highlights yet")
        return fig
    spans = week_spans(weeks)
    day = 86400.0
    for start, end, n in spans:
        ongoing = now is not None and end > now
        left, right = start.timestamp(), end.timestamp()
        if ongoing and now is not None:
            right = max(left + 3600, now.timestamp())  # the days to come have no highlights yet
        ax.bar(
            left + 0.05 * (right - left),
            n,
            width=0.9 * (right - left),
            align="edge",
            color=BACKGROUND if ongoing else HIGHLIGHT_COLOUR,
            edgecolor=HIGHLIGHT_COLOUR,
            hatch="//" if ongoing else None,
            linewidth=1.2,
            label=f"this week so far ({n})" if ongoing else None,
        )
    first, last = spans[0][0].timestamp(), spans[-1][1].timestamp()
    ax.set_xlim(first - day, last + day)
    # Ticks on week starts, every k-th week so that about 12 are named.
    k = max(1, math.ceil(len(spans) / 12))
    ticks = [start for start, _end, _n in spans][::k]
    ax.set_xticks(
        [t.timestamp() for t in ticks], [f"{t.astimezone(zone):%d %b\n%Y}" for t in ticks]
    )
    zone_name = getattr(zone, "key", None) or str(zone)
    ax.set_xlabel(f"week from each digest to the next (dates in {zone_name})", color=TEXT)
    ax.set_ylabel("highlights a week", color=TEXT)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if now is not None and spans[-1][1] > now:
        ax.axvline(now.timestamp(), color=TEXT, linestyle=":", linewidth=1.0, label="now")
        _legend(ax)
    return fig


def _png(fig: Figure) -> bytes:
    """The figure as PNG under Slack-friendly MAX_BYTES, at a lower DPI when it must be."""
    png = b""
    for dpi in (DPI, *FALLBACK_DPIS):
        buf = io.BytesIO()
        # No "Software" text chunk and no timestamp: identical input, identical bytes.
        fig.savefig(buf, format="png", dpi=dpi, facecolor=BACKGROUND, metadata={"Software": None})
        png = buf.getvalue()
        if len(png) < MAX_BYTES:
            break
    return png
