"""Which scheduler the settings make: Slurm, Kubernetes, or both at once; and the
`kubernetes:` section read with its errors in one sentence. Nothing here talks to a cluster
(building an adapter makes no call); tests/integration/test_kubernetes.py does."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.backends.both_schedulers import BothSchedulers
from bot.backends.kubernetes import KubernetesScheduler
from bot.backends.slurm import SlurmRest
from bot.config import ConfigError, load_settings
from bot.config_sections import kubernetes_config
from bot.connect import kubernetes_of, make_scheduler


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in (
        "SLURM_REST_URL",
        "SLURM_JWT",
        "KUBECONFIG",
        "MEOWBOT_KUBERNETES_IN_CLUSTER",
        "PROMETHEUS_URL",
        "MEOWBOT_FLEET",
        "MEOWBOT_CONFIG",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_kubeconfig_alone_is_kubernetes_and_a_real_cluster(tmp_path: Path) -> None:
    s = load_settings(KUBECONFIG=str(tmp_path / "kubeconfig"))
    assert s.kubernetes and s.sim_nodes is None
    assert s.backends()["kubernetes"] == "configured"
    assert s.backends()["scheduler"] == "kubernetes" and s.backends()["metrics"] == "none"
    scheduler = make_scheduler(s)
    assert isinstance(scheduler, KubernetesScheduler) and kubernetes_of(scheduler) is scheduler


def test_slurm_and_kubernetes_make_both(tmp_path: Path) -> None:
    s = load_settings(
        KUBECONFIG=str(tmp_path / "kubeconfig"),
        SLURM_REST_URL="http://slurmrestd:6820",
        SLURM_JWT="token",
    )
    scheduler = make_scheduler(s)
    assert isinstance(scheduler, BothSchedulers)
    assert isinstance(scheduler.slurm, SlurmRest) and kubernetes_of(scheduler) is scheduler.kube
    assert scheduler.name == "Slurm and Kubernetes"
    assert s.backends()["scheduler"] == "both" and "fleet" not in s.backends()


def test_in_cluster_without_kubeconfig() -> None:
    s = load_settings(MEOWBOT_KUBERNETES_IN_CLUSTER="true")
    assert isinstance(make_scheduler(s), KubernetesScheduler)
    assert load_settings().backends()["kubernetes"] == "not configured"
    assert make_scheduler(load_settings()) is None


def test_the_kubernetes_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "meowbot.yaml"
    path.write_text(
        "kubernetes:\n  user_from: label:team\n  node_selector: nvidia.com/gpu.present=true\n"
    )
    monkeypatch.setenv("MEOWBOT_CONFIG", str(path))
    cfg = kubernetes_config(load_settings())
    assert cfg.user_rule().selector_for("ana") == "team=ana"
    assert cfg.node_selector == "nvidia.com/gpu.present=true"
    path.write_text("kubernetes:\n  user_from: owner\n")
    with pytest.raises(ConfigError, match=r"kubernetes\.user_from is wrong"):
        kubernetes_config(load_settings())
    path.write_text("kubernetes:\n  page_size: 0\n")
    with pytest.raises(ConfigError, match=r"kubernetes\.page_size is wrong"):
        kubernetes_config(load_settings())
