"""The /job-slow chart: a valid, opaque, deterministic PNG under 1 MB that shows the stragglers."""

from __future__ import annotations

import io
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from matplotlib import colors as mcolors
from matplotlib import image as mimage

from bot.render import charts
from bot.render.charts import MAX_BYTES, NodeValue, job_chart

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NOW = datetime(2024, 5, 2, 12, 0, tzinfo=UTC)


def series(points: int, start: datetime, base: float) -> list[tuple[datetime, float]]:
    return [
        (start + timedelta(minutes=i), base + 0.2 * math.sin(i / 37.0) + (i > points // 2))
        for i in range(points)
    ]


def nodes(n: int) -> list[NodeValue]:
    return [NodeValue(f"gpu-{i:04d}", 1.0 + 0.01 * ((i * 7919) % 13)) for i in range(n)]


def inputs(
    n_nodes: int = 64,
    points: int = 2880,
    stragglers: tuple[str, ...] = ("gpu-0003", "gpu-0040"),
    **over: Any,
) -> dict[str, Any]:
    start = NOW - timedelta(minutes=points)
    per_node = [
        NodeValue(p.node, p.value * 1.6) if p.node in stragglers else p for p in nodes(n_nodes)
    ]
    kwargs: dict[str, Any] = {
        "title": "job 4100123 llama3-70b-pretrain-003",
        "pace": series(points, start, 1.0),
        "yesterday": series(points, start, 0.9),
        "since": start + timedelta(minutes=points // 2),
        "metric_label": "step time per node (s)",
        "per_node": per_node,
        "stragglers": set(stragglers),
        "median": 1.06,
    }
    kwargs.update(over)
    return kwargs


def render(**over: Any) -> bytes:
    return job_chart(**inputs(**over))


def decode(png: bytes) -> np.ndarray[Any, Any]:
    assert png.startswith(PNG_SIGNATURE)
    return np.asarray(mimage.imread(io.BytesIO(png), format="png"))


def luminance(colour: str) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in mcolors.to_rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def count_close(img: np.ndarray[Any, Any], colour: str, tol: float = 0.04) -> int:
    target = np.array(mcolors.to_rgb(colour))
    return int(np.sum(np.all(np.abs(img[..., :3] - target) < tol, axis=-1)))


def test_contrast_helper_matches_known_values() -> None:
    assert contrast("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert contrast("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)


def test_text_on_background_meets_wcag_aa() -> None:
    assert contrast(charts.TEXT, charts.BACKGROUND) >= 4.5


def test_large_job_is_a_png_under_the_budget_at_full_size() -> None:
    png = render(
        n_nodes=4096, points=2880, stragglers=tuple(f"gpu-{i:04d}" for i in range(0, 4096, 200))
    )
    assert len(png) < MAX_BYTES == 1_000_000
    img = decode(png)
    assert img.shape == (800, 1200, 4)


def test_background_is_opaque_and_the_chosen_colour() -> None:
    img = decode(render())
    for y, x in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
        assert img[y, x, 3] == 1.0
        assert np.allclose(img[y, x, :3], mcolors.to_rgb(charts.BACKGROUND), atol=1 / 255)


@pytest.mark.parametrize(
    "over",
    [
        {"pace": [], "yesterday": []},
        {"pace": [], "since": None},
        {"yesterday": [], "since": None},
        {"per_node": [], "stragglers": set(), "median": None},
        {"pace": [], "yesterday": [], "per_node": [], "stragglers": set(), "median": None},
        {"median": float("nan")},
        {"since": NOW - timedelta(days=5)},  # before the window: legend only
        {"pace": [(NOW, 1.0)], "yesterday": [(NOW, 0.9)], "since": NOW},  # a single point
        {"points": 90},  # 90 minutes: hourly ticks
        {"per_node": [NodeValue("gpu-0003", float("nan")), NodeValue("gpu-0004", math.inf)]},
    ],
)
def test_sparse_inputs_still_give_a_full_size_png(over: dict[str, Any]) -> None:
    img = decode(render(**over))
    assert img.shape == (800, 1200, 4)
    assert img[0, 0, 3] == 1.0


def test_empty_series_differs_from_a_full_one() -> None:
    assert render(pace=[], yesterday=[]) != render()


def test_same_input_same_bytes() -> None:
    assert render(n_nodes=512) == render(n_nodes=512)


def test_stragglers_are_drawn_in_their_colour() -> None:
    marked = decode(render(stragglers=("gpu-0003", "gpu-0040")))
    plain = decode(render(stragglers=()))
    assert count_close(plain, charts.STRAGGLER_COLOUR) == 0
    assert count_close(marked, charts.STRAGGLER_COLOUR) > 40


def texts_of(**over: Any) -> list[list[str]]:
    """The texts drawn in each panel (annotations included), top panel first."""
    fig = charts._figure(**inputs(**over))
    return [[t.get_text() for t in ax.texts] for ax in fig.axes]


def legend_of(panel: int, **over: Any) -> list[str]:
    legend = charts._figure(**inputs(**over)).axes[panel].get_legend()
    assert legend is not None
    return [t.get_text() for t in legend.get_texts()]


def test_stragglers_are_named_up_to_the_cap_then_counted() -> None:
    few = ("gpu-0003", "gpu-0040")
    assert texts_of(stragglers=few)[1] == ["gpu-0003", "gpu-0040"]
    many = tuple(f"gpu-{i:04d}" for i in range(0, 64, 4))  # 16 stragglers
    top, bottom = texts_of(stragglers=many)
    assert top == []
    names = [t for t in bottom if t.startswith("gpu-")]
    assert len(names) == charts.MAX_ANNOTATIONS
    assert set(names) <= set(many)
    assert f"+{len(many) - charts.MAX_ANNOTATIONS} more" in bottom
    assert "straggler (16)" in legend_of(1, stragglers=many)


def test_unknown_straggler_names_are_ignored() -> None:
    assert texts_of(stragglers=("gpu-0003", "not-in-job"))[1] == ["gpu-0003"]


def test_empty_panels_say_so() -> None:
    top, bottom = texts_of(pace=[], per_node=[], stragglers=set())
    assert top == ["no step-time series"]
    assert bottom == ["no per-node values"]


def test_legends_name_the_overlay_the_slowdown_and_the_median() -> None:
    top = legend_of(0)
    assert top[:2] == ["step time", "24 h earlier"]
    assert "slow since 2024-05-01 12:00 UTC" in top
    assert "median 1.06" in legend_of(1)
    assert "24 h earlier" not in legend_of(0, yesterday=[])


def test_few_nodes_are_named_on_the_axis_many_are_not() -> None:
    def ticks(n: int) -> list[str]:
        fig = charts._figure(**inputs(n_nodes=n, stragglers=()))
        return [t.get_text() for t in fig.axes[1].get_xticklabels()]

    assert ticks(8) == [f"gpu-{i:04d}" for i in range(8)]
    assert not any(t.startswith("gpu-") for t in ticks(4096))


def test_over_budget_lowers_the_dpi(monkeypatch: pytest.MonkeyPatch) -> None:
    full = render()
    monkeypatch.setattr(charts, "MAX_BYTES", len(full) // 2)
    smaller = render()
    assert len(smaller) < len(full)
    assert decode(smaller).shape[1] < 1200


@pytest.mark.parametrize(
    "over",
    [{}, {"points": 90}, {"points": 20_000}, {"pace": [(NOW, 1.0)], "since": NOW}],
)
def test_time_axis_has_a_dozen_ticks_or_so(over: dict[str, Any]) -> None:
    top = charts._figure(**inputs(**over)).axes[0]
    lo, hi = top.get_xlim()
    visible = [x for x in top.get_xticks() if lo <= x <= hi]
    assert 2 <= len(visible) <= 14
    labels = [charts._hhmm(x) for x in visible]
    assert all(len(label.split("\n")[0]) == 5 and label[2] == ":" for label in labels)


def flat(points: int, level: float, wobble: float) -> list[tuple[datetime, float]]:
    """A pace within +-`wobble` of `level` (0.005 = the 0.5 % a healthy job jitters)."""
    start = NOW - timedelta(minutes=points)
    return [
        (start + timedelta(minutes=i), level * (1 + wobble * math.sin(i / 3.0)))
        for i in range(points)
    ]


PREVIOUS_RUN = {
    "pace": flat(240, 2.093, 0.0025),
    "yesterday": [],
    "since": None,
    "baseline": ("its previous run (job 4100013)", 2.09),
    "per_node": [NodeValue(f"gpu-{i:04d}", 2.09 * (1 + 0.003 * math.sin(i))) for i in range(16)],
    "stragglers": set(),
    "median": 2.09,
}


def test_the_baseline_the_text_compares_with_is_drawn_without_its_series() -> None:
    top = legend_of(0, **PREVIOUS_RUN)
    assert "baseline, its previous run (job 4100013): 2.09 s" in top
    assert "ordinary jitter (±3%)" in top
    ax = charts._figure(**inputs(**PREVIOUS_RUN)).axes[0]
    levels = [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "-."]
    assert levels == [pytest.approx(2.09)]
    # Without a comparison there is no baseline to draw, and none is invented.
    without = legend_of(0, **{**PREVIOUS_RUN, "baseline": None})
    assert not any(t.startswith("baseline") for t in without)


def test_the_overlay_is_named_as_the_baseline_the_text_names() -> None:
    top = legend_of(0, baseline=("24 h earlier", 0.9))
    assert "24 h earlier" in top and "baseline, 24 h earlier: 0.9 s" in top


@pytest.mark.parametrize("panel", [0, 1])
def test_axes_do_not_magnify_half_a_percent_of_jitter(panel: int) -> None:
    ax = charts._figure(**inputs(**PREVIOUS_RUN)).axes[panel]
    low, high = ax.get_ylim()
    # 0.5 % of wobble takes less than a tenth of the height: the jitter band (+-3 % on the
    # pace, +-2 % on the nodes) and some room around it are on the axis.
    assert (high - low) / 2.09 >= 0.08
    assert low <= 2.09 * 0.97 and high >= 2.09 * 1.03


def test_a_real_change_still_fits_the_axis() -> None:
    pace = flat(240, 1.27, 0.002)
    pace += [(t + timedelta(hours=4), v * 1.5) for t, v in pace]
    ax = charts._figure(
        **inputs(pace=pace, yesterday=[], since=pace[240][0], baseline=("24 h earlier", 1.27))
    ).axes[0]
    low, high = ax.get_ylim()
    assert low <= 1.27 * 0.97 and high >= 1.27 * 1.5


def test_the_previous_run_chart_renders_with_its_band(tmp_path: Any) -> None:
    png = job_chart(**{**inputs(), **PREVIOUS_RUN})
    (tmp_path / "previous-run.png").write_bytes(png)  # looked at by hand while writing this
    img = decode(png)
    assert img.shape == (800, 1200, 4)
    band = mcolors.to_hex(
        np.array(mcolors.to_rgb(charts.BAND_COLOUR)) * 0.18
        + np.array(mcolors.to_rgb(charts.BACKGROUND)) * 0.82
    )
    assert count_close(img, band, tol=0.03) > 20_000  # a band across the panel, not a sliver


def test_the_handler_gives_the_chart_the_baseline_of_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from handlers import jobslow

    seen: dict[str, Any] = {}
    monkeypatch.setattr(jobslow, "job_chart", lambda **kw: seen.update(kw) or b"png")
    comparison = SimpleNamespace(
        baseline="its previous run (job 4100013)", before_s=2.09, since=None
    )
    job = SimpleNamespace(job_id="4100021", name="llm", nodes=("gpu-0001",))
    diagnosis = SimpleNamespace(
        job=job, comparison=comparison, per_node={}, stragglers=[], median_s=2.09
    )
    report = SimpleNamespace(diagnosis=diagnosis, pace=[], yesterday=[], lagging_label="s")
    assert jobslow.chart_png(report, 0.04, 0.01) == b"png"  # type: ignore[arg-type]
    assert seen["baseline"] == ("its previous run (job 4100013)", 2.09)
    assert (seen["jitter"], seen["spread"]) == (0.04, 0.01)


def two_jumps() -> list[tuple[datetime, float]]:
    """48 h of pace: 1.69 s, 5 % slower from 05:26 the second day, 4 % more from 21:45."""
    start = NOW - timedelta(hours=48)
    first, second = 29 * 60 + 26, 45 * 60 + 45
    return [
        (
            start + timedelta(minutes=i),
            1.69
            * (1 + 0.002 * math.sin(i))
            * (1.05 if i >= first else 1)
            * (1.04 if i >= second else 1),
        )
        for i in range(2880)
    ]


def test_level_shifts_find_each_jump_and_no_jitter() -> None:
    pace = two_jumps()
    xs, values = [t.timestamp() for t, _ in pace], [v for _, v in pace]
    found = [datetime.fromtimestamp(x, UTC) for x in charts.level_shifts(xs, values, 0.03)]
    assert found == [pace[29 * 60 + 26][0], pace[45 * 60 + 45][0]]
    jitter = flat(2880, 2.09, 0.005)
    xs, values = [t.timestamp() for t, _ in jitter], [v for _, v in jitter]
    assert charts.level_shifts(xs, values, 0.03) == []
    # +-20 % waves of a 4-hour period, then a step of 1 s: the waves come back, the step stays.
    swing = series(2880, NOW, 1.0)
    xs, values = [t.timestamp() for t, _ in swing], [v for _, v in swing]
    assert charts.level_shifts(xs, values, 0.03) == [swing[2880 // 2 + 1][0].timestamp()]


def test_a_change_the_text_does_not_name_is_marked_unexplained(tmp_path: Any) -> None:
    pace = two_jumps()
    said = {
        "pace": pace,
        "yesterday": [],
        "since": pace[29 * 60 + 26][0],
        "baseline": ("24 h earlier", 1.69),
    }
    top = legend_of(0, **said)
    assert f"changed at {pace[45 * 60 + 45][0]:%H:%M} UTC, not explained" in top
    assert f"slow since {pace[29 * 60 + 26][0]:%Y-%m-%d %H:%M} UTC" in top
    (tmp_path / "two-jumps.png").write_bytes(job_chart(**inputs(**said)))
    # One jump, the one the text names: nothing is marked as unexplained.
    one = [(t, min(v, 1.69 * 1.06)) for t, v in pace]
    assert not any("not explained" in t for t in legend_of(0, **{**said, "pace": one}))
