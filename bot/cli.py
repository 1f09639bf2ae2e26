"""`meowbot run | shell | demo-checkpoints`: the console script and `python -m bot`."""

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
    demo = sub.add_parser(
        "demo-checkpoints",
        help="train a tiny GPT-2 on CPU and save a checkpoint every N steps, for the playground",
    )
    demo.add_argument("--out", default="demo-checkpoints", help="checkpoint root folder")
    demo.add_argument("--run", default="tiny-zen", help="checkpoints go to OUT/RUN/step-N")
    demo.add_argument("--steps", type=int, default=500, help="training steps")
    demo.add_argument("--every", type=int, default=100, help="save a checkpoint every N steps")
    demo.add_argument("--seed", type=int, default=0, help="the same seed gives the same run")
    return parser


def _demo_checkpoints(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bot.playground.demo_train import DemoRun, DemoTrainUnavailable, train

    run = DemoRun(Path(args.out), args.run, args.steps, args.every, args.seed)
    try:
        train(run, log=lambda line: print(line, flush=True))
    except (DemoTrainUnavailable, ValueError) as exc:
        print(f"meowbot: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.verb == "demo-checkpoints":  # needs no settings: it only writes files
        return _demo_checkpoints(args)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"meowbot: {exc}", file=sys.stderr)
        return 2
    verb = args.verb or "run"
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
