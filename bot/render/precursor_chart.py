"""The PNG chart for /hw-faults why: the leading candidate around each event, threshold drawn.

One line an event, its node's values aligned on the event's instant (minutes before it
negative): a precursor shows as the lines rising past the threshold in the shaded lead
window and the events whose line stays low are visible too. The threshold and the warning
level of the alert rule are drawn across. Same conventions as bot/render/charts.py.
"""

from __future__ import annotations

from typing import Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bot.precursors.models import PrecursorReport
from bot.precursors.rule import warn_level
from bot.render.charts import BACKGROUND, TEXT, _empty, _png, _style
from bot.render.precursors import kind_words, value

__all__ = ["precursor_chart"]

WIDTH_IN, HEIGHT_IN = 11.0, 6.0
LINE: Final = "#0072B2"  # blue: one line an event
THRESHOLD: Final = "#D55E00"  # vermillion
WARN: Final = "#E69F00"  # orange
LEAD: Final = "#E0E0E0"


def precursor_chart(report: PrecursorReport) -> bytes:
    return _png(_figure(report))


def _figure(report: PrecursorReport) -> Figure:
    """The figure before rendering (the tests read its texts)."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), facecolor=BACKGROUND, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    _style(ax)
    leading = report.leading
    if leading is None or leading.threshold is None:
        _empty(ax, "No precursor to draw")
        return fig
    unit = f" ({leading.candidate.unit})" if leading.candidate.unit else ""
    fig.suptitle(
        f"{leading.name} around each of {len(report.events)} "
        f"{kind_words(report.kind, len(report.events))}",
        color=TEXT,
        fontsize=13,
    )
    series = {s.node: s for s in report.around}
    lead_min = report.lead_s / 60
    ax.axvspan(-lead_min, 0, color=LEAD, zorder=0, label=f"lead window ({lead_min:.0f} min)")
    alpha = max(0.25, min(0.9, 3 / max(1, len(report.events))))
    for e in report.events:
        s = series.get(e.node)
        if s is None:
            continue
        at = e.at.timestamp()
        xs = [(t - at) / 60 for t in s.times if abs(t - at) <= 3 * report.lead_s + 600]
        ys = [
            v
            for t, v in zip(s.times, s.values, strict=True)
            if abs(t - at) <= 3 * report.lead_s + 600
        ]
        ax.plot(xs, ys, color=LINE, alpha=alpha, linewidth=1.2)
    ax.axhline(
        leading.threshold,
        color=THRESHOLD,
        linewidth=1.6,
        label=f"threshold {value(leading, leading.threshold)}",
    )
    ax.axhline(
        warn_level(leading),
        color=WARN,
        linewidth=1.2,
        linestyle="--",
        label=f"alert rule warns at {value(leading, warn_level(leading))}",
    )
    ax.axvline(0, color=TEXT, linewidth=1.0)
    ax.set_xlabel(f"minutes from each {kind_words(report.kind, 1)}", color=TEXT)
    ax.set_ylabel(f"{leading.name}{unit}", color=TEXT)
    ax.legend(loc="upper left", frameon=False, labelcolor=TEXT, fontsize=9)
    return fig
