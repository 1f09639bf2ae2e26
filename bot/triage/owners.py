"""Telling the owners of the jobs a drain hits: who, once, and not those who said no.

When meowbot takes a node out (a Drain button, a confirmed drain, "drain now", the alerts'
auto-drain), the owner of each job running there gets a DM: the job, the node, why, and what
becomes of the job (`bot/triage/notice.py`). Every drain goes through `TellingScheduler`, which
bot/app.py wraps around the scheduler adapter, so no path that drains can forget to tell.

Rules:
- The running jobs are read before the drain: a node set down ends them, and the scheduler
  then lists them as requeued (pending, on no node) or not at all.
- Once per job and drain event, across replicas: a claim in the shared ledger (Redis SET NX
  with a TTL) on node + event + job, the event being the mode (drain / down) and the reason.
  Three replicas processing the same press send one DM; a later "drain now" of a drained node
  is a new event (the job is stopped now) and is told again.
- A person who pressed "Stop these messages" is not told (the ledger keeps the opt-out).
- The owner who drained the node themselves is still told what becomes of their job (a node
  set down stops it), in words that fit: "you drained gpu-0042, where your job 1234 runs";
  who pressed comes from the request under way (bot/acting.py).
- An owner with no Slack user is logged and skipped: not an error to the person who drained,
  whose answer says how many were told.
- A DM Slack fails to take for now (5xx, a timeout, `ratelimited` after slack_sdk's own waits,
  `fatal_error`) gives its claim back and is tried again off the request path, with backoff
  (`Retries`, bot/backends/retries.py): each try claims anew, so whichever replica or later
  drain of the same event claims first sends it, once. Tries run out: the claim stays free and
  the next drain of the event tells. A DM Slack refuses for good (`user_not_found`,
  `cannot_dm_bot`, a missing scope) keeps its claim, is logged once and never tried again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from bot import words
from bot.acting import acting_user
from bot.errors import BackendError
from bot.models import Job, JobState
from bot.ports import Scheduler, SchedulerNode, Sided
from bot.triage.notice import JobNotice, fate
from bot.triage.ports import JobNoticeLedger, JobOwners, Retries

log = logging.getLogger(__name__)

# Longer than any retry or replay of the same press; short enough that the same drain a day
# later (after a resume) tells the jobs then running there.
CLAIM_TTL_S = 86400


class JobNoticesConfig(BaseModel):
    """`job_notices:` in MEOWBOT_CONFIG."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    email_domain: str = ""  # `<cluster user>@<domain>` is the owner's Slack email, when set


@dataclass(frozen=True)
class Told:
    """What became of the owners of the jobs a drain hit."""

    told: int = 0  # people sent a DM (one a job: an owner of two jobs there gets two)
    opted_out: int = 0
    unknown: tuple[str, ...] = ()  # cluster users with no Slack user
    already: int = 0  # jobs another replica (or an earlier press) told about
    failed: int = 0  # DMs Slack refused for good
    retrying: int = 0  # DMs Slack failed to take for now: tried again shortly
    jobs: tuple[str, ...] = field(default=())  # ids of the running jobs the drain hit
    yours: tuple[str, ...] = field(default=())  # those of them the person who drained owns
    error: str = ""  # why nobody could be told (the shared ledger or Slack out of reach)

    def sentence(self) -> str:
        """`2 job owners were told by DM (1 not found on Slack).`: for the person who drained."""
        if not self.jobs:
            return "No job was running there, so nobody was told."
        if self.error:
            jobs = words.count(len(self.jobs), "job")
            return f"The owners of its {jobs} were not told: {self.error}"
        told = f"{words.count(self.told, 'job owner')} {words.plural(self.told, 'was', 'were')}"
        notes = [
            f"{words.count(len(set(self.unknown)), 'owner')} not found on Slack"
            if self.unknown
            else "",
            f"{words.number(self.opted_out)} turned these messages off" if self.opted_out else "",
            f"{words.number(self.already)} told already" if self.already else "",
            f"{words.count(self.failed, 'DM')} refused by Slack" if self.failed else "",
            f"{words.count(self.retrying, 'DM')} Slack failed to take, to be tried again"
            if self.retrying
            else "",
        ]
        said = "; ".join(n for n in notes if n)
        mine = ""
        if self.yours:
            ids = ", ".join(self.yours)
            job = words.plural(len(self.yours), "job")
            mine = f" Your own {job} {ids} {words.plural(len(self.yours), 'is', 'are')} "
            them = words.plural(len(self.yours), "it", "them")
            mine += f"among them: your DM says what becomes of {them}."
        return f"{told} told by DM" + (f" ({said})." if said else ".") + mine


def running_on(jobs: Sequence[Job], node: str) -> list[Job]:
    return [j for j in jobs if j.state is JobState.RUNNING and node in j.nodes]


def claim_key(node: str, reason: str, *, now: bool, job_id: str) -> str:
    # The reason can be long and carries spaces: hashed, so the key stays short and plain.
    event = hashlib.sha256(f"{'down' if now else 'drain'}\n{reason}".encode()).hexdigest()[:16]
    return f"{node}:{event}:{job_id}"


class Delivery(StrEnum):
    SENT = "sent"
    ALREADY = "already"  # claimed by another replica or an earlier drain of the event
    REFUSED = "refused"  # for good: kept claimed, never tried again
    AGAIN = "again"  # Slack failed for now: the claim is given back


