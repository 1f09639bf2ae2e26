"""The Slack emulator, driven by slack_sdk's real clients (and Bolt for one Socket Mode flow)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.shell.emulator import SlackEmulator, validate_blocks
from tests.waiting import eventually


@pytest.fixture
async def emu() -> AsyncIterator[SlackEmulator]:
    emulator = SlackEmulator()
    await emulator.start()
    try:
        yield emulator
    finally:
        await emulator.stop()


@pytest.fixture
def client(emu: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=emu.bot_token, base_url=emu.api_url)


def section(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **extra}


def button(action_id: str, label: str = "Go", **extra: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        **extra,
    }


async def api_error(call: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as info:
        await call
    return dict(info.value.response.data)


# --- auth and basics ------------------------------------------------------------------------


async def test_auth_test_and_token_errors(emu: SlackEmulator, client: AsyncWebClient) -> None:
    me = await client.auth_test()
    assert (me["user_id"], me["bot_id"], me["team_id"]) == ("UBOT", "BBOT", "T0TEST")

    bad = AsyncWebClient(token="xoxb-wrong", base_url=emu.api_url)
    assert (await api_error(bad.auth_test()))["error"] == "invalid_auth"
    app_token = AsyncWebClient(token=emu.app_token, base_url=emu.api_url)
    err = await api_error(app_token.chat_postMessage(channel="C0GENERAL", text="x"))
    assert err["error"] == "not_allowed_token_type"
    async with aiohttp.ClientSession() as http:
        async with http.post(emu.api_url + "auth.test") as res:
            assert (await res.json())["error"] == "not_authed"
        async with http.post(emu.api_url + "no.such", data={"token": emu.bot_token}) as res:
            assert (await res.json()) == {"ok": False, "error": "unknown_method"}
    assert [c.ok for c in emu.calls] == [True, False, False, False, False]


async def test_form_encoded_args_and_token_field_are_decoded(emu: SlackEmulator) -> None:
    blocks = [section("*hello*")]
    async with aiohttp.ClientSession() as http:
        form = {"token": emu.bot_token, "channel": "C0GENERAL", "blocks": json.dumps(blocks)}
        async with http.post(emu.api_url + "chat.postMessage", data=form) as res:
            body = await res.json()
        assert body["ok"], body
        url = emu.api_url + "conversations.history"
        async with http.get(url, params={"channel": "C0GENERAL", "limit": "5"}) as res:
            assert (await res.json())["error"] == "not_authed"  # query-string tokens don't count
    call = emu.calls_to("chat.postMessage")[0]
    assert call.args == {"channel": "C0GENERAL", "blocks": blocks}
    assert "token" not in call.args


# --- chat -----------------------------------------------------------------------------------


async def test_post_update_ephemeral_delete(emu: SlackEmulator, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(
        channel="#general",
        text="fallback",
        blocks=[section("node *gpu001* is sick"), {"type": "actions", "elements": [button("a")]}],
    )
    assert posted["channel"] == "C0GENERAL"
    ts = posted["ts"]
    stored = emu.messages("C0GENERAL")[-1]
    assert stored["ts"] == ts and stored["user"] == "UBOT" and stored["bot_id"] == "BBOT"
    assert all(b["block_id"] for b in stored["blocks"])  # Slack fills in block ids

    updated = await client.chat_update(channel="C0GENERAL", ts=ts, text="drained")
    assert updated["ts"] == ts
    stored = emu.message("C0GENERAL", ts)
    assert stored["text"] == "drained" and "edited" in stored
    assert len(stored["blocks"]) == 2  # blocks not passed to chat.update are kept

    eph = await client.chat_postEphemeral(channel="C0GENERAL", user="U0USER", text="only you")
    assert eph["message_ts"]
    assert emu.ephemerals[-1]["user"] == "U0USER"
    assert emu.ephemerals[-1]["text"] == "only you"
    err = await api_error(client.chat_postEphemeral(channel="C0GENERAL", user="U0NOPE", text="x"))
    assert err["error"] == "user_not_found"

    err = await api_error(client.chat_update(channel="C0GENERAL", ts="1.000000", text="x"))
    assert err["error"] == "message_not_found"
    emu.add_message("C0GENERAL", ts="1733150000.000100", text="mine", user="U0USER")
    err = await api_error(client.chat_update(channel="C0GENERAL", ts="1733150000.000100", text="x"))
    assert err["error"] == "cant_update_message"

    link = await client.chat_getPermalink(channel="C0GENERAL", message_ts=ts)
    assert link["permalink"].endswith(f"/archives/C0GENERAL/p{ts.replace('.', '')}")
    await client.chat_delete(channel="C0GENERAL", ts=ts)
    assert ts not in [m["ts"] for m in emu.messages("C0GENERAL")]


async def test_message_ts_strictly_increasing(client: AsyncWebClient) -> None:
    stamps = [
        (await client.chat_postMessage(channel="C0GENERAL", text=str(i)))["ts"] for i in range(5)
    ]
    assert all(isinstance(t, str) and len(t.split(".")[1]) == 6 for t in stamps)
    assert [float(t) for t in stamps] == sorted({float(t) for t in stamps})


async def test_channel_errors(emu: SlackEmulator, client: AsyncWebClient) -> None:
    emu.add_channel("C0OLD", "old", is_archived=True)
    emu.add_channel("C0OUT", "outside", is_member=False)
    emu.add_channel("G0SECRET", "secret", is_private=True, is_member=False)
    cases = {"C0NOPE": "channel_not_found", "C0OLD": "is_archived", "C0OUT": "not_in_channel"}
    cases["G0SECRET"] = "channel_not_found"  # private channels the bot is not in are invisible
    for channel, error in cases.items():
        err = await api_error(client.chat_postMessage(channel=channel, text="x"))
        assert err["error"] == error, channel
    err = await api_error(client.conversations_history(channel="C0OUT"))
    assert err["error"] == "not_in_channel"
    with pytest.warns(UserWarning, match="top-level `text`"):
        assert (await api_error(client.chat_postMessage(channel="C0GENERAL")))["error"] == "no_text"
    err = await api_error(client.chat_postMessage(channel="C0GENERAL", text="x" * 40_001))
    assert err["error"] == "msg_too_long"


async def test_posting_to_a_user_id_opens_the_app_dm(
    emu: SlackEmulator, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(channel="U0USER", text="psst")
    assert posted["channel"].startswith("D")
    assert emu.messages(posted["channel"])[0]["text"] == "psst"


# --- Block Kit ------------------------------------------------------------------------------


async def test_invalid_blocks_too_many_and_too_long(client: AsyncWebClient) -> None:
    err = await api_error(
        client.chat_postMessage(channel="C0GENERAL", text="x", blocks=[section("b")] * 51)
    )
    assert err["error"] == "invalid_blocks"
    assert err["errors"] == ["no more than 50 items allowed [json-pointer:/blocks]"]
    assert err["response_metadata"]["messages"] == [f"[ERROR] {err['errors'][0]}"]

    err = await api_error(
        client.chat_postMessage(channel="C0GENERAL", text="x", blocks=[section("a" * 3001)])
    )
    assert err["error"] == "invalid_blocks"
    assert err["errors"] == ["must be less than 3001 characters [json-pointer:/blocks/0/text/text]"]
    ok = await client.chat_postMessage(channel="C0GENERAL", text="x", blocks=[section("a" * 3000)])
    assert ok["ok"]


async def test_block_kit_rules(emu: SlackEmulator, client: AsyncWebClient) -> None:
    def errors(blocks: Any) -> list[str]:
        return validate_blocks(blocks)

    assert errors([{"type": "sectoin"}]) == [
        "unsupported block type: sectoin [json-pointer:/blocks/0/type]"
    ]
    assert errors([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}])
    assert errors([{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}])
    assert errors([section("")]) == [
        "must be more than 0 characters [json-pointer:/blocks/0/text/text]"
    ]
    assert errors([{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}])
    assert errors([{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}])
    assert errors([{"type": "actions", "elements": [button(f"b{i}") for i in range(26)]}])
    assert errors([{"type": "actions", "elements": [button("same"), button("same")]}])
    assert errors([{"type": "actions", "elements": [button("b", label="x" * 76)]}])
    assert errors([{"type": "actions", "elements": [button("b", value="v" * 2001)]}])
    assert errors([{"type": "actions", "elements": [button("b", disabled=True)]}]) == [
        "invalid additional property: disabled [json-pointer:/blocks/0/elements/0]"
    ]
    options = [
        {"text": {"type": "plain_text", "text": str(i)}, "value": str(i)} for i in range(101)
    ]
    select = {"type": "static_select", "action_id": "s", "options": options}
    assert errors([{"type": "actions", "elements": [select]}])
    assert errors([section("a", block_id="x"), section("b", block_id="x")])
    assert errors([section("a", block_id="x" * 256)])
    assert errors([{"type": "section", "text": {"type": "markdown", "text": "a"}}])
    # the same action_id in two different blocks is fine (Slack scopes it to the block)
    two = [{"type": "actions", "elements": [button("drain")]} for _ in range(2)]
    assert errors(two) == []
    # total text in blocks above 12,000 characters
    long = [section("a" * 3000) for _ in range(5)]
    err = await api_error(client.chat_postMessage(channel="C0GENERAL", text="x", blocks=long))
    assert err["error"] == "msg_blocks_too_long"


# --- rate limits and failures ---------------------------------------------------------------


async def test_ratelimited_call_is_retried_after_retry_after(emu: SlackEmulator) -> None:
    client = AsyncWebClient(
        token=emu.bot_token,
        base_url=emu.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    emu.fail_next("chat.postMessage", status=429, retry_after=1)
    posted = await client.chat_postMessage(channel="C0GENERAL", text="eventually")
    assert posted["ok"]
    first, second = emu.calls_to("chat.postMessage")
    assert (first.ok, first.status, first.error) == (False, 429, "ratelimited")
    assert second.ok
    assert second.at - first.at >= 1.0
    assert len(emu.messages("C0GENERAL")) == 1


async def test_fail_next_other_shapes(emu: SlackEmulator, client: AsyncWebClient) -> None:
    emu.fail_next("chat.postMessage", status=429, retry_after=7)
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel="C0GENERAL", text="x")
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] == "7"
    assert info.value.response["error"] == "ratelimited"

    emu.fail_next("users.info", status=200, error="fatal_error", count=2)
    for _ in range(2):
        assert (await api_error(client.users_info(user="U0USER")))["error"] == "fatal_error"
    assert (await client.users_info(user="U0USER"))["ok"]
    emu.fail_next("auth.test", status=500)
    with pytest.raises(SlackApiError) as info:
        await client.auth_test()
    assert info.value.response.status_code == 500


# --- history --------------------------------------------------------------------------------


async def test_history_pagination_bounds_and_threads(
    emu: SlackEmulator, client: AsyncWebClient
) -> None:
    stamps = [f"17331500{i:02d}.000100" for i in range(1, 8)]
    for i, ts in enumerate(stamps):
        emu.add_message("C0GENERAL", ts=ts, text=f"m{i}", user="U0USER")
    emu.add_message(
        "C0GENERAL", ts="1733150002.000200", text="reply", user="U0ADMIN", thread_ts=stamps[0]
    )

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await client.conversations_history(channel="C0GENERAL", limit=3, cursor=cursor)
        pages += 1
        seen += [m["ts"] for m in page["messages"]]
        if not page["has_more"]:
            assert "response_metadata" not in page
            break
        cursor = page["response_metadata"]["next_cursor"]
        assert cursor
    assert pages == 3
    assert seen == list(reversed(stamps))  # newest first, thread replies excluded

    bounded = await client.conversations_history(
        channel="C0GENERAL", oldest=stamps[1], latest=stamps[4]
    )
    assert [m["ts"] for m in bounded["messages"]] == [stamps[3], stamps[2]]
    inclusive = await client.conversations_history(
        channel="C0GENERAL", oldest=stamps[1], latest=stamps[4], inclusive=True
    )
    assert len(inclusive["messages"]) == 4

    everything = await client.conversations_history(channel="C0GENERAL")
    parent = next(m for m in everything["messages"] if m["ts"] == stamps[0])
    assert parent["reply_count"] == 1 and parent["reply_users"] == ["U0ADMIN"]
    thread = await client.conversations_replies(channel="C0GENERAL", ts=stamps[0])
    assert [m["text"] for m in thread["messages"]] == ["m0", "reply"]
    err = await api_error(client.conversations_replies(channel="C0GENERAL", ts="1.000000"))
    assert err["error"] == "thread_not_found"
    err = await api_error(client.conversations_history(channel="C0GENERAL", cursor="garbage"))
    assert err["error"] == "invalid_cursor"


async def test_thread_replies_and_bad_thread_ts(emu: SlackEmulator, client: AsyncWebClient) -> None:
    parent = await client.chat_postMessage(channel="C0GENERAL", text="alert")
    await client.chat_postMessage(channel="C0GENERAL", text="details", thread_ts=parent["ts"])
    history = await client.conversations_history(channel="C0GENERAL")
    assert [m["text"] for m in history["messages"]] == ["alert"]
    assert history["messages"][0]["reply_count"] == 1
    err = await api_error(
        client.chat_postMessage(channel="C0GENERAL", text="x", thread_ts="1733150000.999999")
    )
    assert err["error"] == "thread_not_found"


# --- conversations, users, groups, reactions ------------------------------------------------


async def test_lookups(emu: SlackEmulator, client: AsyncWebClient) -> None:
    emu.add_usergroup("S0ONCALL", "oncall", ["U0ADMIN"])
    emu.add_channel("G0OPS", "ops", is_private=True)
    info = await client.conversations_info(channel="C0GENERAL")
    assert info["channel"]["name"] == "general" and info["channel"]["is_member"]
    listed = await client.conversations_list(types="public_channel,private_channel")
    assert {c["id"] for c in listed["channels"]} == {"C0GENERAL", "G0OPS"}
    user = await client.users_info(user="U0ADMIN")
    assert user["user"]["name"] == "ana" and user["user"]["profile"]["email"] == "ana@example.org"
    assert (await api_error(client.users_info(user="U0NOPE")))["error"] == "user_not_found"
    group = await client.usergroups_users_list(usergroup="S0ONCALL")
    assert group["users"] == ["U0ADMIN"]
    err = await api_error(client.usergroups_users_list(usergroup="S0NOPE"))
    assert err["error"] == "no_such_subteam"

    emu.add_message(
        "C0GENERAL",
        ts="1733150000.000100",
        text="nice",
        user="U0USER",
        reactions=[{"name": "meow_party", "users": ["U0ADMIN", "U0USER"]}],
    )
    got = await client.reactions_get(channel="C0GENERAL", timestamp="1733150000.000100")
    assert got["message"]["reactions"] == [
        {"name": "meow_party", "users": ["U0ADMIN", "U0USER"], "count": 2}
    ]


# --- views ----------------------------------------------------------------------------------


async def test_views(emu: SlackEmulator, client: AsyncWebClient) -> None:
    modal = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Drain node"},
        "submit": {"type": "plain_text", "text": "Drain"},
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {"type": "plain_text_input", "action_id": "reason"},
            }
        ],
    }
    opened = await client.views_open(trigger_id=emu.new_trigger_id(), view=modal)
    view = opened["view"]
    assert view["id"].startswith("V") and view["hash"]

    assert (await api_error(client.views_open(trigger_id="", view=modal)))["error"] == (
        "invalid_trigger_id"
    )
    trigger = emu.new_trigger_id()
    await client.views_open(trigger_id=trigger, view=modal)
    err = await api_error(client.views_open(trigger_id=trigger, view=modal))
    assert err["error"] == "exchanged_trigger_id"

    long_title = {**modal, "title": {"type": "plain_text", "text": "x" * 25}}
    err = await api_error(client.views_open(trigger_id=emu.new_trigger_id(), view=long_title))
    assert err["error"] == "invalid_arguments"
    assert err["response_metadata"]["messages"] == [
        "[ERROR] must be less than 25 characters [json-pointer:/view/title/text]"
    ]
    no_submit = {k: v for k, v in modal.items() if k != "submit"}
    err = await api_error(client.views_open(trigger_id=emu.new_trigger_id(), view=no_submit))
    assert err["error"] == "invalid_arguments"

    updated = await client.views_update(view_id=view["id"], hash=view["hash"], view=modal)
    assert updated["view"]["id"] == view["id"] and updated["view"]["hash"] != view["hash"]
    err = await api_error(client.views_update(view_id=view["id"], hash=view["hash"], view=modal))
    assert err["error"] == "hash_conflict"

    home = {"type": "home", "blocks": [section("hi ana")]}
    published = await client.views_publish(user_id="U0ADMIN", view=home)
    assert emu.home_views["U0ADMIN"]["id"] == published["view"]["id"]
    err = await api_error(client.views_publish(user_id="U0ADMIN", view=modal))
    assert err["error"] == "invalid_arguments"


# --- files ----------------------------------------------------------------------------------


async def test_files_upload_v2_end_to_end(emu: SlackEmulator, client: AsyncWebClient) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    result = await client.files_upload_v2(
        channel="C0GENERAL",
        file=png,
        filename="gpu001.png",
        title="GPU temps",
        initial_comment="temps for gpu001",
    )
    file_id = result["file"]["id"]
    assert emu.uploads[file_id] == png
    assert emu.files[file_id]["size"] == len(png)
    assert emu.files[file_id]["mimetype"] == "image/png"
    shared = emu.messages("C0GENERAL")[-1]
    assert shared["text"] == "temps for gpu001" and shared["files"][0]["id"] == file_id
    assert [c.method for c in emu.calls] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]
    err = await api_error(client.files_completeUploadExternal(files=[{"id": "F0NOPE"}]))
    assert err["error"] == "file_not_found"


# --- response_url ---------------------------------------------------------------------------


async def test_response_url_recording(emu: SlackEmulator, client: AsyncWebClient) -> None:
    url = emu.new_response_url()
    assert url.startswith(emu.base_url)
    hook = AsyncWebhookClient(url)
    res = await hook.send(text="working on it", response_type="ephemeral")
    assert (res.status_code, res.body) == (200, "ok")
    res = await hook.send(text="x", blocks=[section("a" * 3001)])
    assert (res.status_code, res.body) == (400, "invalid_blocks")
    assert emu.responses == [(url, {"text": "working on it", "response_type": "ephemeral"})]
    assert emu.rejected_responses[0][2] == "invalid_blocks"
    unknown = AsyncWebhookClient(emu.base_url + "/commands/T0TEST/1/nope")
    assert (await unknown.send(text="x")).status_code == 404

    posted = await client.chat_postMessage(
        channel="C0GENERAL", text="alert", blocks=[section("hot")]
    )
    bound = AsyncWebhookClient(emu.new_response_url(channel="C0GENERAL", message_ts=posted["ts"]))
    await bound.send(text="acknowledged", replace_original=True)
    assert emu.message("C0GENERAL", posted["ts"])["text"] == "acknowledged"
    assert "blocks" not in emu.message("C0GENERAL", posted["ts"])


# --- Socket Mode ----------------------------------------------------------------------------


async def test_socket_mode_round_trip(emu: SlackEmulator, client: AsyncWebClient) -> None:
    received: list[SocketModeRequest] = []

    async def listener(sm: Any, req: SocketModeRequest) -> None:
        received.append(req)
        await sm.send_socket_mode_response(
            SocketModeResponse(envelope_id=req.envelope_id, payload={"text": "on it"})
        )

    sm = SocketModeClient(app_token=emu.app_token, web_client=client, auto_reconnect_enabled=False)
    sm.socket_mode_request_listeners.append(listener)
    try:
        await sm.connect()
        await asyncio.wait_for(emu.socket_connected.wait(), 2)
        payload = emu.slash_command_payload("/node-health", "gpu001")
        ack = await emu.socket_send("slash_commands", payload, timeout=3)
        assert ack["payload"] == {"text": "on it"}
        assert ack["envelope_id"] == emu.socket_envelopes[-1]["envelope_id"]
        assert received[0].type == "slash_commands"
        assert received[0].payload["command"] == "/node-health"
        assert received[0].accepts_response_payload is True
        assert emu.socket_acks[-1].latency < 3
    finally:
        await sm.close()
    assert emu.calls_to("apps.connections.open")[0].ok


async def test_socket_send_without_ack_times_out(
    emu: SlackEmulator, client: AsyncWebClient
) -> None:
    sm = SocketModeClient(app_token=emu.app_token, web_client=client, auto_reconnect_enabled=False)
    try:
        await sm.connect()
        with pytest.raises(TimeoutError):
            await emu.socket_send(
                "events_api", emu.event_payload({"type": "app_mention"}), timeout=0.3
            )
    finally:
        await sm.close()


async def test_bolt_app_over_socket_mode(emu: SlackEmulator, client: AsyncWebClient) -> None:
    from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
    from slack_bolt.async_app import AsyncApp

    app = AsyncApp(client=client)

    @app.command("/node-health")
    async def node_health(ack: Any, respond: Any, say: Any, command: dict[str, Any]) -> None:
        await ack("checking " + command["text"])
        await respond("gpu001 is healthy")
        await say("someone asked about gpu001")

    @app.action("drain")
    async def drain(ack: Any, body: dict[str, Any], respond: Any) -> None:
        await ack()
        await respond(text=f"draining ({body['actions'][0]['value']})", replace_original=True)

    handler = AsyncSocketModeHandler(app, emu.app_token)
    try:
        await handler.connect_async()
        ack = await emu.socket_send(
            "slash_commands", emu.slash_command_payload("/node-health", "gpu001")
        )
        assert ack["payload"] == {"text": "checking gpu001"}
        await emu.wait_for_responses(1)
        await emu.wait_for_call("chat.postMessage")
        assert emu.responses[0][1]["text"] == "gpu001 is healthy"

        posted = await client.chat_postMessage(
            channel="C0GENERAL",
            text="gpu002 is sick",
            blocks=[{"type": "actions", "elements": [button("drain", value="gpu002")]}],
        )
        click = emu.block_actions_payload("C0GENERAL", posted["ts"], "drain")
        ack = await emu.socket_send("interactive", click)
        assert "payload" not in ack or not ack["payload"]
        await emu.wait_for_responses(2)
        assert emu.message("C0GENERAL", posted["ts"])["text"] == "draining (gpu002)"
    finally:
        await handler.close_async()


async def test_socket_pings_and_disconnect_reconnect(
    emu: SlackEmulator, client: AsyncWebClient
) -> None:
    acks: list[str] = []

    async def listener(sm: Any, req: SocketModeRequest) -> None:
        acks.append(req.envelope_id)
        await sm.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    sm = SocketModeClient(app_token=emu.app_token, web_client=client, ping_interval=0.1)
    sm.socket_mode_request_listeners.append(listener)
    try:
        await sm.connect()
        # The emulator answers the client's pings.
        await eventually(lambda: sm.last_ping_pong_time is not None, "a pong")
        assert await sm.is_connected()

        await emu.socket_disconnect()
        for _ in range(200):
            if emu.socket_connections == 2 and len(emu.calls_to("apps.connections.open")) == 2:
                break
            await asyncio.sleep(0.01)
        assert emu.socket_connections == 2
        ack = await emu.socket_send("events_api", emu.event_payload({"type": "app_mention"}))
        assert ack["envelope_id"] == acks[-1]
    finally:
        await sm.close()


async def test_multipart_upload_and_republishing_home(
    emu: SlackEmulator, client: AsyncWebClient
) -> None:
    issued = await client.files_getUploadURLExternal(filename="report.csv", length=5)
    form = aiohttp.FormData()
    form.add_field("filename", b"a,b\n1", filename="report.csv", content_type="text/csv")
    async with aiohttp.ClientSession() as http, http.post(issued["upload_url"], data=form) as res:
        assert res.status == 200 and (await res.text()) == "OK - 5"
    assert emu.uploads[issued["file_id"]] == b"a,b\n1"

    home = {"type": "home", "external_id": "home-ana", "blocks": [section("v1")]}
    first = await client.views_publish(user_id="U0ADMIN", view=home)
    again = await client.views_publish(user_id="U0ADMIN", view=home, hash=first["view"]["hash"])
    assert again["view"]["id"] == first["view"]["id"]


async def test_people_reacting_editing_deleting_and_metadata_on_request(
    emu: SlackEmulator, client: AsyncWebClient
) -> None:
    emu.add_message("C0GENERAL", ts="1733150000.000100", text="hi", user="U0USER")
    added = emu.react("C0GENERAL", "1733150000.000100", "U0ADMIN", "meow_party::skin-tone-2")
    event = added["event"]
    assert event["type"] == "reaction_added" and event["item_user"] == "U0USER"
    assert event["item"] == {"type": "message", "channel": "C0GENERAL", "ts": "1733150000.000100"}
    got = await client.reactions_get(channel="C0GENERAL", timestamp="1733150000.000100")
    assert got["message"]["reactions"][0]["users"] == ["U0ADMIN"]
    removed = emu.react(
        "C0GENERAL", "1733150000.000100", "U0ADMIN", "meow_party::skin-tone-2", remove=True
    )
    assert removed["event"]["type"] == "reaction_removed"
    assert "reactions" not in emu.message("C0GENERAL", "1733150000.000100")
    changed = emu.edit_message("C0GENERAL", "1733150000.000100", "hello")["event"]
    assert changed["subtype"] == "message_changed" and changed["message"]["text"] == "hello"
    deleted = emu.delete_message("C0GENERAL", "1733150000.000100")["event"]
    assert deleted["subtype"] == "message_deleted" and deleted["deleted_ts"] == "1733150000.000100"
    with pytest.raises(SlackApiError) as gone:
        await client.chat_getPermalink(channel="C0GENERAL", message_ts="1733150000.000100")
    assert gone.value.response["error"] == "message_not_found"
    meta = {"event_type": "meowbot_digest", "event_payload": {"week": "2026-12-04"}}
    await client.chat_postMessage(channel="C0GENERAL", text="digest", metadata=meta)
    plain = await client.conversations_history(channel="C0GENERAL")
    assert "metadata" not in plain["messages"][0]
    full = await client.conversations_history(channel="C0GENERAL", include_all_metadata=True)
    assert full["messages"][0]["metadata"] == meta
