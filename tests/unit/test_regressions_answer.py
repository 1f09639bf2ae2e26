"""/regressions' answer: the sentence the fleet's performance people read, worst first, with
what limits each claim said in words; valid Block Kit whatever the number of rollouts."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from bot.regressions.aligned import align
from bot.regressions.models import RegressionReport, SameWork, Verdict
from bot.render.regressions import render_answer, render_detail, render_progress
from bot.shell.emulator import validate_blocks
from tests.unit.regression_samples import END, START, finding, monday_report, paces, quiet_report

WEEK = timedelta(days=7)


def text_of(blocks: list[dict[str, object]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def test_the_regression_sentence_reads_as_the_fleet_would_say_it() -> None:
    msg = render_answer(monday_report(), WEEK)
    assert validate_blocks(msg.blocks) == []
    assert (
        "kernel `5.15.0-113-generic` against `5.15.0-105-generic`: steps 2.1 % slower "
        "(95 % interval 1.7-2.5 %), 37 jobs on 1,912 nodes since the rollout began "
        "Tue 1 Dec 03:10 UTC; about 6.1 GPU-days a week at today's load"
    ) in text_of(msg.blocks)
    assert msg.text == "kernel 5.15.0-113-generic: steps 2.1 % slower"


def test_worst_first_then_improvements_no_effect_and_too_few() -> None:
    report = monday_report()
    # The finder's order is not trusted: the costliest regression leads whatever it gave.
    shuffled = replace(report, findings=tuple(reversed(report.findings)))
    text = text_of(render_answer(shuffled, WEEK).blocks)
    order = [
        text.index(s)
        for s in ("5.15.0-113-generic", "550.90.07", "image `v42`", "96.00.99.00.01", "2.21.5")
    ]
    assert order == sorted(order)
    assert "2 regressions, 1 improvement, 1 rollout with no effect seen, 1 too thin" in text
    assert "steps 0.9 % faster (95 % interval 0.5-1.3 %)" in text
    assert "saves about 2.3 GPU-days a week" in text
    assert "no effect this data can show (steps 0.1 % slower, 95 % interval -0.3 to +0.4 %)" in (
        text
    )
    assert "2 jobs crossed it, too few to say anything" in text


def test_a_confounded_change_is_said_to_be_one() -> None:
    text = text_of(render_answer(monday_report(), WEEK).blocks)
    assert (
        "*confounded*: the jobs that crossed it also moved to image v42 at about the same time "
        "(0 of 14 changed nothing else), so which change did it cannot be told"
    ) in text


def test_thin_evidence_is_said() -> None:
    thin = finding(Verdict.REGRESSION, 3.0, 0.8, 5.2, jobs=4, nodes=40, clean=4, gpu_days=0.5)
    report = RegressionReport(START, END, "kernel", (thin,), jobs_read=50, nodes_read=400)
    assert "thin evidence: 4 jobs crossed it" in text_of(render_answer(report, WEEK).blocks)


def test_with_no_true_effect_it_says_so() -> None:
    text = text_of(render_answer(quiet_report(), WEEK).blocks)
    assert (
        "No kernel rollout in the last 7 days moved step time beyond the jobs' own noise: "
        "1 rollout with no effect seen"
    ) in text
    assert "GPU-days" not in text  # no cost is claimed for an effect not shown


def test_no_rollout_at_all() -> None:
    empty = RegressionReport(START, END, "driver", (), jobs_read=12, nodes_read=64)
    text = text_of(render_answer(empty, WEEK).blocks)
    assert "No driver rollout in the last 7 days: nothing changed to compare" in text
    assert validate_blocks(render_detail(empty).blocks) == []


def test_many_rollouts_stay_valid_and_the_rest_is_counted() -> None:
    many = tuple(
        finding(Verdict.REGRESSION, 1 + i / 10, 0.5, 2 + i / 10, new=f"6.{i}", seed=i)
        for i in range(20)
    )
    report = RegressionReport(START, END, None, many, jobs_read=900, nodes_read=4096)
    answer, detail = render_answer(report, WEEK), render_detail(report)
    assert validate_blocks(answer.blocks) == []
    assert "and 12 more" in text_of(answer.blocks)
    for chunk in [detail.blocks, *detail.overflow]:
        assert validate_blocks(chunk) == []


def test_detail_gives_the_rollout_the_margin_and_the_jobs() -> None:
    detail = render_detail(monday_report())
    text = text_of([*detail.blocks, *[b for c in detail.overflow for b in c]])
    assert "1,912 nodes from Tue 1 Dec 03:10 UTC to Wed 2 Dec 05:10 UTC" in text
    assert "`gpu-[0001-1912]`" in text
    assert "claimed only beyond ±0.40 %" in text
    assert "31 of them changed nothing else around their switch" in text
    assert "Effect -0.90 % (95 % interval -1.30 to -0.50 %)" in text


def test_progress_names_what_it_reads() -> None:
    msg = render_progress("kernel", timedelta(days=14), "reading every job's pace")
    assert "Looking at kernel rollouts over the last 14 days" in msg.text
    assert "reading every job's pace" in text_of(msg.blocks)


def test_align_puts_every_job_on_its_own_switch() -> None:
    job_paces, switches = paces(3, 2.0)
    for p in job_paces:
        a = align(p, switches[p.job_id])
        assert a is not None
        before = [v for h, v in a.points if h < 0]
        after = [v for h, v in a.points if h >= 1]
        assert abs(sorted(before)[len(before) // 2] - 1) < 0.005
        assert 1.015 < sorted(after)[len(after) // 2] < 1.03
    assert align(job_paces[0], END + timedelta(days=30)) is None  # no pace after it


def test_a_clean_claim_comes_before_a_costlier_confounded_one() -> None:
    report = monday_report()
    kernel, driver = report.findings[0], report.findings[1]
    costly = replace(driver, gpu_days_per_week=50.0)
    text = text_of(render_answer(replace(report, findings=(costly, kernel)), WEEK).blocks)
    assert text.index("5.15.0-113-generic") < text.index("550.90.07")


def test_an_estimate_on_few_clean_jobs_is_thin_even_when_many_crossed() -> None:
    f = finding(Verdict.REGRESSION, 1.8, 1.4, 2.2, jobs=12, clean=5, gpu_days=3.0)
    f = replace(f, job_effects=f.job_effects[:5])
    report = RegressionReport(START, END, "kernel", (f,), jobs_read=75, nodes_read=1024)
    assert "thin evidence: the estimate rests on the 5 jobs that changed nothing else" in (
        text_of(render_answer(report, WEEK).blocks)
    )


def test_a_note_about_one_rollout_stays_in_the_thread() -> None:
    report = replace(
        monday_report(),
        notes=("driver 550.90.07: 0 of 14 crossing jobs changed nothing else.", "No job pace."),
    )
    answer = text_of(render_answer(report, WEEK).blocks)
    assert "No job pace." in answer and "0 of 14 crossing jobs" not in answer
    assert "0 of 14 crossing jobs" in text_of(render_detail(report).blocks)


def test_the_thread_follows_the_answers_order() -> None:
    report = monday_report()
    shuffled = replace(report, findings=tuple(reversed(report.findings)))
    detail = text_of(render_detail(shuffled).blocks)
    assert detail.index("5.15.0-113-generic") < detail.index("550.90.07") < detail.index("2.21.5")


def test_a_tiny_claimed_effect_is_not_printed_as_zero() -> None:
    tiny = finding(Verdict.IMPROVEMENT, -0.012, -0.02, -0.005, jobs=10, clean=10, gpu_days=-4.2)
    report = RegressionReport(START, END, "driver", (tiny,), jobs_read=22, nodes_read=1024)
    text = text_of(render_answer(report, WEEK).blocks)
    assert "steps 0.01 % faster (95 % interval 0.01-0.02 %)" in text
    assert "0.0-0.0" not in text and "the same pace" not in text


def test_the_per_node_evidence_is_said_under_the_pace_and_a_disagreement_stands_out() -> None:
    report = monday_report()
    worst = report.findings[0]
    assert worst.verdict is Verdict.REGRESSION and worst.same_work is None
    # Without per-node compute times, the sentence is the pace's alone.
    assert "per-node compute time" not in text_of(render_answer(report, WEEK).blocks)
    agree = SameWork(Verdict.REGRESSION, 2.0, 1.6, 2.4, 14, 180, 176, agrees=True)
    with_nodes = replace(report, findings=(replace(worst, same_work=agree), *report.findings[1:]))
    text = text_of(render_answer(with_nodes, WEEK).blocks)
    assert (
        "per-node compute time, same job same steps: new-cohort nodes 2.0 % slower "
        "(95 % 1.6-2.4 %), 14 jobs, in line with the pace"
    ) in text
    assert "Per-node compute time compares" in text
    detail = text_of(render_detail(with_nodes).blocks)
    assert "the new cohort's 180 nodes against the old cohort's 176 in 14 jobs" in detail
    # Compute times that did not move while the pace did: said, not hidden.
    differ = SameWork(Verdict.NO_EFFECT, 0.05, -0.2, 0.3, 9, 90, 90, agrees=False)
    text = text_of(
        render_answer(
            replace(report, findings=(replace(worst, same_work=differ), *report.findings[1:])),
            WEEK,
        ).blocks
    )
    assert "new-cohort nodes 0.05 % slower (95 % -0.20 to +0.30 %), 9 jobs" in text
    assert "*disagrees with the pace*" in text
    few = SameWork(Verdict.TOO_FEW, 1.9, 1.2, 2.6, 3, 30, 30, agrees=True)
    text = text_of(
        render_answer(
            replace(report, findings=(replace(worst, same_work=few), *report.findings[1:])),
            WEEK,
        ).blocks
    )
    assert "3 jobs, too few to weigh" in text
    assert validate_blocks(render_answer(with_nodes, WEEK).blocks) == []
