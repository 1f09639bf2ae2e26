"""The /regressions chart: job paces aligned on their switch, and the effect per cohort."""

from __future__ import annotations

import io
from dataclasses import replace

from matplotlib import image as mimage

from bot.regressions.models import RegressionReport, SameWork, Verdict
from bot.render.charts import MAX_BYTES
from bot.render.regression_chart import _figure, headline, regressions_chart
from tests.unit.regression_samples import END, START, monday_report, quiet_report


def texts(report: RegressionReport) -> str:
    fig = _figure(report, title="t")
    return "\n".join(t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text")))


def test_a_full_size_png_under_the_budget_the_same_every_time() -> None:
    png = regressions_chart(monday_report(), title="Rollouts")
    assert png.startswith(b"\x89PNG") and len(png) < MAX_BYTES
    assert mimage.imread(io.BytesIO(png)).shape[:2] == (900, 1200)
    assert regressions_chart(monday_report(), title="Rollouts") == png


def test_the_top_panel_shows_the_worst_regression_aligned_on_each_switch() -> None:
    report = monday_report()
    assert headline(report) is report.findings[0]
    said = texts(report)
    assert (
        "kernel 5.15.0-113-generic against 5.15.0-105-generic: 2.1 % slower; 37 jobs, each aligned "
        "on its switch"
    ) in said
    assert "hours from the job's switch" in said
    assert "each job's first node switched" in said


def test_every_cohort_with_its_effect_and_confounding_named() -> None:
    said = texts(monday_report())
    for label in ("+2.1 %", "+1.2 % confounded", "-0.9 %", "+0.1 %", "too few jobs"):
        assert label in said
    assert "(with image v42)" in said


def test_without_aligned_paces_the_jobs_effects_are_drawn() -> None:
    report = monday_report()
    bare = replace(report, findings=tuple(replace(f, aligned=()) for f in report.findings))
    said = texts(bare)
    assert "each job's step time after its switch vs before (%)" in said
    assert "2.1 % slower; 37 jobs, each job's own effect" in said
    assert regressions_chart(bare, title="t").startswith(b"\x89PNG")


def test_no_effect_alone_still_draws_it() -> None:
    report = quiet_report()
    assert headline(report) is not None
    assert "no effect seen; 37 jobs" in texts(report)
    assert regressions_chart(report, title="t").startswith(b"\x89PNG")


def test_nothing_to_draw_says_so() -> None:
    empty = RegressionReport(START, END, None, (), jobs_read=0, nodes_read=0)
    assert "no rollout in this window" in texts(empty)
    thin = replace(
        monday_report(),
        findings=tuple(f for f in monday_report().findings if f.verdict is Verdict.TOO_FEW),
    )
    assert "no rollout with jobs on both sides" in texts(thin)


def test_the_headline_is_a_clean_claim_before_a_costlier_confounded_one() -> None:
    report = monday_report()
    kernel, driver = report.findings[0], report.findings[1]
    costly = replace(driver, gpu_days_per_week=50.0)
    assert headline(replace(report, findings=(costly, kernel))) is kernel


def test_the_per_node_evidence_is_drawn_under_its_rollout_and_says_if_it_agrees() -> None:
    report = monday_report()
    first, second, *rest = report.findings
    agrees = SameWork(
        Verdict.REGRESSION, 2.0, 1.6, 2.4, jobs=12, nodes_new=80, nodes_old=90, agrees=True
    )
    differs = SameWork(
        Verdict.NO_EFFECT, 0.1, -0.3, 0.5, jobs=5, nodes_new=9, nodes_old=30, agrees=False
    )
    drawn = replace(
        report,
        findings=(replace(first, same_work=agrees), replace(second, same_work=differs), *rest),
    )
    said = texts(drawn)
    assert "per node +2.0 % (agrees, 12 jobs)" in said
    assert "per node +0.1 % (disagrees, 5 jobs)" in said
    legend = _figure(drawn, title="t").axes[1].get_legend()
    assert legend is not None
    entries = [t.get_text() for t in legend.get_texts()]
    assert entries.count("per node at the same work") == 1  # one entry, not one a rollout
    assert "per node" not in texts(report)
    assert regressions_chart(drawn, title="t").startswith(b"\x89PNG")
