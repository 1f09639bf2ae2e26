"""What the buttons on an alert do: acknowledge, silence, drain, resume; each one audited.

The listener has checked who may act before calling here (everyone may acknowledge; silencing,
draining and resuming need MEOWBOT_ADMINS). Every function returns an `Outcome`: the sentence
for the person, and the line for the alert's thread when something changed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.alerts.config import AlertsConfig
from bot.alerts.lines import audit_line
from bot.alerts.models import AlertGroup, AlertSource, Claim
from bot.alerts.policy import DRAIN_NOW, auto_drain, blast_radius, offered_actions
from bot.alerts.ports import AlertStore, Silencer, Update
from bot.errors import BackendError
from bot.ports import ResumeMemory, Scheduler
from bot.triage import actions as node_actions

CONFIRM_TTL_S = 15 * 60
NODE_LABELS = ("Hostname", "hostname", "node", "instance")


@dataclass(frozen=True)
class Actor:
    user_id: str
    user_name: str


@dataclass(frozen=True)
class Outcome:
    sentence: str
    thread_line: str | None = None  # posted in the alert's thread when set
    group: AlertGroup | None = None
    confirm_id: str | None = None  # a second authorised person must confirm this drain
    can_force: bool = False  # a resume refused for someone else's reason: offer "anyway"


async def _audit(store: AlertStore, actor: Actor, verb: str, gid: str, detail: str) -> None:
    await store.audit(
        {
            "verb": verb,
            "group": gid,
            "user": actor.user_id,
            "user_name": actor.user_name,
            "detail": detail,
        }
    )


async def acknowledge(store: AlertStore, gid: str, actor: Actor, now: datetime) -> Outcome:
    def claim(g: AlertGroup | None) -> Update[AlertGroup | None]:
        if g is None:
            return Update(None, None, dirty=False)
        new = g.model_copy(
            update={"claim": Claim(user_id=actor.user_id, user_name=actor.user_name, at=now)}
        )
        return Update(new, new, dirty=True)

    group = await store.update(gid, claim)
    if group is None:
        return Outcome("That alert is gone (resolved more than a week ago); nothing to claim.")
    # Read back: the stored group says who is on it (another press may have come between).
    group = await store.group(gid) or group
    held = group.claim
    if held is None or held.user_id != actor.user_id:
        who = f"@{held.user_name}" if held is not None else "nobody"
        return Outcome(f"The alert did not take your claim: it shows {who} on it.", group=group)
    await _audit(store, actor, "acknowledge", gid, "")
    return Outcome(
        f"You are on it: the alert shows @{actor.user_name} on it since {_when(held.at)}.",
        audit_line(actor.user_name, "acknowledged", "is on it"),
        group,
    )


def _when(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC"


def _matchers(group: AlertGroup) -> list[dict[str, str]]:
    """One silence per distinct Alertmanager alert: its name and the node label it carries."""
    seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for a in group.firing or group.alerts:
        if a.source is not AlertSource.ALERTMANAGER:
            continue
        m = {"alertname": a.labels.get("alertname", a.cause)}
        for label in NODE_LABELS:
            if label in a.labels:
                m[label] = a.labels[label]
                break
        seen.setdefault(tuple(sorted(m.items())), m)
    return list(seen.values())


async def silence(
    store: AlertStore,
    silencer: Silencer | None,
    gid: str,
    actor: Actor,
    duration_s: float,
    now: datetime,
) -> Outcome:
    group = await store.group(gid)
    if group is None:
        return Outcome("That alert is gone; nothing was silenced.")
    matchers = _matchers(group)
    if matchers and silencer is None:
        return Outcome("ALERTMANAGER_URL is not set, so I cannot silence Alertmanager's alerts.")
    until = now + timedelta(seconds=duration_s)
    ids: list[str] = []
    try:
        for m in matchers:
            ids.append(
                await silencer.create_silence(  # type: ignore[union-attr]
                    m, duration_s, actor.user_name, f"meowbot: silenced from Slack ({gid})"
                )
            )
    except BackendError as exc:
        return Outcome(f"I could not silence it: {exc.user_text()}")

    def silenced(g: AlertGroup | None) -> Update[AlertGroup | None]:
        if g is None:
            return Update(None, None, dirty=False)
        new = g.model_copy(update={"silenced_until": until})
        return Update(new, new, dirty=True)

    await store.update(gid, silenced)
    hours = duration_s / 3600
    span = f"{hours:g} h" if hours >= 1 else f"{duration_s / 60:g} min"
    where = f" ({len(ids)} silence{'s' if len(ids) != 1 else ''} in Alertmanager)" if ids else ""
    # Read back: what Alertmanager holds active, and what the stored group says.
    try:
        ends = [await silencer.silence_until(i) for i in ids]  # type: ignore[union-attr]
    except BackendError as exc:
        return Outcome(
            f"I created {len(ids)} silence(s) in Alertmanager but could not read them back: "
            f"{exc.user_text()}"
        )
    group = await store.group(gid)
    held = group.silenced_until if group is not None else None
    if any(e is None for e in ends) or held is None:
        lost = sum(e is None for e in ends)
        what = f"Alertmanager holds {len(ids) - lost} of {len(ids)} active" if lost else ""
        what = what or "the alert does not show the silence"
        await _audit(store, actor, "silence_incomplete", gid, f"{span} {','.join(ids)}")
        sentence = f"Asked to silence for {span}{where}, but {what}."
        return Outcome(sentence, audit_line(actor.user_name, "tried to silence", sentence), group)
    # Alertmanager's own end where it holds silences (the alert's was set a moment before).
    last = min(e for e in ends if e is not None) if ids else held
    await _audit(store, actor, "silence", gid, f"{span} {','.join(ids)}")
    return Outcome(
        f"Silenced for {span}{where}: silent until {_when(last)}.",
        audit_line(actor.user_name, "silenced", f"for {span}{where}"),
        group,
    )


async def drain(
    store: AlertStore,
    scheduler: Scheduler | None,
    cfg: AlertsConfig,
    gid: str,
    node: str,
    actor: Actor,
    now: datetime,
    fleet_size: int,
    *,
    confirmed_by_second: bool = False,
) -> Outcome:
    group = await store.group(gid)
    if group is None or node not in group.nodes:
        return Outcome(f"`{node}` is not part of that alert; nothing was changed.")
    if not confirmed_by_second:
        recent = await store.drains_since(now.timestamp() - 3600)
        decision = blast_radius(recent, fleet_size, cfg.drain_share_per_hour)
        if not decision.allowed:
            pid = secrets.token_hex(8)
            await store.put_pending(
                pid, {"group": gid, "node": node, "by": actor.user_id}, CONFIRM_TTL_S
            )
            await _audit(store, actor, "drain_needs_confirmation", gid, node)
            return Outcome(
                decision.sentence,
                audit_line(actor.user_name, "asked to drain", f"`{node}`: needs a second person"),
                group,
                confirm_id=pid,
            )
    # The group's severity, not the button, says whether running jobs may finish first.
    at_once = DRAIN_NOW in offered_actions(group)
    done = await node_actions.drain(scheduler, node, group.key.cause, actor.user_name, now=at_once)
    if not done.changed:
        # Nothing done, often because the node's state changed since the message was drawn:
        # the group comes back so that its message is redrawn with the state as it is.
        return Outcome(done.sentence, group=group)
    # Something changed (read back): recorded, and said as it stands.
    await store.record_drain(node, now.timestamp())
    if done.ok:
        verb = "set down" if at_once else "drained"
        await _audit(store, actor, "drain_now" if at_once else "drain", gid, node)
        return Outcome(done.sentence, audit_line(actor.user_name, verb, f"`{node}`"), group)
    await _audit(store, actor, "drain_incomplete", gid, node)
    line = audit_line(actor.user_name, "tried to drain", done.sentence)
    return Outcome(done.sentence, line, group)


async def confirm_drain(
    store: AlertStore,
    scheduler: Scheduler | None,
    cfg: AlertsConfig,
    pid: str,
    actor: Actor,
    now: datetime,
    fleet_size: int,
) -> Outcome:
    pending = await store.take_pending(pid)
    if pending is None:
        return Outcome("That drain request expired or was already confirmed.")
    if pending["by"] == actor.user_id:
        # Put it back: the asker cannot be the second person.
        await store.put_pending(pid, pending, CONFIRM_TTL_S)
        return Outcome("A second person must confirm: you asked for this drain yourself.")
    return await drain(
        store,
        scheduler,
        cfg,
        str(pending["group"]),
        str(pending["node"]),
        actor,
        now,
        fleet_size,
        confirmed_by_second=True,
    )


async def resume(
    store: AlertStore,
    scheduler: Scheduler | None,
    gid: str,
    node: str,
    actor: Actor,
    *,
    force: bool = False,
    memory: ResumeMemory | None = None,
) -> Outcome:
    """Resumes a node of the group; `force` is the person's confirmation for a node that
    someone else took out (an operator's reason), which is otherwise refused. `memory` keeps
    the resume, so the Xids the node was taken out for do not drain it again."""
    group = await store.group(gid)
    if group is None or node not in group.nodes:
        return Outcome(f"`{node}` is not part of that alert; nothing was changed.")
    done = await node_actions.resume(scheduler, node, actor.user_name, force=force, memory=memory)
    if not done.changed:
        # Nothing changed (read back): nothing audited, nothing said in the thread; the group
        # comes back so that its message is redrawn with the state as it is.
        return Outcome(done.sentence, group=group, can_force=done.can_force)
    if not done.ok:
        await _audit(store, actor, "resume_incomplete", gid, node)
        line = audit_line(actor.user_name, "tried to resume", done.sentence)
        return Outcome(done.sentence, line, group)
    await _audit(store, actor, "resume_confirmed" if force else "resume", gid, node)
    verb = "resumed (confirmed over another's reason)" if force else "resumed"
    return Outcome(done.sentence, audit_line(actor.user_name, verb, f"`{node}`"), group)


AUTO_ACTOR = Actor("meowbot", "meowbot-auto-drain")


async def auto_drain_group(
    store: AlertStore,
    scheduler: Scheduler | None,
    cfg: AlertsConfig,
    group: AlertGroup,
    now: datetime,
    fleet_size: int,
) -> list[str]:
    """Drains the group's firing nodes not yet tried, when policy names its cause; the
    thread lines to post. Each node is tried once per group (`claim_auto_drain`), and the
    hourly limit holds: past it nothing is drained and the thread says a person must act."""
    if scheduler is None or not auto_drain(group, cfg):
        return []
    lines: list[str] = []
    gid = group.key.id
    for node in sorted({a.node for a in group.firing if a.node}):
        if not await store.claim_auto_drain(gid, node):
            continue
        recent = await store.drains_since(now.timestamp() - 3600)
        decision = blast_radius(recent, fleet_size, cfg.drain_share_per_hour)
        if not decision.allowed:
            await _audit(store, AUTO_ACTOR, "auto_drain_held", gid, node)
            lines.append(
                audit_line(
                    AUTO_ACTOR.user_name, "held", f"`{node}` not drained: {decision.sentence}"
                )
            )
            continue
        out = await drain(
            store, scheduler, cfg, gid, node, AUTO_ACTOR, now, fleet_size, confirmed_by_second=True
        )
        if out.thread_line:
            lines.append(out.thread_line)
        else:
            lines.append(audit_line(AUTO_ACTOR.user_name, "did not drain", out.sentence))
    return lines
