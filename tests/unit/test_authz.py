"""What a refused person reads: who may act, as mentions, never the setting's name."""

from __future__ import annotations

from bot.authz import Authorizer
from bot.mrkdwn import WORD_JOINER


def test_a_refusal_names_the_admins_to_ask() -> None:
    one = Authorizer(("U0ADMIN",)).refusal("drain nodes")
    assert one == (
        ":no_entry: Only the cluster admins may drain nodes (ask <@U0ADMIN>); nothing was changed."
    )
    # People first, then groups as Slack shows them (`<!subteam^…>` reads as the @handle), then
    # handles as written (escaped: an ephemeral refusal must not ping a whole group).
    mixed = Authorizer(("U2", "U1", "S0OPS", "@gpu-oncall")).refusal("resume nodes")
    assert f"(ask <@U1>, <@U2>, <!subteam^S0OPS> or @{WORD_JOINER}gpu-oncall); nothing" in mixed
    assert "MEOWBOT_ADMINS" not in mixed


def test_many_admins_are_cut_to_a_few_and_none_says_nobody_may() -> None:
    many = Authorizer(tuple(f"U{i:02d}" for i in range(8))).refusal("silence alerts")
    assert "<@U04>" in many and "<@U05>" not in many and "or one of 3 more)" in many
    nobody = Authorizer(()).refusal("drain nodes")
    assert nobody.startswith(":no_entry: Nobody may drain nodes from Slack here yet")
    assert "MEOWBOT_ADMINS" not in nobody and "Nothing was changed." in nobody
    # Plain text (a form's field error) shows no raw mention markup.
    plain = Authorizer(("U0ADMIN",)).refusal("silence alerts", plain=True)
    assert plain == "Only the cluster admins may silence alerts; nothing was changed."