async def deliver(
    owners: JobOwners, ledger: JobNoticeLedger, key: str, slack_user: str, notice: JobNotice
) -> Delivery:
    """One try at one DM: claim it, send it; Slack failing for now gives the claim back."""
    if not await ledger.claim(key, CLAIM_TTL_S):
        return Delivery.ALREADY
    try:
        await owners.tell(slack_user, notice)
    except BackendError as exc:
        said = {"job": notice.job_id, "user": slack_user, "node": notice.node, "error": str(exc)}
        if not exc.retryable:
            log.warning("job owner DM refused by Slack; not tried again", extra=said)
            return Delivery.REFUSED
        log.info("job owner DM failed for now; claim given back", extra=said)
        await ledger.release(key)
        return Delivery.AGAIN
    return Delivery.SENT


async def tell_owners(
    owners: JobOwners,
    ledger: JobNoticeLedger,
    jobs: Sequence[Job],
    node: str,
    reason: str,
    *,
    now: bool,
    retries: Retries | None = None,
    by: str = "",
) -> Told:
    """DMs the owner of each of `jobs` (the running jobs of `node`, read before the drain); a DM
    Slack failed to take for now goes to `retries` (without them, it waits for the next drain
    of the same event). `by`: the Slack id of the person who drained, whose own jobs' DMs
    say that they drained it."""
    opted = already = failed = again = 0
    unknown: list[str] = []
    told: set[str] = set()
    yours: list[str] = []
    for job in jobs:
        slack_user = await owners.slack_user(job.user) if job.user else None
        if slack_user is None:
            log.info(
                "job owner not found on Slack; not told",
                extra={"job": job.job_id, "cluster_user": job.user, "node": node},
            )
            unknown.append(job.user)
            continue
        if await ledger.opted_out(slack_user):
            opted += 1
            continue
        key = claim_key(node, reason, now=now, job_id=job.job_id)
        mine = bool(by) and slack_user == by
        notice = JobNotice(
            job.job_id, job.name, node, reason, fate(job.requeue, now=now), by_you=mine
        )
        done = await deliver(owners, ledger, key, slack_user, notice)
        if done is Delivery.ALREADY:
            already += 1
        elif done is Delivery.REFUSED:
            failed += 1
        elif done is Delivery.AGAIN:
            again += 1
            if retries is not None:
                retries.later(
                    _again(owners, ledger, key, slack_user, notice),
                    {"job": job.job_id, "user": slack_user, "node": node},
                )
        else:
            told.add(slack_user)
            if mine:
                yours.append(job.job_id)
    return Told(
        told=len(told),
        opted_out=opted,
        unknown=tuple(unknown),
        already=already,
        failed=failed,
        retrying=again,
        jobs=tuple(j.job_id for j in jobs),
        yours=tuple(yours),
    )


def _again(
    owners: JobOwners, ledger: JobNoticeLedger, key: str, slack_user: str, notice: JobNotice
) -> Callable[[], Awaitable[bool]]:
    async def attempt() -> bool:
        # Turned off meanwhile: nothing left to send.
        if await ledger.opted_out(slack_user):
            return True
        return await deliver(owners, ledger, key, slack_user, notice) is not Delivery.AGAIN

    return attempt


class TellingScheduler:
    """The scheduler meowbot drains through: a drain the scheduler accepted tells the owners
    of the jobs running on the node. Every other call goes to the adapter as it is."""

    def __init__(
        self,
        inner: Scheduler,
        owners: JobOwners,
        ledger: JobNoticeLedger,
        retries: Retries | None = None,
    ) -> None:
        self.inner = inner
        self.owners = owners
        self.ledger = ledger
        self.retries = retries
        self.name = inner.name

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SchedulerNode]:
        return await self.inner.nodes(names)

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        return await self.inner.jobs(user=user)

    async def job(self, job_id: str) -> Job | None:
        return await self.inner.job(job_id)

    async def last_finished(self, user: str) -> Job | None:
        return await self.inner.last_finished(user)

    async def previous_run(self, job: Job) -> Job | None:
        return await self.inner.previous_run(job)

    async def resume(self, node: str, *, force: bool = False) -> None:
        await self.inner.resume(node, force=force)

    async def sides(self, names: Sequence[str]) -> dict[str, dict[str, SchedulerNode]]:
        if isinstance(self.inner, Sided):
            return await self.inner.sides(names)
        return {self.inner.name: await self.inner.nodes(names)}

    async def close(self) -> None:
        if self.retries is not None:
            await self.retries.close()
        await self.inner.close()

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        await self.drain_and_tell(node, reason, now=now)

    async def drain_and_tell(self, node: str, reason: str, *, now: bool = False) -> Told:
        """Drains (or sets down) `node`, then tells its jobs' owners. A failed read of the jobs
        does not stop the drain (the node is broken either way): nobody is told, and it is
        logged."""
        try:
            hit = running_on(await self.inner.jobs(), node)
        except BackendError as exc:
            log.warning(
                "jobs on a drained node unknown; owners not told",
                extra={"node": node, "error": str(exc)},
            )
            hit = []
        await self.inner.drain(node, reason, now=now)
        if not hit:
            return Told()
        try:
            return await tell_owners(
                self.owners,
                self.ledger,
                hit,
                node,
                reason,
                now=now,
                retries=self.retries,
                by=acting_user(),
            )
        except BackendError as exc:
            # The drain is done: what failed is the telling, and the answer says so.
            log.warning("job owners not told", extra={"node": node, "error": str(exc)})
            return Told(jobs=tuple(j.job_id for j in hit), error=exc.user_text())
