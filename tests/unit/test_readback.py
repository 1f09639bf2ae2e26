"""What a node read back after a drain or a resume means (bot/triage/readback.py): the words
follow the scheduler's state, never the request."""

from __future__ import annotations

from bot.ports import SchedulerNode
from bot.triage import readback as rb

OURS = "meowbot: xid79 gpu3 by @ana"


def node(
    state: str = "idle", *flags: str, reason: str | None = None, **kw: object
) -> SchedulerNode:
    return SchedulerNode(name="n1", state=state, flags=flags, reason=reason, **kw)  # type: ignore[arg-type]


def test_a_resume_read_back_in_service_is_resumed() -> None:
    r = rb.after_resume(node("idle", "DRAIN", reason=OURS), node("idle"), "Slurm")
    assert (r.ok, r.changed) == (True, True)
    assert rb.resume_sentence("n1", {"Slurm": r}, "ana") == "Resumed `n1` in Slurm (by @ana)."


def test_an_operators_cordon_left_in_place_is_said_with_whose_it_is() -> None:
    before = node("idle", "DRAIN", reason="cordoned", others_cordon=True)
    r = rb.after_resume(before, before, "Kubernetes")
    assert (r.ok, r.changed) == (False, False)
    said = rb.resume_sentence("n1", {"Kubernetes": r}, "ana")
    assert said.startswith("Nothing changed: `n1` is not back in service in Kubernetes")
    assert "stays cordoned: cordoned by someone else, not meowbot" in said
    assert "Resumed" not in said


def test_a_notready_node_stays_notready_after_a_resume() -> None:
    before = node("down", reason=None)
    r = rb.after_resume(before, before, "Kubernetes")
    said = rb.resume_sentence("n1", {"Kubernetes": r}, "ana")
    assert not r.ok and not r.changed
    assert (
        "still NotReady: Kubernetes schedules nothing there until its kubelet reports Ready" in said
    )


def test_meowbots_taint_taken_back_but_an_operators_taint_stays() -> None:
    taint = "nvsentinel=gpu:NoSchedule"
    before = node("idle", "DRAIN", reason=OURS, others_taints=(taint,))
    after = node("idle", reason=f"taints: {taint}", others_taints=(taint,))
    r = rb.after_resume(before, after, "Kubernetes")
    said = rb.resume_sentence("n1", {"Kubernetes": r}, "ana")
    assert r.changed and not r.ok
    assert said.startswith("Changed what I could, but `n1` is not back in service")
    assert f"stays tainted by someone else, not meowbot ({taint})" in said


def test_each_scheduler_of_two_is_named() -> None:
    s = rb.after_resume(node("idle", "DRAIN", reason=OURS), node("idle"), "Slurm")
    cordon = node("idle", "DRAIN", reason="cordoned", others_cordon=True)
    k = rb.after_resume(cordon, cordon, "Kubernetes")
    said = rb.resume_sentence("n1", {"Slurm": s, "Kubernetes": k}, "ana")
    assert said == (
        "`n1` is not back in service (resume by @ana). Slurm: resumed; Kubernetes: nothing "
        "changed, stays cordoned: cordoned by someone else, not meowbot."
    )


def test_a_slurm_drain_by_someone_else_names_them() -> None:
    held = node("idle", "DRAIN", reason="disk swap", reason_set_by="root")
    assert rb.remains(held, "Slurm") == ["stays drained (disk swap): set by root, not meowbot"]


def test_a_drain_read_back_says_draining_or_drained_as_the_state_is() -> None:
    busy = rb.after_drain(
        node("allocated"), node("allocated", "DRAIN", reason=OURS), "Slurm", now=False
    )
    idle = rb.after_drain(node("idle"), node("idle", "DRAIN", reason=OURS), "Slurm", now=False)
    down = rb.after_drain(node("idle"), node("down", reason=OURS), "Slurm", now=True)
    assert busy.sentence == "draining (allocated+DRAIN)" and busy.ok
    assert idle.sentence == "drained (idle+DRAIN)" and idle.ok
    assert down.sentence == "set down (down)" and down.ok
    said = rb.drain_sentence("n1", {"Slurm": busy}, OURS, now=False)
    assert said.startswith(f"Draining `n1` in Slurm with reason `{OURS}`")
    assert said.endswith("Read back: Slurm: draining (allocated+DRAIN).")


def test_a_drain_that_did_not_take_says_so() -> None:
    r = rb.after_drain(node("idle"), node("idle"), "Slurm", now=False)
    assert (r.ok, r.changed) == (False, False)
    said = rb.drain_sentence("n1", {"Slurm": r}, OURS, now=False)
    assert said.startswith("I asked Slurm to drain `n1`, but it is not out of service")


def test_a_drain_of_a_notready_node_keeps_saying_notready() -> None:
    r = rb.after_drain(node("down"), node("down", "DRAIN", reason=OURS), "Kubernetes", now=False)
    assert r.ok and "still NotReady" in r.sentence


def test_a_slurm_node_meowbot_drained_then_set_down_is_meowbots_alone() -> None:
    down = node("down", "DRAIN", reason=OURS)
    assert rb.remains(down, "Slurm") == [f"set down by meowbot ({OURS})"]
    r = rb.after_drain(node("idle", "DRAIN", reason=OURS), down, "Slurm", now=True)
    assert r.sentence == "set down (down+DRAIN)"


def test_a_slurm_node_just_resumed_is_settling_until_its_daemon_answers() -> None:
    assert rb.settling(node("idle", "NOT_RESPONDING"), "Slurm")
    assert not rb.settling(node("down", "NOT_RESPONDING"), "Slurm")
    assert not rb.settling(node("down", "NOT_RESPONDING"), "Kubernetes")


def test_a_drain_a_scheduler_refused_in_part_says_what_it_said_and_what_reads_back() -> None:
    r = rb.after_drain(node("idle"), node("idle", "DRAIN", reason=OURS), "Kubernetes", now=True)
    said = rb.drain_sentence(
        "n1", {"Kubernetes": r}, OURS, now=True, trouble="1 of its GPU pods would not go."
    )
    assert said == (
        "I asked Kubernetes to drain `n1`: 1 of its GPU pods would not go. Read back: "
        "Kubernetes: cordoned (idle+DRAIN)."
    )
