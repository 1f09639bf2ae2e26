"""Telling job owners, without services: the words, the once-per-job claim, the opt-out, the
unknown owner, and the DM within Block Kit's limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.backends.job_notice_store import MemoryJobNotices
from bot.backends.retries import BackgroundRetries
from bot.backends.slack_owners import SlackJobOwners
from bot.errors import BackendError
from bot.models import Job, JobState
from bot.ports import SchedulerNode
from bot.render.job_notice import JOB_NOTICE_STOP_ACTION, render_job_notice
from bot.shell.emulator import SlackEmulator, validate_blocks
from bot.triage.notice import Fate, JobNotice, fate, reason_words
from bot.triage.owners import TellingScheduler, Told, claim_key, running_on, tell_owners


def job(
    job_id: str,
    user: str,
    *nodes: str,
    requeue: bool | None = None,
    state: JobState = JobState.RUNNING,
) -> Job:
    return Job(
        job_id=job_id,
        name=f"train-{job_id}",
        user=user,
        state=state,
        nodes=nodes or ("gpu-0001",),
        start=datetime(2026, 1, 1, tzinfo=UTC),
        partition="gpu",
        gpus_per_node=8,
        requeue=requeue,
    )


class Owners:
    def __init__(
        self, people: dict[str, str], refuse: set[str] | None = None, fail_for_now: int = 0
    ) -> None:
        self.people = people
        self.refuse = refuse or set()
        self.fail_for_now = fail_for_now  # the next tells Slack fails to take (a 5xx)
        self.tries = 0
        self.sent: list[tuple[str, JobNotice]] = []

    async def slack_user(self, cluster_user: str) -> str | None:
        return self.people.get(cluster_user)

    async def tell(self, slack_user: str, notice: JobNotice) -> None:
        self.tries += 1
        if slack_user in self.refuse:
            raise BackendError("Slack", "refused the DM (channel_not_found).")
        if self.fail_for_now > 0:
            self.fail_for_now -= 1
            raise BackendError("Slack", "refused the DM (fatal_error).", retryable=True)
        self.sent.append((slack_user, notice))


def test_reasons_in_words() -> None:
    assert reason_words("meowbot: xid79 gpu3 by @ana") == (
        "Xid 79 (GPU has fallen off the bus) on GPU 3, by @ana"
    )
    assert reason_words("meowbot: ecc_dbe by @meowbot-auto-drain").endswith(
        ", by @meowbot-auto-drain"
    )
    assert "ecc_dbe" not in reason_words("meowbot: ecc_dbe by @ana")
    assert reason_words("bad DIMM (ops ticket 12)") == "bad DIMM (ops ticket 12)"


def test_what_becomes_of_the_job() -> None:
    assert fate(False, now=False) is Fate.FINISHES
    assert fate(None, now=False) is Fate.FINISHES
    assert fate(True, now=True) is Fate.REQUEUED
    assert fate(False, now=True) is Fate.KILLED
    assert fate(None, now=True) is Fate.STOPPED
    stopped = JobNotice("7", "x", "gpu-0001", "meowbot: xid79 by @ana", Fate.STOPPED)
    assert stopped.what_happens == (
        "It was stopped; it is requeued if it allows requeue, else resubmit it."
    )


def test_only_running_jobs_of_the_node_are_hit() -> None:
    jobs = [
        job("1", "ana", "gpu-0001", "gpu-0002"),
        job("2", "bob", "gpu-0002"),
        job("3", "bob", "gpu-0001", state=JobState.PENDING),
    ]
    assert [j.job_id for j in running_on(jobs, "gpu-0001")] == ["1"]


async def test_each_owner_once_opt_out_unknown_and_refused() -> None:
    owners = Owners({"ana": "U1", "bob": "U2", "carl": "U3", "dora": "U4"}, refuse={"U4"})
    ledger = MemoryJobNotices()
    await ledger.set_opted_out("U3", True)
    jobs = [
        job("1", "ana"),
        job("2", "bob", requeue=True),
        job("3", "carl"),
        job("4", "zed"),
        job("5", "dora"),
        job("6", "ana"),
    ]
    reason = "meowbot: xid79 gpu3 by @ana"
    told = await tell_owners(owners, ledger, jobs, "gpu-0001", reason, now=True)
    assert [(u, n.job_id, n.fate) for u, n in owners.sent] == [
        ("U1", "1", Fate.STOPPED),
        ("U2", "2", Fate.REQUEUED),
        ("U1", "6", Fate.STOPPED),
    ]
    assert (told.told, told.opted_out, told.unknown, told.failed) == (2, 1, ("zed",), 1)
    assert told.sentence() == (
        "2 job owners were told by DM (1 owner not found on Slack; 1 turned these messages off;"
        " 1 DM refused by Slack)."
    )
    # The same event again (another replica, a retried press): nobody twice.
    again = await tell_owners(owners, ledger, jobs, "gpu-0001", reason, now=True)
    # (Job 5, whose DM Slack refused, was claimed too: never sent twice is the rule.)
    assert len(owners.sent) == 3 and again.told == 0 and again.already == 4
    # A drain of the node first, then setting it down: a new event, told again.
    drained = await tell_owners(owners, ledger, jobs[:1], "gpu-0001", reason, now=False)
    assert drained.told == 1 and owners.sent[-1][1].fate is Fate.FINISHES


def test_claim_keys_differ_by_event_and_job() -> None:
    r = "meowbot: xid79 by @ana"
    keys = {
        claim_key("gpu-0001", r, now=False, job_id="1"),
        claim_key("gpu-0001", r, now=True, job_id="1"),
        claim_key("gpu-0001", r, now=False, job_id="2"),
        claim_key("gpu-0002", r, now=False, job_id="1"),
    }
    assert len(keys) == 4 and all(" " not in k for k in keys)


@pytest.mark.parametrize(
    ("told", "said"),
    [
        (Told(), "No job was running there, so nobody was told."),
        (Told(1, jobs=("1",)), "1 job owner was told by DM."),
        (
            Told(0, unknown=("zed", "zed"), jobs=("1", "2")),
            "0 job owners were told by DM (1 owner not found on Slack).",
        ),
        (
            Told(0, retrying=1, jobs=("1",)),
            "0 job owners were told by DM (1 DM Slack failed to take, to be tried again).",
        ),
    ],
)
def test_the_pressers_sentence(told: Told, said: str) -> None:
    assert told.sentence() == said


def test_the_dm_names_job_node_why_and_fate() -> None:
    n = JobNotice("4242", "train-<llm>", "gpu-0007", "meowbot: xid79 gpu3 by @ana", Fate.KILLED)
    msg = render_job_notice(n)
    assert validate_blocks(msg.blocks) == []
    body = msg.blocks[0]["text"]["text"]
    assert "`4242`" in body and "`gpu-0007`" in body and "train-&lt;llm&gt;" in body
    assert "Xid 79 (GPU has fallen off the bus) on GPU 3" in body
    assert "not requeued" in body and "set down" in body
    assert msg.blocks[-1]["elements"][0]["action_id"] == JOB_NOTICE_STOP_ACTION


class Cluster:
    """A scheduler of one node and its jobs, for the wrapper's order of things."""

    name = "Slurm"

    def __init__(self, jobs: list[Job]) -> None:
        self._jobs = jobs
        self.calls: list[str] = []

    async def nodes(self, names: object = None) -> dict[str, SchedulerNode]:
        return {"gpu-0001": SchedulerNode(name="gpu-0001", state="mixed")}

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        self.calls.append("jobs")
        return list(self._jobs)

    async def job(self, job_id: str) -> Job | None:
        return None

    async def previous_run(self, job: Job) -> Job | None:
        return None

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        self.calls.append(f"drain now={now}")
        self._jobs = []  # a node set down ends its jobs: read before, or nobody is told

    async def resume(self, node: str, *, force: bool = False) -> None: ...

    async def close(self) -> None: ...


