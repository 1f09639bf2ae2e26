"""The doctor's report and its judgements, from what each part answered (no I/O)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import yaml

from bot.backends.prometheus_rules import PRECURSOR_GROUP, Rule, RuleGroup
from bot.backends.slurm import SlurmAbout, SlurmApi, jwt_claims, parse_ping
from bot.config import load_settings
from bot.config_sections import regressions_config, straggler_config
from bot.connect import prometheus_rule_groups
from bot.doctor.kubernetes_part import NEEDED
from bot.doctor.prometheus_part import (
    HistoryRead,
    check_lines,
    cost_line,
    history_reads,
    host_label_line,
    reach_line,
    rules_line,
)
from bot.doctor.redis_part import server_lines
from bot.doctor.report import Line, Status, exit_code, render_json, render_text
from bot.doctor.services_part import schedule_lines
from bot.doctor.slack_part import scope_lines
from bot.doctor.slurm_part import (
    drain_path_line,
    may_drain_line,
    nodes_line,
    server_line,
    token_line,
)
from bot.ports import SchedulerNode
from bot.slack_scopes import BOT_SCOPES
from bot.triage.checks import CHECKS_BY_NAME

ROOT = Path(__file__).resolve().parents[2]


def test_the_doctor_asks_for_the_scopes_the_manifest_asks_for() -> None:
    manifest = yaml.safe_load((ROOT / "manifest.yaml").read_text())
    assert sorted(BOT_SCOPES) == sorted(manifest["oauth_config"]["scopes"]["bot"])


def test_a_token_without_chat_write_fails_and_says_what_it_stops() -> None:
    [line] = scope_lines([s for s in BOT_SCOPES if s != "chat:write"])
    assert line.status is Status.FAIL
    assert "chat:write" in line.said and "no alert" in line.said
    assert "reinstall" in line.fix
    [ok] = scope_lines([*BOT_SCOPES, "extra:scope"])
    assert ok.status is Status.PASS
    [unknown] = scope_lines(None)
    assert unknown.status is Status.WARN


def test_redis_persistence_and_version_are_judged() -> None:
    off = server_lines({"redis_version": "7.0.15", "aof_enabled": 0}, "")
    assert [line.status for line in off] == [Status.PASS, Status.WARN]
    assert "forgets open alerts" in off[1].said
    on = server_lines({"redis_version": "7.0.15", "aof_enabled": 1}, "3600 1")
    assert on[1].status is Status.PASS and "append-only file" in on[1].said
    old = server_lines({"redis_version": "6.0.9", "aof_enabled": 1}, "")
    assert old[0].status is Status.FAIL and "6.2" in old[0].fix
    hidden = server_lines({"redis_version": "7.2.4", "aof_enabled": 0}, "?")
    assert hidden[1].status is Status.WARN and "CONFIG GET" in hidden[1].said


def test_a_check_without_its_metric_fails_by_name_and_the_rest_are_counted() -> None:
    checks = [CHECKS_BY_NAME["xid"], CHECKS_BY_NAME["high_temperature"]]
    lines = check_lines(checks, {"high_temperature": ["DCGM_FI_DEV_GPU_TEMP"]}, 12)
    assert lines[0].status is Status.WARN and lines[0].said == "1 of 2 can run over 12 nodes"
    assert lines[1].what == "check high_temperature" and lines[1].status is Status.FAIL
    assert "DCGM_FI_DEV_GPU_TEMP" in lines[1].said
    [all_ok] = check_lines(checks, {}, 12)
    assert all_ok.status is Status.PASS


def test_host_label_rules_and_cost() -> None:
    assert host_label_line({"Hostname", "gpu"}, "node").said.endswith("by Hostname")
    assert host_label_line({"gpu"}, "node").status is Status.FAIL
    assert "no GPU is exported" in host_label_line(None, "node").said
    group = RuleGroup("g", 30, (Rule("meowbot:a", "a", "a", "a"), Rule("meowbot:b", "b", "b", "b")))
    assert rules_line([group], {}).status is Status.WARN
    assert "1 of 2" in rules_line([group], {"meowbot:a": 3.0}).said
    assert rules_line([group], {"meowbot:a": 3.0, "meowbot:b": 40.0}).said == (
        "all 2 kept up (oldest 40 s)"
    )
    assert cost_line(0.5, 42, 1024, 5).status is Status.PASS
    slow = cost_line(3.0, 42, 1024, 5)
    assert slow.status is Status.WARN and "60%" in slow.said


def test_the_report_reads_as_text_and_as_json_and_fails_only_on_a_fail() -> None:
    lines = [
        Line("Redis", "server", Status.PASS, "reachable"),
        Line("Redis", "persistence", Status.WARN, "off", "turn it on"),
    ]
    assert exit_code(lines) == 0
    text = render_text(lines)
    assert "Redis\n  ok    server: reachable" in text and "fix: turn it on" in text
    assert text.endswith("meowbot can run; 1 to look at.")
    failed = [*lines, Line("Slack", "scopes", Status.FAIL, "missing chat:write", "add it")]
    assert exit_code(failed) == 1
    body = json.loads(render_json(failed))
    assert body["ok"] is False and body["checks"][2]["status"] == "fail"


def test_the_weekly_posts_say_when_and_where_or_that_they_are_off() -> None:
    settings = load_settings(
        MEOWBOT_DIGEST_CHANNEL="C0DIGEST",
        MEOWBOT_DIGEST_SCHEDULE="fri 16:00 UTC",
        MEOWBOT_REGRESSIONS_CHANNEL=None,
    )
    digest, regressions = schedule_lines(settings, datetime(2026, 12, 7, 12, 0, tzinfo=UTC))
    assert digest.said == "next Fri 11 Dec 16:00 UTC (fri 16:00 UTC), to C0DIGEST"
    assert regressions.status is Status.OFF and "MEOWBOT_REGRESSIONS_CHANNEL" in regressions.said


def test_the_doctor_asks_for_each_verb_of_the_role_meowbot_is_bound_to() -> None:
    docs = yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "rbac.yaml").read_text())
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "meowbot"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    asked = {(g, r, v) for g, r, verbs, _ in NEEDED for v in verbs}
    assert asked == granted


# ---------------------------------------------------------------- Slurm


def jwt(claims: dict[str, object]) -> str:
    """A token shaped as `scontrol token` makes them (HS256; the signature is not read)."""

    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


NOW_S = datetime(2026, 12, 7, 12, 0, tzinfo=UTC).timestamp()


def test_the_token_line_reads_its_user_and_expiry() -> None:
    now = datetime.fromtimestamp(NOW_S, UTC)
    month = jwt_claims(jwt({"exp": int(NOW_S) + 30 * 86400, "iat": 1, "sun": "meowbot"}))
    assert month == {"exp": int(NOW_S) + 30 * 86400, "iat": 1, "sun": "meowbot"}
    ok = token_line("meowbot", month, now)
    assert ok.status is Status.PASS
    assert ok.said == "SLURM_USER meowbot, the token's own user, valid until 2027-01-06 12:00 UTC"
    soon = token_line("meowbot", {"exp": NOW_S + 7200, "sun": "meowbot"}, now)
    assert soon.status is Status.WARN and soon.said.endswith(": 2 h left")
    assert "restart meowbot" in soon.fix
    gone = token_line("meowbot", {"exp": NOW_S - 1, "sun": "meowbot"}, now)
    assert gone.status is Status.FAIL and gone.said.startswith("SLURM_JWT expired")
    assert "scontrol token username=meowbot" in gone.fix
    # slurmctld takes a missing exp for 0: expired.
    assert token_line("meowbot", {"sun": "meowbot"}, now).status is Status.FAIL
    other = token_line("meowbot", {"exp": NOW_S + 30 * 86400, "sun": "root"}, now)
    assert other.status is Status.WARN and "the token is root's" in other.said
    assert jwt_claims("not-a-jwt") is None and jwt_claims("a.b!.c") is None
    assert token_line("meowbot", None, now).status is Status.FAIL


def test_the_drain_probe_is_judged_by_slurmctlds_two_answers_and_nothing_else() -> None:
    """What 22.05's scontrol says to a drain of a node that cannot exist (the REST API of newer
    Slurm words its errors as below), and answers that are neither shape."""
    may = may_drain_line(
        "root", "refused the node update: slurm_update error: Invalid node name specified."
    )
    assert may.status is Status.PASS and may.said.startswith("root may update nodes")
    for refused in (
        "refused the node update: slurm_update error: Invalid user id.",
        "answered an error: Failure to update node meowbot-doctor-no-such-node: "
        "Access/permission denied.",
    ):
        line = may_drain_line("nobody", refused)
        assert line.status is Status.FAIL, refused
        assert line.said.startswith("slurmctld refuses node updates from nobody (")
        assert "sacctmgr modify user nobody set adminlevel=admin" in line.fix
    zero = "refused the node update: slurm_update error: Zero Bytes were transmitted or received."
    for other in ("did not answer scontrol in time.", zero, None):
        line = may_drain_line("root", other)
        assert line.status is Status.WARN and line.said.startswith("unknown: "), other
        assert line.said.endswith(other or "no error")


def test_how_a_drain_reaches_slurm() -> None:
    old = SlurmApi("v0.0.38", "/n", "/n/{node_name}", "/j", "/j/{job_id}", "/p", node_update=False)
    new = SlurmApi("v0.0.40", "/n", "/n/{node_name}", "/j", "/j/{job_id}", "/p", node_update=True)
    missing = drain_path_line(old, "scontrol", None)
    assert missing.status is Status.FAIL and "slurm-client" in missing.fix
    assert "every Drain and Resume fails" in missing.said
    found = drain_path_line(old, "scontrol", "/usr/bin/scontrol")
    assert found.said == "scontrol at /usr/bin/scontrol (REST API v0.0.38 cannot update nodes)"
    assert drain_path_line(new, "scontrol", None).status is Status.PASS


def test_slurmrestds_ping_and_the_nodes_it_lists() -> None:
    old = parse_ping(
        {
            "meta": {
                "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}
            },
            "pings": [{"hostname": "ctl", "ping": "UP", "status": 0, "mode": "primary"}],
        }
    )
    assert old == SlurmAbout("22.05.8", (("ctl", "UP"),))
    newer = parse_ping(
        {
            "meta": {"slurm": {"version": {"major": "24", "minor": "05", "micro": "1"}}},
            "pings": [{"hostname": "a", "pinged": "UP"}, {"hostname": "b", "pinged": "DOWN"}],
        }
    )
    assert newer == SlurmAbout("24.05.1", (("a", "UP"), ("b", "DOWN")))
    api = SlurmApi("v0.0.38", "/n", "/n/{node_name}", "/j", "/j/{job_id}", "/p", node_update=False)
    ok = server_line("http://slurm:6820", api, old)
    assert ok.said == "http://slurm:6820: Slurm 22.05.8, REST API v0.0.38"
    assert server_line("u", api, newer).status is Status.WARN
    alone = SlurmAbout("22.05.8", (("ctl", "DOWN"),))
    assert server_line("u", api, alone).status is Status.FAIL
    assert nodes_line({}, "meowbot").status is Status.WARN
    nodes = {
        "a": SchedulerNode(name="a", state="idle"),
        "b": SchedulerNode(name="b", state="idle", flags=("DRAIN",)),
    }
    assert nodes_line(nodes, "meowbot").said == "2 listed, 1 drained or down"


# ---------------------------------------------------------------- the rules' reach


def test_the_rules_reach_against_what_the_answers_read() -> None:
    pace = HistoryRead("/job-slow's 48 h pace", 48 * 3600.0, frozenset({"p1", "p2"}))
    week = HistoryRead("/regressions' 7 days", 7 * 86400.0, frozenset({"r1", "p1"}))
    span = 8 * 86400.0
    three_days = {"p1": NOW_S - 3 * 86400, "p2": NOW_S - 3 * 86400 + 600, "r1": NOW_S - 86400}
    line = reach_line([pace, week], three_days, NOW_S, span, "http://prom:9090")
    assert line is not None and line.status is Status.WARN
    assert line.said == (
        "back to 2026-12-06 12:00 UTC (24 h): /job-slow's 48 h pace reads them; "
        "/regressions' 7 days read raw instead (slower, and coarser on a big fleet) until the "
        "rules reach back that far"
    )
    start = int(NOW_S - 7 * 86400)
    assert f"create-blocks-from rules --start={start} --end={int(NOW_S - 86400)}" in line.fix
    assert "--url=http://prom:9090" in line.fix
    # Sentinels found at the span's far edge: the rules reach further than was looked.
    edge = dict.fromkeys(["p1", "p2", "r1"], NOW_S - span)
    whole = reach_line([pace, week], edge, NOW_S, span, "u")
    assert whole is not None and whole.status is Status.PASS
    assert whole.said.startswith("back more than 8 days: /job-slow's 48 h pace and /regressions'")
    # A rule of the read not kept up at all: that read is raw whatever the others reach.
    missing = reach_line([pace, week], {"p1": NOW_S - span, "p2": NOW_S - span}, NOW_S, span, "u")
    assert missing is not None and missing.status is Status.WARN
    assert "/regressions' 7 days read raw" in missing.said
    assert reach_line([pace], {}, NOW_S, span, "u") is None  # rules_line says none is kept


def test_the_answers_that_read_days_name_the_rules_meowbot_prints() -> None:
    settings = load_settings(PROMETHEUS_URL="http://prom:9090", SLURM_REST_URL=None)
    groups = prometheus_rule_groups(settings, [], {})
    reads = {
        r.answer: r
        for r in history_reads(
            groups, regressions_config(settings), straggler_config(settings), "node"
        )
    }
    assert set(reads) == {
        "/job-slow's 48 h pace",
        "/regressions' 7 days",
        "/hw-faults why's 7 days",
    }
    by_group = {g.name: {r.record for r in g.rules} for g in groups}
    assert reads["/job-slow's 48 h pace"].records == by_group["meowbot-job-slow-pace"]
    assert reads["/hw-faults why's 7 days"].records == by_group[PRECURSOR_GROUP]
    # Each job's nodes, compute times, the slowest rank and the versions a node shows.
    assert by_group["meowbot-regressions"] <= reads["/regressions' 7 days"].records
    assert len(reads["/regressions' 7 days"].records) == 5
