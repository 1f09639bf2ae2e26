"""`meowbot run | shell | digest --now | backfill-highlights`: the console script and
`python -m bot`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from bot.config import ConfigError, Mode, Settings, load_settings
from bot.logs import setup_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="meowbot", description="GPU cluster triage in Slack")
    sub = parser.add_subparsers(dest="verb")
    sub.add_parser(
        "run",
        help="run the bot: Socket Mode, HTTP, or the terminal shell when no tokens are set",
    )
    shell = sub.add_parser("shell", help="type slash commands in a terminal, as in Slack")
    shell.add_argument(
        "-c", dest="command", help='run one command and exit, e.g. "/node-health help"'
    )
    shell.add_argument(
        "--json",
        action="store_true",
        help="print each Slack Web API call and response_url post as one JSON object a line",
    )
    shell.add_argument("--user", default=None, help="act as this Slack user id (e.g. U123)")
    digest = sub.add_parser("digest", help="post the highlights digest of the last 7 days now")
    digest.add_argument("--now", action="store_true", required=True, help="post it now")
    digest.add_argument("--channel", help="where to post (default MEOWBOT_DIGEST_CHANNEL)")
    backfill = sub.add_parser(
        "backfill-highlights", help="record existing reactions from the channels' history"
    )
    backfill.add_argument("--since", required=True, type=_date, help="YYYY-MM-DD (UTC)")
    backfill.add_argument(
        "--channel", action="append", default=[], help="only this channel id (repeatable)"
    )
    backfill.add_argument(
        "--pace", type=float, default=None, help="seconds between Web API calls (default 1.2)"
    )
    return parser


def _date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date like 2020-06-01: {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"meowbot: {exc}", file=sys.stderr)
        return 2
    verb = args.verb or "run"
    if verb in ("digest", "backfill-highlights"):
        setup_logging(settings.log_level)
        return _highlight_job(settings, args)
    if verb == "run" and settings.mode is not Mode.SHELL:
        setup_logging(settings.log_level)
        from bot.app import serve

        try:
            asyncio.run(serve(settings))
        except ConfigError as exc:
            print(f"meowbot: {exc}", file=sys.stderr)
            return 2
        return 0
    if verb == "run":
        sim = settings.sim_nodes
        where = f"the simulated fleet ({sim} nodes)" if sim else "the configured cluster"
        print(
            "No Slack tokens set (SLACK_BOT_TOKEN with SLACK_APP_TOKEN or SLACK_SIGNING_SECRET): "
            f"starting the terminal shell on {where}."
        )
        return _shell(settings, None, as_json=False, user=None)
    return _shell(settings, args.command, as_json=args.json, user=args.user)


def _highlight_job(settings: Settings, args: argparse.Namespace) -> int:
    from bot.highlight_jobs import backfill_highlights, digest_now

    try:
        if args.verb == "digest":
            ts = asyncio.run(digest_now(settings, args.channel))
            print("digest posted" if ts else "an empty week (empty_week: skip): nothing posted")
            return 0
        done = asyncio.run(backfill_highlights(settings, args.since, args.channel, args.pace))
    except ConfigError as exc:
        print(f"meowbot: {exc}", file=sys.stderr)
        return 2
    print(
        f"backfill done: {done.channels} channels, {done.scanned:,} messages scanned, "
        f"{done.found:,} highlights found"
    )
    return 0


def _shell(settings: Settings, command: str | None, *, as_json: bool, user: str | None) -> int:
    # Logs would interleave with the answers: keep only warnings, on stderr.
    setup_logging("warning")
    from bot.shell.repl import run_repl

    return asyncio.run(run_repl(settings, command=command, as_json=as_json, user=user))