class DownLedger(MemoryJobNotices):
    async def claim(self, key_: str, ttl_s: int) -> bool:
        raise BackendError("Redis", "cannot be reached (ConnectionError).")


async def test_the_jobs_are_read_before_the_drain_and_a_lost_ledger_is_said() -> None:
    cluster = Cluster([job("1", "ana")])
    owners = Owners({"ana": "U1"})
    told = await TellingScheduler(cluster, owners, MemoryJobNotices()).drain_and_tell(
        "gpu-0001", "meowbot: xid79 by @ana", now=True
    )
    assert cluster.calls == ["jobs", "drain now=True"] and told.told == 1
    lost = await TellingScheduler(Cluster([job("2", "ana")]), owners, DownLedger()).drain_and_tell(
        "gpu-0001", "meowbot: xid79 by @ana", now=True
    )
    assert lost.sentence() == (
        "The owners of its 1 job were not told: Redis cannot be reached (ConnectionError)."
    )


def fast_retries(tries: int = 3) -> BackgroundRetries:
    return BackgroundRetries(tries=tries, first_wait_s=0.01, max_wait_s=0.05)


async def until_idle(retries: BackgroundRetries) -> None:
    for _ in range(200):
        if not retries.waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the retries never finished")


async def test_a_dm_slack_fails_to_take_is_tried_again_and_sent_once() -> None:
    owners = Owners({"ana": "U1"}, fail_for_now=2)
    ledger, retries = MemoryJobNotices(), fast_retries()
    reason = "meowbot: xid79 by @ana"
    told = await tell_owners(
        owners, ledger, [job("1", "ana")], "gpu-0001", reason, now=False, retries=retries
    )
    assert (told.told, told.retrying, told.failed) == (0, 1, 0)
    await until_idle(retries)
    assert [(u, n.job_id) for u, n in owners.sent] == [("U1", "1")] and owners.tries == 3
    # Sent: claimed for good, so the same event again tells nobody.
    again = await tell_owners(owners, ledger, [job("1", "ana")], "gpu-0001", reason, now=False)
    assert again.already == 1 and len(owners.sent) == 1


