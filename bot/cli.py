"""`meowbot run | shell | prometheus-rules`: the console script and `python -m bot`."""

from __future__ import annotations

import argparse
import asyncio
import sys

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
    rules = sub.add_parser(
        "prometheus-rules",
        help="print the Prometheus recording rules that make /hw-faults fast on a big fleet",
    )
    rules.add_argument(
        "--window",
        action="append",
        default=[],
        metavar="DURATION",
        help="record the counters over this window too (e.g. 6h), besides the defaults",
    )
    rules.add_argument(
        "--interval",
        type=int,
        metavar="SECONDS",
        help="evaluate every group this often (default: 30 s gauges, 120 s counters, 240 s a day)",
    )
    rules.add_argument("-o", "--output", help="write the rules file here instead of stdout")
    return parser


def _prometheus_rules(
    settings: Settings, windows: list[str], interval_s: int | None, output: str | None
) -> int:
    """The rules file for the checks as MEOWBOT_CONFIG configures them."""
    from bot.backends.prometheus_rules import rule_groups, rules_yaml, windows_for
    from bot.triage.targets import BadInput, parse_duration
    from bot.wiring import alerts_config, health_config, straggler_config

    health = health_config(settings)
    try:
        extra = [parse_duration(w) for w in windows]
    except BadInput as exc:
        print(f"meowbot: {exc}", file=sys.stderr)
        return 2
    if interval_s is not None and not 1 <= interval_s < 300:
        print("meowbot: --interval must be 1 to 299 seconds.", file=sys.stderr)
        return 2
    every = (
        {}
        if interval_s is None
        else {"value_interval_s": interval_s, "window_interval_s": interval_s,
              "day_interval_s": interval_s, "pace_interval_s": interval_s}
    )  # fmt: skip
    groups = rule_groups(
        health,
        straggler_config(settings),
        windows=windows_for(
            health, sweep_window_s=alerts_config(settings).sweep_window_s, extra=extra
        ),
        **every,
    )
    text = rules_yaml(groups)
    if output:
        with open(output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"meowbot: {exc}", file=sys.stderr)
        return 2
    verb = args.verb or "run"
    if verb == "prometheus-rules":
        try:
            return _prometheus_rules(settings, args.window, args.interval, args.output)
        except ConfigError as exc:
            print(f"meowbot: {exc}", file=sys.stderr)
            return 2
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


def _shell(settings: Settings, command: str | None, *, as_json: bool, user: str | None) -> int:
    # Logs would interleave with the answers: keep only warnings, on stderr.
    setup_logging("warning")
    from bot.shell.repl import run_repl

    return asyncio.run(run_repl(settings, command=command, as_json=as_json, user=user))
