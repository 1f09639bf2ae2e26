"""bot/slack_payloads.py: bodies are read as Bolt reads them, and held to what Slack always
sends for their kind."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from bot.slack_payloads import ACKED, BAD_REQUEST, Refusal, check, parse

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"

NO_ID = "block_actions with an action without action_id"
UNTYPED = "view_submission without a view type"
COMMAND = {"command": "/node-health", "user_id": "U1", "text": "gpu-0001", "team_id": "T1"}
PRESS = {"type": "block_actions", "user": {"id": "U1"}, "actions": [{"action_id": "a"}]}
SUBMIT = {
    "type": "view_submission",
    "user": {"id": "U1"},
    "view": {"type": "modal", "callback_id": "c", "id": "V1"},
}
EVENT = {"type": "event_callback", "event": {"type": "app_home_opened", "user": "U1"}}


def form(fields: dict[str, str]) -> bytes:
    return urllib.parse.urlencode(fields).encode()


def payload(body: dict[str, object]) -> bytes:
    return form({"payload": json.dumps(body)})


@pytest.mark.parametrize(
    ("raw", "content_type", "expected"),
    [
        (form(COMMAND), FORM, COMMAND),
        (payload(PRESS), FORM, PRESS),
        (json.dumps(EVENT).encode(), JSON, EVENT),
        # Bolt reads a body starting with "{" as JSON whatever its content type says.
        (json.dumps(EVENT).encode(), FORM, EVENT),
    ],
)
def test_well_formed_bodies_parse_as_bolt_reads_them(
    raw: bytes, content_type: str, expected: dict[str, object]
) -> None:
    parsed = parse(raw, content_type)
    assert parsed == expected
    assert isinstance(parsed, dict) and check(parsed) is None


@pytest.mark.parametrize(
    ("raw", "content_type", "reason"),
    [
        (b"", JSON, "empty body"),
        (b"\xff{", JSON, "body is not UTF-8"),
        (b'{"type": ', JSON, "body is not a JSON object"),
        (b"[]", JSON, "body is not a JSON object"),
        (b"[" * 100_000, JSON, "body is not a JSON object"),
        (b"command=%2Fx&user_id", FORM, "form body does not parse"),
        (b"command=%2Fx&text=%FF", FORM, "form body does not parse"),
        (b"payload=%5B1%5D", FORM, "payload is not a JSON object"),
        (b"payload=nope", FORM, "payload is not a JSON object"),
    ],
)
def test_bodies_that_do_not_parse_are_400(raw: bytes, content_type: str, reason: str) -> None:
    refused = parse(raw, content_type)
    assert isinstance(refused, Refusal)
    assert (refused.status, refused.reason) == (BAD_REQUEST, reason)


def drop(body: dict[str, object], key: str) -> dict[str, object]:
    return {k: v for k, v in body.items() if k != key}


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (drop(COMMAND, "command"), BAD_REQUEST, "slash command without command"),
        ({**COMMAND, "command": "node-health"}, BAD_REQUEST, "slash command without command"),
        (drop(COMMAND, "user_id"), BAD_REQUEST, "slash command without user_id"),
        (drop(PRESS, "actions"), BAD_REQUEST, "block_actions without actions"),
        ({**PRESS, "actions": []}, BAD_REQUEST, "block_actions without actions"),
        (
            {**PRESS, "actions": ["a"]},
            BAD_REQUEST,
            "block_actions with an action without action_id",
        ),
        (drop(PRESS, "user"), BAD_REQUEST, "block_actions without user"),
        (drop(SUBMIT, "view"), BAD_REQUEST, "view_submission without a view type"),
        (
            {**SUBMIT, "view": {"callback_id": "c"}},
            BAD_REQUEST,
            "view_submission without a view type",
        ),
        ({**SUBMIT, "view": {"type": "modal"}}, BAD_REQUEST, "view_submission without callback_id"),
        (drop(SUBMIT, "user"), BAD_REQUEST, "view_submission without user"),
        ({"type": "url_verification"}, BAD_REQUEST, "no challenge"),
        ({"type": 3}, BAD_REQUEST, "type is not a string"),
        ({"text": "hi"}, BAD_REQUEST, "neither an event, an interaction nor a command"),
        # Events are acked: Slack would retry the same bad body, then turn the events off.
        (drop(EVENT, "event"), ACKED, "event_callback without event"),
        ({**EVENT, "event": {"user": "U1"}}, ACKED, "event without type"),
        ({**EVENT, "event": {"type": "app_home_opened"}}, ACKED, "app_home_opened without user"),
    ],
)
def test_payloads_without_what_slack_always_sends_are_refused(
    body: dict[str, object], status: int, reason: str
) -> None:
    refused = check(body)
    assert refused is not None
    assert (refused.status, refused.reason) == (status, reason)


@pytest.mark.parametrize(
    "body",
    [
        {"type": "url_verification", "challenge": "abc"},
        {"type": "app_rate_limited", "minute_rate_limited": 1},
        {"ssl_check": "1", "token": "t"},
        {**EVENT, "event": {"type": "reaction_added", "user": "U1"}},
        {**SUBMIT, "view": {"type": "modal", "callback_id": ""}},
    ],
)
def test_what_bolt_answers_itself_passes(body: dict[str, object]) -> None:
    assert check(body) is None