async def test_tries_run_out_the_claim_stays_free_and_the_next_drain_tells() -> None:
    owners = Owners({"ana": "U1"}, fail_for_now=3)
    ledger, retries = MemoryJobNotices(), fast_retries(tries=2)
    reason = "meowbot: xid79 by @ana"
    await tell_owners(
        owners, ledger, [job("1", "ana")], "gpu-0001", reason, now=False, retries=retries
    )
    await until_idle(retries)
    assert owners.sent == [] and owners.tries == 3
    later = await tell_owners(owners, ledger, [job("1", "ana")], "gpu-0001", reason, now=False)
    assert later.told == 1 and len(owners.sent) == 1


async def test_a_refusal_for_good_is_not_tried_again() -> None:
    owners = Owners({"ana": "U1"}, refuse={"U1"})
    ledger, retries = MemoryJobNotices(), fast_retries()
    told = await tell_owners(
        owners, ledger, [job("1", "ana")], "gpu-0001", "meowbot: x", now=False, retries=retries
    )
    assert (told.failed, told.retrying, retries.waiting) == (1, 0, 0)
    again = await tell_owners(
        owners, ledger, [job("1", "ana")], "gpu-0001", "meowbot: x", now=False
    )
    assert again.already == 1 and owners.tries == 1


@pytest.fixture
async def emu() -> AsyncIterator[SlackEmulator]:
    emulator = SlackEmulator()
    await emulator.start()
    try:
        yield emulator
    finally:
        await emulator.stop()


