"""`SlackMessage`: one message as it leaves for Slack, plain data with no I/O.

Renderers build it (bot/render/blocks.py keeps it within Slack's limits), the core's ports
take it (`bot/alerts/ports.py: Poster`, `bot/highlights/ports.py: DigestPoster`), the adapters
post it, and `handlers/reply.py` sends it. It lives here, beside bot/models.py, so none of
them needs the renderer to name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.mrkdwn import truncate

__all__ = ["Block", "SlackMessage"]

Block = dict[str, Any]
"""One Block Kit block (or element), as the Web API takes it."""


@dataclass(frozen=True)
class SlackMessage:
    """One message ready for `chat.postMessage` / `chat.update` / `respond`.

    `overflow` holds the blocks that did not fit, in chunks that are each a valid message:
    post them as thread replies (see `replies`).
    """

    text: str
    blocks: list[Block]
    overflow: list[list[Block]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Keyword arguments for the Web API: `client.chat_postMessage(**msg.to_dict(), ...)`."""
        return {"text": self.text, "blocks": self.blocks}

    def replies(self) -> list[SlackMessage]:
        """The overflow as messages of their own, each with a fallback text."""
        count = len(self.overflow)
        head = truncate(self.text, 200)
        return [
            SlackMessage(text=f"{head} (continued {index}/{count})", blocks=chunk)
            for index, chunk in enumerate(self.overflow, start=1)
        ]
