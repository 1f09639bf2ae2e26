"""`validation:` in MEOWBOT_CONFIG: steps, parsers and their params, the default suite."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.config import ConfigError, load_settings
from bot.config_sections import validation_config
from bot.validation.config import DCGM_TIMEOUT_S, DEFAULT_STEPS, StepConfig, ValidationConfig
from bot.validation.parsers import PARSERS

DATA = Path(__file__).parents[1] / "data" / "validation"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("SLURM_REST_URL", "KUBECONFIG", "PROMETHEUS_URL", "MEOWBOT_FLEET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


def _with_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "meowbot.yaml"
    path.write_text(text)
    monkeypatch.setenv("MEOWBOT_CONFIG", str(path))


def test_the_default_suite_is_dcgm_level_2_and_a_single_node_all_reduce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEOWBOT_CONFIG", raising=False)
    cfg = validation_config(load_settings())
    assert cfg.steps == DEFAULT_STEPS
    dcgm, all_reduce = cfg.steps
    assert dcgm.command == ("dcgmi", "diag", "-r", "2", "-j") and dcgm.parser == "dcgm_diag"
    assert dcgm.timeout_s == DCGM_TIMEOUT_S[2] >= 120  # -r 2 takes about 2 minutes
    assert DCGM_TIMEOUT_S[1] < DCGM_TIMEOUT_S[2] < DCGM_TIMEOUT_S[3]
    assert DCGM_TIMEOUT_S[3] >= 15 * 60  # -r 3 takes about 15 minutes
    assert all_reduce.parser == "nccl_all_reduce" and all_reduce.command[0] == "all_reduce_perf"
    assert "-g" in all_reduce.command  # one node's GPUs, no MPI across nodes
    # An empty section is the defaults too.
    _with_config(tmp_path, monkeypatch, "validation:\n")
    assert validation_config(load_settings()).steps == DEFAULT_STEPS


def test_a_site_suite_replaces_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_config(
        tmp_path,
        monkeypatch,
        "validation:\n"
        "  steps:\n"
        "    - name: dcgm-r3\n"
        '      command: [dcgmi, diag, -r, "3", -j]\n'
        "      timeout_s: 2700\n"
        "      parser: dcgm_diag\n"
        "    - name: all-reduce\n"
        '      command: [all_reduce_perf, -b, 16G, -e, 16G, -g, "8"]\n'
        "      timeout_s: 600\n"
        "      parser: nccl_all_reduce\n"
        "      params: {min_bus_bw_gbs: {H200: 431}}\n"
        "    - name: burn\n"
        "      command: [/opt/site/gpu-burn, '60']\n"
        "      timeout_s: 120\n",
    )
    cfg = validation_config(load_settings())
    assert [s.name for s in cfg.steps] == ["dcgm-r3", "all-reduce", "burn"]
    assert cfg.steps[2].parser == "exit_code"  # any other command, by its exit code
    # The site's threshold per GPU model is what the step reads with.
    h200 = (DATA / "nccl_all_reduce_h200_8gpu.txt").read_text()
    assert cfg.steps[1].read(h200, "", 0).passed
    assert not DEFAULT_STEPS[1].read(h200, "", 0).passed


@pytest.mark.parametrize(
    ("yaml", "match"),
    [
        ("validation:\n  steps: []\n", r"validation\.steps is wrong"),
        (
            "validation:\n  steps:\n    - {name: a, command: [x], timeout_s: 0}\n",
            r"validation\.steps\.0\.timeout_s is wrong",
        ),
        (
            "validation:\n  steps:\n    - {name: a, command: [], timeout_s: 5}\n",
            r"validation\.steps\.0\.command is wrong",
        ),
        (
            "validation:\n  steps:\n    - {name: a, command: ['', x], timeout_s: 5}\n",
            r"list of non-empty arguments",
        ),
        (
            "validation:\n  steps:\n    - {name: a, command: [x], timeout_s: 5, parser: hpl}\n",
            r"validation\.steps\.0\.parser is wrong",
        ),
        (
            "validation:\n  steps:\n    - {name: a, command: [x], timeout_s: 5,"
            " parser: nccl_all_reduce, params: {min_busbw: 400}}\n",
            r"params\.min_busbw of the nccl_all_reduce parser",
        ),
        (
            "validation:\n  steps:\n    - {name: a, command: [x], timeout_s: 5,"
            " parser: ib_write_bw, params: {min_gbps: -1}}\n",
            r"params\.min_gbps of the ib_write_bw parser",
        ),
        (
            "validation:\n  steps:\n    - {name: a, command: [x], timeout_s: 5}\n"
            "    - {name: a, command: [y], timeout_s: 5}\n",
            r"step names must be unique",
        ),
        ("validation:\n  stepz: []\n", r"validation\.stepz is wrong"),
    ],
)
def test_a_wrong_suite_is_one_clear_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, yaml: str, match: str
) -> None:
    _with_config(tmp_path, monkeypatch, yaml)
    with pytest.raises(ConfigError, match=match):
        validation_config(load_settings())


def test_every_parser_name_is_in_the_table_and_its_defaults_validate() -> None:
    for name in PARSERS:
        step = StepConfig(name=name, command=("x",), timeout_s=5, parser=name)  # type: ignore[arg-type]
        assert step.params == {}
    with pytest.raises(ValidationError):
        ValidationConfig.model_validate({"steps": [{"name": "a", "command": ["x"]}]})