async def test_slack_failing_for_now_is_retryable_and_refusing_for_good_is_not(
    emu: SlackEmulator,
) -> None:
    # slack_sdk waits out one 429 itself, as the app's client does (more there).
    client = AsyncWebClient(
        token=emu.bot_token,
        base_url=emu.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    owners = SlackJobOwners(client, render_job_notice)
    notice = JobNotice("1", "train-1", "gpu-0001", "meowbot: xid79", Fate.FINISHES)
    for method, status, error, count in (
        ("chat.postMessage", 500, "fatal_error", 1),
        ("chat.postMessage", 200, "fatal_error", 1),
        ("chat.postMessage", 429, "ratelimited", 2),  # still limited after slack_sdk's wait
        ("conversations.open", 503, "service_unavailable", 1),
    ):
        emu.fail_next(method, status=status, error=error, count=count)
        with pytest.raises(BackendError) as failed:
            await owners.tell("U0USER", notice)
        assert failed.value.retryable, (method, status, error)
    for error in ("user_not_found", "cannot_dm_bot", "user_disabled", "missing_scope"):
        emu.fail_next("conversations.open", status=200, error=error)
        with pytest.raises(BackendError) as refused:
            await owners.tell("U0USER", notice)
        assert not refused.value.retryable and error in str(refused.value)
    await owners.tell("U0USER", notice)  # Slack takes it again
    assert len(emu.messages("D0USER")) == 1


async def test_the_owner_who_drained_is_told_in_words_that_fit() -> None:
    """Ana drains a node where her own job and Bob's run: Bob learns that meowbot drained it;
    Ana is told too (her job is hit), as the one who drained it, and her answer says so."""
    from bot.acting import acting_as

    owners = Owners({"ana": "U1", "bob": "U2"})
    jobs = [job("1", "ana"), job("2", "bob")]
    reason = "meowbot: xid79 gpu3 by @ana"
    told = await tell_owners(
        owners, MemoryJobNotices(), jobs, "gpu-0001", reason, now=False, by="U1"
    )
    (ana, mine), (bob, theirs) = owners.sent
    assert (ana, mine.by_you, bob, theirs.by_you) == ("U1", True, "U2", False)
    assert told.yours == ("1",)
    assert told.sentence() == (
        "2 job owners were told by DM. Your own job 1 is among them: your DM says what "
        "becomes of it."
    )
    own = render_job_notice(mine)
    assert validate_blocks(own.blocks) == []
    body = own.blocks[0]["text"]["text"]
    assert body.startswith(":hourglass_flowing_sand: You drained `gpu-0001`, where your job")
    assert "which meowbot drained" not in body and "keeps running to its end" in body
    assert own.text.startswith("Your job 1 (train-1): you drained node gpu-0001, where it runs")
    other = render_job_notice(theirs).blocks[0]["text"]["text"]
    assert "which meowbot drained" in other
    down = render_job_notice(
        JobNotice("1", "", "gpu-0001", reason, Fate.REQUEUED, by_you=True)
    ).blocks[0]["text"]["text"]
    assert down.startswith(":octagonal_sign: You set `gpu-0001` down, where your job `1` ran.")

    # Through the scheduler wrapper, who pressed comes from the request under way.
    cluster = Cluster([job("7", "ana")])
    owners2 = Owners({"ana": "U1"})
    wrapped = TellingScheduler(cluster, owners2, MemoryJobNotices())
    with acting_as("U1"):
        said = await wrapped.drain_and_tell("gpu-0001", reason)
    assert said.yours == ("7",) and owners2.sent[0][1].by_you
    # Outside a request (the alerts' auto-drain) nobody pressed: the plain words.
    owners3 = Owners({"ana": "U1"})
    await TellingScheduler(Cluster([job("8", "ana")]), owners3, MemoryJobNotices()).drain_and_tell(
        "gpu-0001", reason
    )
    assert not owners3.sent[0][1].by_you
