"""A local, strict emulator of the Slack Web API and Socket Mode, for tests and the shell.

What it emulates (on 127.0.0.1, a free port, aiohttp):

* The Web API methods meowbot uses (``auth.test``, ``chat.*``, ``conversations.*``, ``views.*``,
  ``files.getUploadURLExternal`` + upload URL + ``files.completeUploadExternal``, ``reactions.*``,
  ``users.*``, ``usergroups.*``, ``apps.connections.open``), reached by slack_sdk's
  ``AsyncWebClient(token=..., base_url=emu.api_url)``. Arguments are accepted the ways Slack
  accepts them (JSON body with a Bearer token, form-urlencoded, multipart, query string) and the
  answers use Slack's real error codes and shapes (HTTP 200 with ``ok: false``; HTTP 429 with
  ``Retry-After`` for rate limits).
* Block Kit validation of messages and views (types, required fields, Slack's length and count
  limits, unknown properties on the common blocks, unique ids), answering ``invalid_blocks`` /
  ``invalid_arguments`` with json-pointer messages like Slack does.
* An in-memory workspace: channels, users, user groups, message history with threads and
  reactions, views, uploaded files, ephemeral messages.
* What people do that Slack reports as events: ``react`` (a reaction added or removed),
  ``edit_message`` and ``delete_message`` change the stored workspace and return the event
  payload (``reaction_added`` / ``reaction_removed`` with ``item_user``, ``message_changed``,
  ``message_deleted``) for the test to deliver, signed, to the bot.
* ``response_url`` webhooks (bound optionally to a message, so ``replace_original`` and
  ``delete_original`` act on it) and the Socket Mode WebSocket protocol (hello, envelopes, acks,
  disconnect, ping/pong) as spoken by slack_sdk's ``SocketModeClient``.

What it does not emulate: OAuth and scopes (the bot token may do everything a bot may do), the
Events API over HTTP and request signing, real rate limits (use ``fail_next``), Slack rendering
of mrkdwn, event delivery caused by Web API calls (posting a message does not emit a
``message`` event), most of Block Kit's cross-field rules (for example ``initial_option`` must
be one of ``options``) and unknown-property checks on the less common blocks and elements.

Its parts, one module each: `workspace` (the state), the Web API methods by family
(`directory`, `messages`, `conversations`, `views`, `files`), `web_api` (arguments, tokens,
injected failures, the record of calls) with `params` (reading arguments) and `errors`,
`blockkit` (validation) with `blockkit_schema` (what goes where), `response_urls`,
`socket_mode`, `payloads` and `events` (what people do, as Slack sends it), `server` (aiohttp),
and `emulator`, which puts them together.
"""

from bot.shell.emulator.blockkit import validate_blocks, validate_view
from bot.shell.emulator.emulator import SlackEmulator
from bot.shell.emulator.socket_mode import SocketAck
from bot.shell.emulator.web_api import Call

__all__ = [
    "Call",
    "SlackEmulator",
    "SocketAck",
    "validate_blocks",
    "validate_view",
]
