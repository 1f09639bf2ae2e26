"""`meowbot run | shell | doctor | digest --now | backfill-highlights | demo-checkpoints |
prometheus-rules`: the console script and `python -m bot`."""

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
    demo = sub.add_parser(
        "demo-checkpoints",
        help="train a tiny GPT-2 on CPU and save a checkpoint every N steps, for the playground",
    )
    demo.add_argument("--out", default="demo-checkpoints", help="checkpoint root folder")
    demo.add_argument("--run", default="tiny-zen", help="checkpoints go to OUT/RUN/step-N")
    demo.add_argument("--steps", type=int, default=500, help="training steps")
    demo.add_argument("--every", type=int, default=100, help="save a checkpoint every N steps")
    demo.add_argument("--seed", type=int, default=0, help="the same seed gives the same run")
    demo.add_argument(
        "--serve",
        action="store_true",
        help="then serve the checkpoints with `transformers serve` on 127.0.0.1",
    )
    demo.add_argument(
        "--retrain",
        action="store_true",
        help="train again even when OUT/RUN already holds checkpoints (kept otherwise)",
    )
    demo.add_argument("--port", type=int, default=8000, help="the server's port with --serve")
    doctor = sub.add_parser(
        "doctor", help="check each configured part against what meowbot needs, with the fix"
    )
    doctor.add_argument("--json", action="store_true", help="one JSON object, for scripts")
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
        help=(
            "evaluate every group this often (default: 30 s the per-node reads, 120 s "
            "counters, 240 s a day's; the checks' gauges are read raw)"
        ),
    )
    rules.add_argument(
        "--kubernetes",
        action="store_true",
        help="print them as a PrometheusRule object (prometheus-operator) instead of a rules file",
    )
    rules.add_argument("-o", "--output", help="write the rules file here instead of stdout")
    return parser


def _date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date like 2020-06-01: {text!r}") from None


def _demo_checkpoints(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bot.playground.demo_train import DemoRun, DemoTrainUnavailable, train
    from bot.words import count

    run = DemoRun(Path(args.out), args.run, args.steps, args.every, args.seed)
    have = sorted((Path(args.out) / args.run).glob("step-*/config.json"))
    if have and not args.retrain:
        held = count(len(have), "checkpoint")
        print(
            f"{Path(args.out) / args.run} already holds {held}; kept (--retrain to train again)",
            flush=True,
        )
    else:
        try:
            train(run, log=lambda line: print(line, flush=True))
        except (DemoTrainUnavailable, ValueError) as exc:
            print(f"meowbot: {exc}", file=sys.stderr)
            return 2
    if not args.serve:
        return 0
    import os
    import shutil

    server = shutil.which("transformers") or str(Path(sys.prefix) / "bin" / "transformers")
    if not Path(server).exists():
        print(
            'meowbot: `transformers serve` is not installed: pip install "transformers[serving]"',
            file=sys.stderr,
        )
        return 2
    out = Path(args.out).resolve()
    print(
        f"serving {out / args.run}; run the bot with\n"
        f"  PLAYGROUND_ENDPOINTS=http://127.0.0.1:{args.port}/v1 "
        f"PLAYGROUND_CHECKPOINT_DIRS={out}",
        flush=True,
    )
    argv = [server, "serve", "--host", "127.0.0.1", "--port", str(args.port), "--device", "cpu"]
    os.execve(server, argv, {**os.environ, "HF_HUB_OFFLINE": "1"})  # replaces this process


def _prometheus_rules(
    settings: Settings,
    windows: list[str],
    interval_s: int | None,
    output: str | None,
    *,
    kubernetes: bool = False,
) -> int:
    """The rules file for the checks as MEOWBOT_CONFIG configures them (a PrometheusRule
    object with `kubernetes`)."""
    from bot.backends.prometheus_rules import prometheus_rule_yaml, rules_yaml
    from bot.connect import prometheus_rule_groups
    from bot.triage.targets import BadInput, parse_duration

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
        else {
            "value_interval_s": interval_s,
            "window_interval_s": interval_s,
            "day_interval_s": interval_s,
            "pace_interval_s": interval_s,
            "precursor_interval_s": interval_s,
        }
    )
    groups = prometheus_rule_groups(settings, extra, every)
    text = prometheus_rule_yaml(groups) if kubernetes else rules_yaml(groups)
    if output:
        with open(output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
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
    if verb in ("digest", "backfill-highlights"):
        setup_logging(settings.log_level)
        return _highlight_job(settings, args)
    if verb == "doctor":
        return _doctor(settings, as_json=args.json)
    if verb == "prometheus-rules":
        try:
            return _prometheus_rules(
                settings, args.window, args.interval, args.output, kubernetes=args.kubernetes
            )
        except ConfigError as exc:
            print(f"meowbot: {exc}", file=sys.stderr)
            return 2
    if verb == "run" and settings.mode is not Mode.SHELL:
        setup_logging(settings.log_level)
        from bot.app import serve
        from bot.offload import loop_first

        try:
            with asyncio.Runner(loop_factory=loop_first) as runner:
                runner.run(serve(settings))
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


def _doctor(settings: Settings, *, as_json: bool) -> int:
    """The report on stdout; exit 1 when something must be fixed first."""
    setup_logging("error")
    from bot.doctor.report import exit_code, render_json, render_text
    from bot.doctor.run import doctor

    lines = asyncio.run(doctor(settings))
    print(render_json(lines) if as_json else render_text(lines))
    return exit_code(lines)


def _highlight_job(settings: Settings, args: argparse.Namespace) -> int:
    from bot.highlight_jobs import backfill_highlights, digest_now

    try:
        if args.verb == "digest":
            ts = asyncio.run(digest_now(settings, args.channel))
            print("digest posted" if ts else "an empty week (empty_week: skip): nothing posted")
            return 0
        done = asyncio.run(backfill_highlights(settings, args.since, args.channel, args.pace))
    except ConfigError as exc:
        hint = ""
        if args.verb == "digest" and settings.slack_bot_token is None:
            hint = (
                "\nTo preview the digest without Slack: `meowbot shell`, then `say --as bob "
                "TEXT`, `react meow_party` and `digest`."
            )
        print(f"meowbot: {exc}{hint}", file=sys.stderr)
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
