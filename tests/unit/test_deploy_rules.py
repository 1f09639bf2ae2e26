"""deploy/kubernetes/prometheusrule.yaml never goes stale: it is what `meowbot prometheus-rules
--kubernetes` prints now for the base's own MEOWBOT_CONFIG, and that flag prints the same
groups as the rules file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes"
REGENERATE = (
    "MEOWBOT_CONFIG=deploy/kubernetes/config.yaml .venv/bin/meowbot prometheus-rules "
    "--kubernetes -o deploy/kubernetes/prometheusrule.yaml"
)


def _printed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> Any:
    monkeypatch.setenv("MEOWBOT_CONFIG", str(BASE / "config.yaml"))
    assert main(["prometheus-rules", *args]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_the_committed_prometheus_rule_is_what_the_cli_prints_now(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = yaml.safe_load((BASE / "prometheusrule.yaml").read_text(encoding="utf-8"))
    now = _printed(capsys, monkeypatch, "--kubernetes")
    assert committed["spec"]["groups"] == now["spec"]["groups"], f"stale: run {REGENERATE}"
    assert committed == now, f"stale: run {REGENERATE}"
    assert "prometheusrule.yaml" in (BASE / "kustomization.yaml").read_text(encoding="utf-8")


def test_kubernetes_wraps_the_rules_files_groups_in_a_prometheus_rule(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _printed(capsys, monkeypatch, "--window", "6h")
    wrapped = _printed(capsys, monkeypatch, "--window", "6h", "--kubernetes")
    assert wrapped["apiVersion"] == "monitoring.coreos.com/v1"
    assert wrapped["kind"] == "PrometheusRule"
    assert wrapped["metadata"] == {"name": "meowbot"}  # the namespace is where it is applied
    assert wrapped["spec"] == {"groups": plain["groups"]}
    assert any(g["name"].startswith("meowbot-health-21600s-") for g in plain["groups"])
    assert set(wrapped) == {"apiVersion", "kind", "metadata", "spec"}


def test_kubernetes_writes_the_file_with_its_heading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEOWBOT_CONFIG", str(BASE / "config.yaml"))
    out = tmp_path / "rule.yaml"
    assert main(["prometheus-rules", "--kubernetes", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# meowbot's recording rules as a PrometheusRule")
    assert "--kubernetes` from the health checks and MEOWBOT_CONFIG" in text
    assert "# meowbot-health-values, every 30 s:" in text
    assert yaml.safe_load(text)["kind"] == "PrometheusRule"
