"""The triage over a scheduler with no metrics source: the scheduler's nodes, never a verdict.

The simulated scheduler stands here for a real one (the e2e tests in
tests/e2e/test_no_metrics.py run the same against the real Slurm and kube-apiserver): what is
asserted is what the services make of a scheduler alone."""

from __future__ import annotations

import pytest

from bot.backends.scheduler_inventory import SchedulerInventory
from bot.backends.sim.fleet import SimFleet
from bot.backends.sim.scheduler import SimScheduler
from bot.errors import BackendError
from bot.render.triage import glance_lines, render_unchecked
from bot.triage.jobs import find_job
from bot.triage.service import (
    NO_METRICS,
    NoMetrics,
    StateGlance,
    Triage,
    UncheckedNode,
    UncheckedNodes,
    UserError,
    fleet_faults,
    fleet_glance,
    hw_faults,
    node_health,
)


@pytest.fixture
def triage() -> Triage:
    scheduler = SimScheduler(SimFleet(16, seed=0))
    return Triage(None, SchedulerInventory(scheduler), scheduler)


async def test_a_listed_node_shows_its_state_and_jobs_and_is_not_checked(triage: Triage) -> None:
    report = await node_health(triage, "gpu-0001")
    assert isinstance(report, UncheckedNode)
    assert report.scheduler is not None and report.jobs  # the simulated fleet runs jobs there
    assert all("gpu-0001" in j.nodes for j in report.jobs)
    msg = render_unchecked(report)
    assert msg.text == "gpu-0001: health not checked"
    assert NO_METRICS in str(msg.blocks) and "healthy" not in str(msg.blocks)


async def test_an_unlisted_node_is_unknown_to_the_scheduler(triage: Triage) -> None:
    report = await node_health(triage, "gpu-0400")
    assert isinstance(report, UserError)
    assert report.sentence.startswith("The simulated scheduler does not know a node `gpu-0400`")


async def test_a_hostlist_is_counted_by_state_with_the_unlisted_left_out(triage: Triage) -> None:
    report = await node_health(triage, "gpu-[0015-0018]")
    assert isinstance(report, UncheckedNodes)
    assert sorted(report.states) == ["gpu-0015", "gpu-0016"]
    assert report.unknown == ["gpu-0017", "gpu-0018"]


async def test_faults_glance_and_sweep_say_what_is_missing(triage: Triage) -> None:
    faults = await hw_faults(triage, "--since 6h")
    assert isinstance(faults, UserError) and NO_METRICS in faults.sentence
    bad = await hw_faults(triage, "--since forever")
    assert isinstance(bad, UserError) and NO_METRICS not in bad.sentence  # bad input first
    glance = await fleet_glance(triage)
    assert isinstance(glance, StateGlance) and glance.nodes == 16
    assert any(NO_METRICS in line for line in glance_lines(glance))
    with pytest.raises(NoMetrics) as err:
        await fleet_faults(triage)
    assert isinstance(err.value, BackendError) and err.value.user_text() == NO_METRICS


async def test_job_slow_says_it_cannot_tell_before_anything_is_posted(triage: Triage) -> None:
    assert triage.scheduler is not None
    job = next(j for j in await triage.scheduler.jobs() if j.state.value == "running")
    found = await find_job(triage, job.job_id, triage.stragglers)
    assert isinstance(found, UserError)
    assert "cannot tell why it is slow: " + NO_METRICS in found.sentence
