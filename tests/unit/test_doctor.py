"""The doctor's report and its judgements, from what each part answered (no I/O)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import yaml

from bot.backends.prometheus_rules import Rule, RuleGroup
from bot.config import load_settings
from bot.doctor.kubernetes_part import NEEDED
from bot.doctor.prometheus_part import check_lines, cost_line, host_label_line, rules_line
from bot.doctor.redis_part import server_lines
from bot.doctor.report import Line, Status, exit_code, render_json, render_text
from bot.doctor.services_part import schedule_lines
from bot.doctor.slack_part import BOT_SCOPES, scope_lines
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
    docs = yaml.safe_load_all((ROOT / "deploy" / "kubernetes-rbac.yaml").read_text())
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
