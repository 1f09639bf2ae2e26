"""Reading questions: what the corpus does not pin down one by one."""

from __future__ import annotations

from bot.ask.entities import Vocabulary, clean, extract
from bot.ask.models import DrainAsk, Entities, Intent, Menu, Route, Unsure
from bot.ask.service import read_question
from bot.ask.understand import Context, carried, understand
from bot.backends.thread_memory import MemoryThreadMemory
from bot.errors import BackendError
from bot.render.ask import render_drain_which
from tests.unit.test_ask_corpus import site


def test_slack_markup_is_read_as_the_words_it_shows() -> None:
    text = "<@U0MEOW> is <http://grafana/d/x|gpu-0042> ok? &lt;3 *now*"
    assert clean(text) == "is gpu-0042 ok? <3 now"


def test_apostrophes_are_not_quotes() -> None:
    e = extract("what's broken on rack 7, it's been a bad day", site())
    assert e.prompt is None and e.rack == "rack-07"
    assert extract("prompt tiny-gpt with 'what's up'", site()).prompt == "what's up"


def test_a_node_the_site_does_not_have_is_not_read_as_one() -> None:
    e = extract("is gpu-9999 ok? and dgx-0042?", site())
    assert e.nodes == ()


def test_drain_without_a_node_asks_which_node() -> None:
    for question, context in (
        ("drain everything now", None),
        ("drain it", None),
        ("drain it", Context(Intent.FAULTS, Entities(kind="xid"))),
        ("drain them", Context(Intent.NODE_HEALTH, Entities(nodes=("gpu-0001", "gpu-0002")))),
    ):
        found = understand(question, site(), context)
        assert isinstance(found, DrainAsk) and found.node is None, (question, found)
    # Several named: which of them (a Drain button is one node's).
    found = understand("drain gpu-0042 and gpu-0043", site())
    assert isinstance(found, DrainAsk) and found.node is None
    assert found.entities.nodes == ("gpu-0042", "gpu-0043")
    assert "`gpu-0042`, `gpu-0043`" in render_drain_which(found.entities.nodes).text


def test_a_dm_carries_its_last_question_only_into_a_follow_up() -> None:
    asked = Context(Intent.PLAYGROUND, Entities(run="tiny-zen", steps=(400, 500)))
    for follow_up in (
        "and yesterday?",
        "drain it",
        "what about its neighbours?",
        "gpu-0043?",
        "only rack 4?",
        "is it drained?",
        "and the kernel?",
    ):
        assert carried(follow_up, asked, in_thread=False) is asked, follow_up
    for afresh in (
        "are there any hardware faults right now?",
        "which nodes are down?",
        "what precedes reboots?",
        "is rack 12 ok?",
        "Do I cause a kernel panic when I send more than 30 Gbps over the NIC?",
        "show me the highlights",
    ):
        assert carried(afresh, asked, in_thread=False) is None, afresh
    # In a thread the conversation is the thread: its context always carries.
    assert carried("which nodes are down?", asked, in_thread=True) is asked
    assert carried("and yesterday?", None, in_thread=False) is None


def test_a_cause_named_beside_a_kernel_a_driver_or_a_rate_asks_what_precedes_it() -> None:
    for question, typed in (
        (
            "Do I cause a kernel panic when I send more than 30 Gbps over the NIC?",
            "/hw-faults why unexpected_reboot",
        ),
        ("is the new kernel behind the reboots?", "/hw-faults why unexpected_reboot"),
        ("does the 550 driver cause the xid 79s?", "/hw-faults why xid"),
    ):
        found = understand(question, site())
        assert isinstance(found, Route) and found.typed == typed, (question, found)
    rollout = understand("did the new kernel slow training down?", site())
    assert isinstance(rollout, Route) and rollout.typed == "/regressions kernel"


def test_a_new_question_in_a_thread_is_read_afresh() -> None:
    context = Context(Intent.FAULTS, Entities(kind="xid", since="2d"))
    found = understand("is gpu-0100 healthy?", site(), context)
    assert isinstance(found, Route) and found.typed == "/node-health gpu-0100"


def test_neighbours_without_a_topology_fall_back_to_the_thread() -> None:
    bare = Vocabulary.build([f"gpu-{i:04d}" for i in range(1, 9)])
    context = Context(Intent.NODE_HEALTH, Entities(nodes=("gpu-0002",)))
    found = understand("what about its neighbours?", bare, context)
    assert isinstance(found, Route) and found.typed == "/node-health gpu-0002"


def test_windows_beyond_what_a_command_reads_are_capped() -> None:
    found = understand("xid errors in the last 3 weeks", site())
    assert isinstance(found, Route) and found.typed == "/hw-faults xid --since 7d"
    assert found.entities.since == "21d"


def test_what_meowbot_does_not_do_gets_the_menu() -> None:
    for question in ("cancel my job 4100123", "kill job 4100123", "submit my job for me"):
        assert isinstance(understand(question, site()), Menu), question


class Babbler:
    """A model that answers, whatever it is asked, with `answer` (or fails)."""

    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.asked = 0

    async def complete(self, system: str, prompt: str, *, deadline_s: float) -> str:
        self.asked += 1
        if self.answer is None:
            raise BackendError("The model server", "did not answer.")
        return self.answer

    async def close(self) -> None:
        return None


async def test_the_model_is_asked_only_when_unsure_and_only_picks() -> None:
    vocab = site()
    sure = Babbler('{"intent": "regressions"}')
    assert isinstance(await read_question("is gpu-0042 ok?", vocab, picker=sure), Route)
    assert sure.asked == 0
    picks = Babbler('{"intent": "regressions", "entities": {"component": "kernel"}}')
    found = await read_question("is everything slow or is it just me", vocab, picker=picks)
    assert isinstance(found, Route) and found.typed == "/regressions kernel"
    for answer in (None, "no idea", '{"intent": "node_health"}'):
        found = await read_question(
            "is everything slow or is it just me", vocab, picker=Babbler(answer)
        )
        assert isinstance(found, Unsure), answer


async def test_the_thread_memory_without_redis() -> None:
    memory = MemoryThreadMemory()
    asked = Context(Intent.NODE_HEALTH, Entities(nodes=("gpu-0042",)))
    await memory.remember("T", "C", "1.1", asked)
    assert await memory.recall("T", "C", "1.1") == asked
    assert await memory.recall("T", "C", "1.2") is None


def test_a_kubernetes_job_is_read_as_its_id_and_a_link_is_not() -> None:
    found = understand("why is team-a/PyTorchJob/llm-7b so slow today?", site())
    assert isinstance(found, Route) and found.typed == "/job-slow team-a/pytorchjob/llm-7b"
    assert extract("see https://grafana/d/gpu for gpu-0042", site()).job is None
    # What the language model fills is held to the same ids.
    assert Entities(job="ml/job/train-42").job == "ml/job/train-42"
    for bad in ("4100123 or vector(1)", "Team/job/x", "a/b/c/d"):
        try:
            Entities(job=bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was taken as a job id")
