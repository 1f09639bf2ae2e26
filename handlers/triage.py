"""/node-health and /hw-faults: answered at once, privately, from the triage service;
`/hw-faults why` goes to handlers/precursors.py."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.deps import FaultsService
from bot.render.triage import (
    render_faults,
    render_node,
    render_summary,
    render_unchecked,
    render_unchecked_nodes,
    render_user_error,
)
from bot.slack_message import SlackMessage
from bot.triage import service
from bot.triage.service import NodeReport, Triage, UncheckedNode, UncheckedNodes, UserError
from handlers import precursors
from handlers.reply import Asker

WHY_WORD = "why"


async def node_health_answer(triage: Triage, text: str, *, headings: bool = False) -> SlackMessage:
    """The answer for a node or a hostlist; buttons redraw it after a drain or a resume.
    `headings`: Confirmed / Suspected / Checked and fine in so many words."""
    result = await service.node_health(triage, text)
    if isinstance(result, UserError):
        return render_user_error(result)
    if isinstance(result, NodeReport):
        return render_node(result, dashboard_url=triage.config.dashboard_url, headings=headings)
    if isinstance(result, UncheckedNode):
        return render_unchecked(result)
    if isinstance(result, UncheckedNodes):
        return render_unchecked_nodes(result)
    return render_summary(result)


async def node_health(triage: Triage, client: AsyncWebClient, text: str, asker: Asker) -> None:
    await asker.private(await node_health_answer(triage, text, headings=asker.headings))


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
