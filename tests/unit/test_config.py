from __future__ import annotations

import logging

import pytest

from bot.config import ConfigError, Mode, load_settings
from bot.logs import JsonFormatter

SECRET = "xoxb-1234-very-secret"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory) -> None:
    for var in (
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_API_URL",
        "PORT",
        "REDIS_URL",
        "PROMETHEUS_URL",
        "SLURM_REST_URL",
        "KUBECONFIG",
        "MEOWBOT_KUBERNETES_IN_CLUSTER",
        "MEOWBOT_FLEET",
        "MEOWBOT_CONFIG",
        "MEOWBOT_ADMINS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_defaults_are_the_shell_on_the_simulated_fleet() -> None:
    s = load_settings()
    assert s.mode is Mode.SHELL
    assert s.port == 3000
    assert s.sim_nodes == 512
    assert s.slack_api_url == "https://slack.com/api/"


def test_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", SECRET)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s3cret")
    assert load_settings().mode is Mode.HTTP
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-abc")
    assert load_settings().mode is Mode.SOCKET


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("PORT", "http", "PORT must be an integer between 1 and 65535 (got 'http')."),
        ("PORT", "70000", "PORT must be an integer between 1 and 65535 (got '70000')."),
        ("MEOWBOT_FLEET", "sim:99999999", "MEOWBOT_FLEET must be 'sim' or 'sim:N'"),
        ("PROMETHEUS_URL", "prom:9090", "PROMETHEUS_URL must be an http(s) URL"),
        ("REDIS_URL", "localhost", "REDIS_URL must be a URL like redis://"),
        ("SLACK_API_URL", "http://x/", "SLACK_API_URL must be an http(s) URL ending in /api/"),
        ("MEOWBOT_ADMINS", "U1,<script>", "MEOWBOT_ADMINS must be Slack user ids"),
    ],
)
def test_a_wrong_value_is_one_sentence_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert message.startswith(expected)
    assert message.count(".") >= 1 and "\n" not in message


def test_a_wrong_token_is_named_without_showing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxp-user-token-not-a-bot-one")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert str(err.value) == "SLACK_BOT_TOKEN must be a bot token starting with xoxb-."


def test_yaml_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    path = tmp_path / "meowbot.yaml"  # type: ignore[operator]
    path.write_text("routes:\n  critical: C0CRIT\n")
    monkeypatch.setenv("MEOWBOT_CONFIG", str(path))
    assert load_settings().extra == {"routes": {"critical": "C0CRIT"}}
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="MEOWBOT_CONFIG must be the path of a readable YAML"):
        load_settings()
    monkeypatch.setenv("MEOWBOT_CONFIG", str(tmp_path / "missing.yaml"))  # type: ignore[operator]
    with pytest.raises(ConfigError, match="MEOWBOT_CONFIG"):
        load_settings()


def test_secrets_never_in_repr_or_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", SECRET)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing-secret-value")
    s = load_settings()
    assert SECRET not in repr(s) and "signing-secret-value" not in repr(s)
    assert SECRET not in str(s.model_dump())
    record = logging.makeLogRecord(
        {
            "msg": "calling with %s",
            "args": (f"Authorization: Bearer {SECRET}",),
            "levelname": "INFO",
        }
    )
    line = JsonFormatter().format(record)
    assert SECRET not in line and "very-secret" not in line


def test_cluster_backend_turns_off_the_default_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_URL", "http://127.0.0.1:9090/")
    s = load_settings()
    assert s.sim_nodes is None
    assert s.prometheus_url == "http://127.0.0.1:9090"
    assert s.backends()["metrics"] == "prometheus" and "fleet" not in s.backends()


def test_the_simulated_fleet_beside_a_cluster_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The simulator beside a real source would answer for it: one sentence, no start.
    monkeypatch.setenv("MEOWBOT_FLEET", "sim:64")
    assert load_settings().sim_nodes == 64
    assert load_settings().backends()["fleet"] == "simulated (64 nodes)"
    for var, value in (
        ("PROMETHEUS_URL", "http://127.0.0.1:9090"),
        ("SLURM_REST_URL", "http://127.0.0.1:6820"),
        ("KUBECONFIG", "/etc/kubeconfig"),
    ):
        with pytest.raises(ConfigError) as err:
            load_settings(**{var: value})
        assert str(err.value) == (
            f"MEOWBOT_FLEET runs the simulated fleet only when no cluster is configured, and "
            f"{var} is set: unset MEOWBOT_FLEET to use the cluster (the simulator never stands "
            "in beside it)."
        )
