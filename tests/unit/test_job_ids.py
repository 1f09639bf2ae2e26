"""/job-slow's job ids: Slurm's numbers and Kubernetes' namespace/kind/name, nothing else."""

from __future__ import annotations

import pytest

from bot import metric_names as m
from bot.backends.kubernetes_jobs import Owner
from bot.backends.prometheus import step_selector
from bot.triage.job_ids import check_job_id, is_kubernetes_id
from bot.triage.jobs import parse_job_id
from bot.triage.service import UserError
from bot.triage.stragglers import StragglerConfig
from bot.triage.table import node_in

CFG = StragglerConfig()


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        ("4100123", "4100123"),
        ("4100123_7", "4100123_7"),
        ("team-a/pytorchjob/llm-7b", "team-a/pytorchjob/llm-7b"),
        # People write the kind as its manifest does; the adapter writes it lower-cased.
        ("team-a/PyTorchJob/llm-7b", "team-a/pytorchjob/llm-7b"),
        ("  u-ana/jobset/llm  ", "u-ana/jobset/llm"),
        ("default/job/bert.v2-run3", "default/job/bert.v2-run3"),
        ("a/mpijob/" + "x" * 253, "a/mpijob/" + "x" * 253),
        ("n" * 63 + "/pod/notebook", "n" * 63 + "/pod/notebook"),
    ],
)
def test_slurm_and_kubernetes_ids_are_taken(text: str, job_id: str) -> None:
    assert parse_job_id(text) == job_id


def test_the_adapters_ids_are_taken_as_they_are() -> None:
    owner = Owner("team-a", "kubeflow.org/v1", "PyTorchJob", "llm-7b")
    assert check_job_id(owner.job_id) == owner.job_id == "team-a/pytorchjob/llm-7b"
    assert is_kubernetes_id(owner.job_id) and not is_kubernetes_id("4100123")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "give the number Slurm shows"),
        ("team-a/pytorchjob", "namespace/kind/name"),
        ("team-a/pytorchjob/llm/7b", "namespace/kind/name"),
        ("team-a pytorchjob llm-7b", "namespace/kind/name"),
        ("Team-A/pytorchjob/llm-7b", "namespace is lower-case"),
        ("-team/pytorchjob/llm-7b", "namespace is lower-case"),
        ("n" * 64 + "/job/x", "at most 63"),
        ("team-a/pytorch-job/llm-7b", "kind is one word"),
        ("team-a/7job/llm-7b", "kind is one word"),
        ("team-a//llm-7b", "kind is one word"),
        ("team-a/job/LLM", "name is lower-case"),
        ("team-a/job/llm-", "name is lower-case"),
        ("team-a/job/" + "x" * 254, "at most 253"),
        ("team-a/job/", "name is lower-case"),
        # PromQL and label-matcher injection: quotes, braces, regex, `or`, comments.
        ('team-a/job/x"} or vector(1) #', "namespace/kind/name"),
        ('team-a/job/x"}', "name is lower-case"),
        ("team-a/job/.*", "name is lower-case"),
        ("team-a/job/x|y", "name is lower-case"),
        ('team-a"/job/x', "namespace is lower-case"),
        ("team-a/job{a=1}/x", "kind is one word"),
        ("team-a/job/x\\", "name is lower-case"),
        ('1"} or vector(1)', "give the number Slurm shows"),
        ("12_", "give the number Slurm shows"),
    ],
)
def test_anything_else_is_refused_with_a_sentence_saying_why(text: str, why: str) -> None:
    answer = parse_job_id(text)
    assert isinstance(answer, UserError), answer
    assert "is not a job id" in answer.sentence and why in answer.sentence, answer.sentence
    # The text is shown in a code span, escaped: it never pings or links.
    assert "<" not in answer.sentence.replace("&lt;", "")


def test_a_kubernetes_id_selects_its_step_times_by_the_job_id_label() -> None:
    sel = step_selector("team-a/pytorchjob/llm-7b", CFG)
    assert sel == f'{m.TRAINING_STEP_TIME_SECONDS}{{job_id="team-a/pytorchjob/llm-7b"}}'
    for bad in ('team-a/job/x"} or vector(1) #', "team-a/PyTorchJob/llm", "a/b/c/d"):
        with pytest.raises(ValueError, match="not a job id"):
            step_selector(bad, CFG)


def test_a_series_is_the_chosen_node_whichever_host_label_names_it() -> None:
    """dcgm-exporter in a pod off the host's network: Hostname is its own pod, instance the
    pod's address, the node only in the scrape's relabelled `node` label."""
    kube = {
        m.LABEL_HOSTNAME: "nvidia-dcgm-exporter-x7k2p",
        m.LABEL_INSTANCE: "10.244.3.17:9400",
        "node": "gpu-0042",
        "pod": "llm-7b-worker-3",
        "namespace": "team-a",
    }
    assert node_in(kube, {"gpu-0042", "gpu-0043"}) == "gpu-0042"
    assert node_in(kube, {"gpu-0042"}, node_label="kubernetes_node") == "nvidia-dcgm-exporter-x7k2p"
    relabelled = {**kube, "kubernetes_node": "gpu-0043"}
    assert node_in(relabelled, {"gpu-0043"}, node_label="kubernetes_node") == "gpu-0043"
    # On the host's network, Hostname is the node, as on a bare-metal host.
    assert node_in({**kube, m.LABEL_HOSTNAME: "gpu-0042"}, {"gpu-0042"}) == "gpu-0042"
    assert node_in({m.LABEL_INSTANCE: "gpu-0007:9100"}, {"gpu-0007"}) == "gpu-0007"
    # Not one of the chosen: the usual pick (the caller keeps or drops it).
    assert node_in(kube, {"gpu-0001"}) == "nvidia-dcgm-exporter-x7k2p"
