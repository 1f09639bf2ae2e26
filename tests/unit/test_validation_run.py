"""The validation run's pure core: the batch script (run here by bash, with stand-in tools),
each step's state from its files, the verdict, and who may be tested."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bot import drain_reason
from bot.ports import SchedulerNode
from bot.validation.config import StepConfig
from bot.validation.run import StepFiles, StepState, batch_script, outcomes, verdict
from bot.validation.service import refusal

STEPS = (
    StepConfig(name="first", command=("true",), timeout_s=5),
    StepConfig(name="second", command=("false",), timeout_s=5),
)


def _run_script(steps: tuple[StepConfig, ...], out: Path) -> None:
    script = out.parent / "job.sh"
    script.write_text(batch_script(steps, str(out)))
    subprocess.run(["bash", str(script)], check=True, timeout=30)


def _files(out: Path, steps: tuple[StepConfig, ...]) -> dict[str, StepFiles]:
    def read(p: Path) -> str | None:
        return p.read_text() if p.exists() else None

    return {
        s.name: StepFiles(
            started=(out / f"{s.name}.started").exists(),
            stdout=read(out / f"{s.name}.out"),
            stderr=read(out / f"{s.name}.err"),
            exit_code=int(rc) if (rc := read(out / f"{s.name}.rc")) else None,
        )
        for s in steps
    }


def test_the_script_runs_every_step_and_writes_its_output_and_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "run 1"  # a space: the folder is quoted
    _run_script(STEPS, out)
    done = outcomes(STEPS, _files(out, STEPS), job_ended=True)
    assert [o.state for o in done] == [StepState.PASSED, StepState.FAILED]
    failed = verdict(done)
    assert failed is not None and failed.name == "second"
    assert failed.result is not None and failed.result.figure == "exited 1"


def test_an_argument_is_never_read_by_the_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    step = StepConfig(
        name="echo", command=("echo", f"$(touch {marker}); `touch {marker}`"), timeout_s=5
    )
    out = tmp_path / "out"
    _run_script((step,), out)
    assert not marker.exists()
    assert "$(touch" in (out / "echo.out").read_text()


def test_a_step_past_its_timeout_exits_124_and_fails_as_timed_out(tmp_path: Path) -> None:
    step = StepConfig(name="slow", command=("sleep", "20"), timeout_s=1)
    out = tmp_path / "out"
    _run_script((step,), out)
    (done,) = outcomes((step,), _files(out, (step,)))
    assert done.state is StepState.FAILED
    assert done.result is not None and done.result.figure == "timed out"


def test_states_before_the_end_and_after_a_job_that_died() -> None:
    files = {"first": StepFiles(started=True)}
    assert [o.state for o in outcomes(STEPS, files)] == [StepState.RUNNING, StepState.QUEUED]
    ended = outcomes(STEPS, files, job_ended=True)
    assert [o.state for o in ended] == [StepState.FAILED, StepState.FAILED]
    assert ended[0].result is not None and "ended before this step finished" in ended[0].line
    assert ended[1].result is not None and "never started" in ended[1].line
    assert verdict(outcomes(STEPS, {})) is None  # nothing failed yet


def test_only_a_known_node_out_of_service_is_tested() -> None:
    assert refusal(None, "gpu-9999") is not None
    idle = SchedulerNode(name="gpu-0001", state="idle")
    refused = refusal(idle, "gpu-0001")
    assert refused is not None and "drain it first" in refused.sentence
    drained = SchedulerNode(name="gpu-0001", state="idle", flags=("DRAIN",), reason="x")
    assert refusal(drained, "gpu-0001") is None
    down = SchedulerNode(name="gpu-0001", state="down")
    assert refusal(down, "gpu-0001") is None


def test_a_node_another_tool_tainted_is_not_tested_where_the_job_could_not_land() -> None:
    node = SchedulerNode(
        name="h100-a",
        state="idle",
        flags=("DRAIN",),
        reason="meowbot: xid79 gpu3",
        others_taints=("nvsentinel.dgxc.nvidia.com/quarantine=true:NoSchedule",),
    )
    refused = refusal(node, "h100-a")
    assert refused is not None
    assert "`nvsentinel.dgxc.nvidia.com/quarantine=true:NoSchedule`" in refused.sentence
    assert refusal(node.model_copy(update={"others_taints": ()}), "h100-a") is None


def test_a_failed_steps_reason_fits_the_schedulers_limit() -> None:
    reason = drain_reason.for_failed_validation("dcgm-diag-r2", "GPU Memory GPU 3: " + "x" * 300)
    assert reason.startswith("meowbot: failed validation dcgm-diag-r2: GPU Memory GPU 3")
    assert drain_reason.check(reason) == reason and len(reason) <= drain_reason.MAX_CHARS
    assert drain_reason.for_cancelled_validation("ana").endswith("by @ana")


def test_the_end_is_said_as_the_scheduler_holds_the_node() -> None:
    from bot.render.validation import render_run
    from bot.validation.service import Validation

    files = {"first": StepFiles(True, "", "", 0), "second": StepFiles(True, "", "", 1)}
    done = outcomes(STEPS, files, job_ended=True)
    drained = SchedulerNode(name="gpu-0001", state="idle", flags=("DRAIN",), reason="meowbot: x")
    idle = SchedulerNode(name="gpu-0001", state="idle")
    failed = Validation("gpu-0001", "r", done, job_id="7", ended=True, after=drained)
    assert "stays out of service" in render_run(failed, by="<@U1>", scheduler="Slurm").text
    # Someone resumed it meanwhile: the words follow Slurm, not the intent.
    failed.after = idle
    said = render_run(failed, by="<@U1>", scheduler="Slurm").text
    assert "failed validation, but it is in service" in said
    passed = Validation("gpu-0001", "r", done, job_id="7", ended=True, passed=True, after=drained)
    assert (
        "passed every step, but it is not back in service"
        in render_run(passed, by="<@U1>", scheduler="Slurm").text
    )


async def test_three_failures_in_30_days_make_an_rma_offender_retests_in_an_hour_one() -> None:
    from datetime import UTC, datetime, timedelta

    from bot.backends.fault_history import MemoryFaultHistory
    from bot.drain_reason import short_cause
    from bot.models import VerdictLevel
    from bot.triage.repeat_config import RepeatConfig
    from bot.triage.repeats import escalate, offenders
    from bot.triage.verdict import fault_level
    from bot.validation.service import count_failure

    cfg, now = RepeatConfig(), datetime(2026, 12, 7, 12, tzinfo=UTC)
    history = MemoryFaultHistory()
    # Retested twice within the hour, with no repair between: one failure, not three.
    for minutes in (0, 20, 40):
        assert (
            await count_failure(history, cfg, "gpu-0001", now + timedelta(minutes=minutes)) is None
        )
    # Failures 40 and 20 days ago and now: only two are within 30 days.
    for days in (40, 20):
        await count_failure(history, cfg, "gpu-0002", now - timedelta(days=days))
    assert await count_failure(history, cfg, "gpu-0002", now) is None
    # A third within 30 days: an offender, and the fault it adds reads RMA with its own cause.
    await count_failure(history, cfg, "gpu-0003", now - timedelta(days=9))
    await count_failure(history, cfg, "gpu-0003", now - timedelta(days=2))
    line = await count_failure(history, cfg, "gpu-0003", now)
    assert line == "3rd failed validation on the node in 30 days: 28 Nov, 05 Dec, today"
    found = offenders(await history.occurrences(["gpu-0003"]), now, cfg)
    [fault] = escalate([], found, now)
    assert fault_level(fault) is VerdictLevel.RMA and short_cause(fault) == "failed_validation"


def test_on_repair_tests_only_meowbots_drains_booted_since() -> None:
    from datetime import UTC, datetime, timedelta

    from bot.ports import SchedulerNode
    from bot.validation import policy

    drained = datetime(2026, 12, 7, 2, tzinfo=UTC)

    def node(
        reason: str | None, booted: datetime | None, boot_id: str | None = None
    ) -> SchedulerNode:
        return SchedulerNode(
            name="gpu-0001",
            state="idle",
            flags=("DRAIN",) if reason else (),
            reason=reason,
            reason_changed_at=drained if reason else None,
            booted_at=booted,
            boot_id=boot_id,
        )

    before, after = drained - timedelta(days=3), drained + timedelta(minutes=5)
    ours = "meowbot: xid79 gpu3"
    first = node(ours, before).boot_mark
    assert first == before.isoformat()
    assert not policy.repaired(node(ours, before), first)  # not booted since
    assert policy.repaired(node(ours, after), None)  # booted after the drain
    # Slurm restamps the reason's time at the reboot: the boot first seen tells.
    restamped = node(ours, after).model_copy(update={"reason_changed_at": after})
    assert not policy.repaired(restamped, None) and policy.repaired(restamped, first)
    # Kubernetes: no boot time, a boot id that changes.
    assert not policy.repaired(node(ours, None, "b-1"), "b-1")
    assert policy.repaired(node(ours, None, "b-2"), "b-1")
    # An operator's drain, a cancelled test, a node in service: only when asked.
    assert not policy.watched(node("bad fan", after))
    assert not policy.watched(node("meowbot: validation cancelled by @ana", after))
    assert not policy.repaired(node(None, after), first)
    assert not policy.repaired(node(ours, None), first)  # no boot known: nothing to tell
    assert policy.why(node(ours, after)) == (
        "meowbot (gpu-0001 booted at 2026-12-07 02:05 UTC, after its drain for xid79 gpu3)"
    )
    assert policy.why(node(ours, None, "b-2")).startswith("meowbot (gpu-0001 booted again,")


def test_a_job_run_again_leaves_the_first_runs_files_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    steps = (StepConfig(name="a", command=("echo", "first"), timeout_s=5),)
    script = tmp_path / "job.sh"
    script.write_text(batch_script(steps, str(out)))
    assert subprocess.run(["bash", str(script)], timeout=30).returncode == 0
    # Requeued after a node failure: the same script again, with other output.
    script.write_text(batch_script((steps[0].model_copy(update={"command": ("true",)}),), str(out)))
    assert subprocess.run(["bash", str(script)], timeout=30).returncode == 3
    assert (out / "a.out").read_text() == "first\n" and (out / "a.rc").read_text() == "0\n"
