"""/node-health and /hw-faults: answered at once, privately, from the triage service;
`/hw-faults why` goes to handlers/precursors.py."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import FaultsService, NodeHealthService
from bot.errors import BackendError
from bot.render.blocks import error as error_message
from bot.render.triage import (
    render_faults,
    render_node,
    render_summary,
    render_unchecked,
    render_unchecked_nodes,
    render_user_error,
)
from bot.render.validation import TestOffer
from bot.slack_message import SlackMessage
from bot.triage import service
from bot.triage.service import NodeReport, Triage, UncheckedNode, UncheckedNodes, UserError
from bot.triage.vocabulary import resolve_names
from handlers import precursors, validation
from handlers.reply import Asker

WHY_WORD = "why"
TEST_WORD = "test"
NO_TESTS = (
    "Nodes are not tested here: set `validation: output_dir:` in the config (a folder the "
    "nodes and meowbot both see) with a Slurm cluster."
)


async def node_health_answer(
    triage: Triage, text: str, *, headings: bool = False, test: TestOffer | None = None
) -> SlackMessage:
    """The answer for a node or a hostlist; buttons redraw it after a drain or a resume.
    `headings`: Confirmed / Suspected / Checked and fine in so many words; `test`:
    where nodes can be tested, a drained node offers "Test and resume"."""
    result = await service.node_health(triage, text)
    if isinstance(result, UserError):
        return render_user_error(result)
    if isinstance(result, NodeReport):
        return render_node(
            result,
            dashboard_url=triage.config.dashboard_url,
            headings=headings,
            test=test,
        )
    if isinstance(result, UncheckedNode):
        return render_unchecked(result, test=test)
    if isinstance(result, UncheckedNodes):
        return render_unchecked_nodes(result)
    return render_summary(result)


async def node_health(
    service: NodeHealthService, client: AsyncWebClient, text: str, asker: Asker
) -> None:
    words = text.split()
    if len(words) == 2 and words[1].lower() == TEST_WORD:
        if service.validation is None:
            await asker.private(error_message(NO_TESTS))
            return
        try:
            await service.triage.inventory.load()
        except BackendError as exc:
            await asker.private(error_message(f"I could not list the nodes: {exc.user_text()}"))
            return
        node = resolve_names([words[0]], service.triage.known())[0]
        await validation.start(
            service.validation,
            client,
            node,
            user_id=asker.user_id,
            channel=asker.channel,
            private=asker.private,
            thread_ts=asker.thread_ts,
        )
        return
    offer = service.validation.offer if service.validation is not None else None
    answer = await node_health_answer(service.triage, text, headings=asker.headings, test=offer)
    await asker.private(answer)


async def hw_faults(faults: FaultsService, client: AsyncWebClient, text: str, asker: Asker) -> None:
    words = text.split(maxsplit=1)
    if words and words[0].lower() == WHY_WORD:
        # What preceded the faults: a long-running answer of its own (handlers/precursors.py).
        await precursors.command(faults, client, words[1] if len(words) > 1 else "", asker)
        return
    result = await service.hw_faults(faults.triage, text, faults.precursors)
    if isinstance(result, UserError):
        await asker.private(render_user_error(result))
        return
    await asker.private(render_faults(result))
