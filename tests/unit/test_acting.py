"""Who the request under way is for: read from each kind of Slack body, and scoped to it."""

from __future__ import annotations

import asyncio

from bot.acting import acting_as, acting_user, user_of


def test_each_kind_of_request_names_its_user() -> None:
    assert user_of({"type": "block_actions", "user": {"id": "U1", "username": "ana"}}) == "U1"
    assert user_of({"command": "/node-health", "user_id": "U2"}) == "U2"
    assert user_of({"event": {"type": "app_mention", "user": "U3"}}) == "U3"
    assert user_of({"event": {"type": "reaction_added", "item_user": "U4"}}) == ""
    assert user_of({}) == ""


async def test_each_request_sees_its_own_and_outside_one_nobody() -> None:
    seen: dict[str, str] = {}

    async def request(user: str) -> None:
        with acting_as(user):
            await asyncio.sleep(0.01)  # the other request runs meanwhile
            seen[user] = acting_user()

    await asyncio.gather(request("U1"), request("U2"))
    assert seen == {"U1": "U1", "U2": "U2"} and acting_user() == ""
