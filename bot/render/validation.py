"""A node's validation in Slack: one message that shows each step as it goes, the verdict,
and the node as the scheduler holds it at the end (read back, never assumed)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.mrkdwn import code
from bot.ports import SchedulerNode
from bot.render.blocks import Block, Message, button, confirm_dialog
from bot.slack_message import SlackMessage
from bot.validation.run import StepState
from bot.validation.service import Validation

TEST_ACTION = "meowbot_test_node"
CANCEL_TEST_ACTION = "meowbot_cancel_node_test"

ICON = {
    StepState.QUEUED: ":white_circle:",
    StepState.RUNNING: ":hourglass_flowing_sand:",
    StepState.PASSED: ":white_check_mark:",
    StepState.FAILED: ":x:",
}


@dataclass(frozen=True)
class TestOffer:
    """Where nodes can be tested: how long the suite takes at most, and whether a repaired
    node is tested anyway (`validation.on_repair`), so the button reads "Repaired"."""

    minutes: int
    repaired: bool = False

    def button(self, node: str) -> Block:
        """ "Test and resume": confirmed first, since it holds the node and runs jobs on it."""
        dialog = confirm_dialog(
            f"Test {node}?",
            f"meowbot holds {code(node)} for itself, runs the validation suite there (at most "
            f"about {self.minutes} min) and resumes it only if every step passes; otherwise it "
            "stays drained with the failing step as its reason.",
            confirm="Test",
        )
        label = "Repaired: test and resume" if self.repaired else "Test and resume"
        return button(label, TEST_ACTION, node, confirm=dialog)


def _state(node: SchedulerNode | None) -> str:
    if node is None:
        return "unknown (it could not be read back)"
    flags = f" ({', '.join(f.lower() for f in node.flags)})" if node.flags else ""
    reason = f", reason {code(node.reason)}" if node.reason else ""
    return f"{node.state}{flags}{reason}"


def _headline(run: Validation, by: str) -> str:
    node = code(run.node)
    if not run.ended:
        return f":stethoscope: Testing {node} before it goes back into service (asked by {by})"
    after = run.after
    if run.error is not None:
        return f":warning: Testing {node} stopped: {run.error}"
    back = after is not None and not after.out_of_service  # as the scheduler holds it now
    if run.cancelled_by is not None:
        still = ", but it is in service" if back else "; it stays out of service"
        return f":no_entry: Testing {node} was cancelled by @{run.cancelled_by}{still}"
    if run.passed and back:
        return f":white_check_mark: {node} passed every step and is back in service"
    if run.passed:
        return f":warning: {node} passed every step, but it is not back in service"
    if back:
        return f":warning: {node} failed validation, but it is in service"
    return f":x: {node} failed validation and stays out of service"


def render_run(run: Validation, *, by: str, scheduler: str) -> SlackMessage:
    """The run's message; `by` is who asked, as Slack shows them (`<@U123>`)."""
    headline = _headline(run, by)
    msg = Message(headline).section(headline)
    msg.section("\n".join(f"{ICON[o.state]} {o.line}" for o in run.steps))
    if run.ended:
        msg.section(f"{scheduler} now says: {code(run.node)} is {_state(run.after)}.")
    if run.offender is not None:
        rma = (
            f":black_circle: Repeat offender: {run.offender}. Its verdict is now RMA: take "
            "it out of scheduling and open an RMA."
        )
        msg.section(rma)
    context = [f"{scheduler} job {run.job_id}"] if run.job_id else []
    if run.ended and not run.passed and run.error is None and run.offender is None:
        context.append("Resume it by hand once it is repaired, or test it again")
    if context:
        msg.context(" · ".join(context))
    if not run.ended:
        msg.actions(
            button(
                "Cancel test",
                CANCEL_TEST_ACTION,
                run.run_id,
                style="danger",
                confirm=confirm_dialog(
                    f"Cancel the test of {run.node}?",
                    "The job is cancelled and the node stays drained.",
                    confirm="Cancel test",
                    deny="Keep testing",
                    style="danger",
                ),
            )
        )
    return msg.build()


def offer_test(node: str, offer: TestOffer) -> SlackMessage:
    """In an alert's thread after a drain: the way back for the node once it is repaired."""
    text = (
        f"When {code(node)} is repaired, test it before it goes back into service: the "
        "validation suite runs there through the scheduler, and it resumes only if every "
        "step passes."
    )
    return Message(text).section(text).actions(offer.button(node)).build()
