"""The doctor's Slurm lines: slurmrestd reachable, its Slurm release and the REST API meowbot
detected; whose token SLURM_JWT is and until when; the nodes slurmrestd lists; how a drain
reaches slurmctld (REST, or scontrol where the API cannot update nodes); and whether this
identity may drain.

Slurm has no "may I" call. slurmctld checks an update_node request's rights before it looks at
the node names (src/slurmctld/proc_req.c, `_slurm_rpc_update_node`: root, SlurmUser or
AdminLevel=Admin, from 22.05 to 25.11), so a drain of a node that cannot exist, sent the way a
real drain goes, is answered "Invalid node name specified" to an identity that may drain and
"Invalid user id" (a security violation in slurmctld's log) to one that may not: nothing is
changed either way. Any other answer is said as unknown, never as a pass."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bot.backends.slurm import SlurmAbout, SlurmApi, SlurmRest
from bot.doctor.report import Line, Status
from bot.errors import BackendError
from bot.ports import SchedulerNode

PART = "Slurm"
PROBE_NODE = "meowbot-doctor-no-such-node"
"""The node the rights probe drains: checked absent from slurmrestd's list first, and one name
(a hostlist of several names is updated up to the first unknown one)."""
PROBE_REASON = "meowbot: doctor's rights probe (no such node)"
MAY = ("Invalid node name",)  # ESLURM_INVALID_NODE_NAME: past the rights check
MAY_NOT = ("Invalid user id", "Access/permission denied")  # ESLURM_USER_ID_MISSING, _ACCESS_DENIED
TOKEN_WARN_S = 7 * 86400.0
"""A token that ends sooner is said: meowbot reads SLURM_JWT once, at start."""


def _when(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M} UTC"


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{max(seconds, 0.0) / 60:.0f} min"


def token_user(claims: Mapping[str, Any] | None) -> str | None:
    """The Slurm user a token stands for: `sun`, else `username` (auth/jwt's order)."""
    user = (claims or {}).get("sun") or (claims or {}).get("username")
    return user if isinstance(user, str) and user else None


def server_line(url: str, api: SlurmApi, about: SlurmAbout) -> Line:
    """slurmrestd answered: its release, the API meowbot reads, and the controllers' pings."""
    release = about.release or "an unknown release"
    said = f"{url}: Slurm {release}, REST API {api.version}"
    down = [host for host, state in about.controllers if state != "UP"]
    if about.controllers and len(down) == len(about.controllers):
        return Line(
            PART,
            "slurmrestd",
            Status.FAIL,
            f"{said}; no slurmctld answers its ping ({', '.join(down)})",
            "start slurmctld, or check that slurmrestd's slurm.conf names it",
        )
    if down:
        return Line(
            PART,
            "slurmrestd",
            Status.WARN,
            f"{said}; {', '.join(down)} does not answer its ping",
            "a controller is down: look at it before it is the only one",
        )
    return Line(PART, "slurmrestd", Status.PASS, said)


def token_line(user: str, claims: Mapping[str, Any] | None, now: datetime) -> Line:
    """SLURM_USER against the token's own user (`sun`) and its expiry (`exp`)."""
    make = f"scontrol token username={user} lifespan=<seconds>"
    if claims is None:
        return Line(PART, "token", Status.FAIL, "SLURM_JWT is not a JWT", f"set it to `{make}`")
    sun = token_user(claims)
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        return Line(
            PART,
            "token",
            Status.FAIL,
            "SLURM_JWT has no expiry (exp): slurmctld refuses it as expired",
            f"make one with `{make}`",
        )
    ends = datetime.fromtimestamp(exp, UTC)
    left = exp - now.timestamp()
    if left <= 0:
        return Line(
            PART,
            "token",
            Status.FAIL,
            f"SLURM_JWT expired {_when(ends)}",
            f"make a new one: `{make}`",
        )
    if sun != user:
        return Line(
            PART,
            "token",
            Status.WARN,
            f"SLURM_USER is {user} but the token is {sun or 'nobody'}'s: slurmrestd acts as "
            f"{user} only if {sun or 'that user'} is root or SlurmUser, and a drain through "
            "scontrol acts as the token's user",
            f"make the token for SLURM_USER: `{make}`",
        )
    said = f"SLURM_USER {user}, the token's own user, valid until {_when(ends)}"
    if left < TOKEN_WARN_S:
        return Line(
            PART,
            "token",
            Status.WARN,
            f"{said}: {_span(left)} left",
            f"make a longer one (`{make}`) and restart meowbot before this one ends: it reads "
            "SLURM_JWT once, at start",
        )
    return Line(PART, "token", Status.PASS, said)


def nodes_line(nodes: Mapping[str, SchedulerNode], user: str) -> Line:
    if not nodes:
        return Line(
            PART,
            "nodes",
            Status.WARN,
            f"slurmrestd lists no node to {user}: no node can be drained or resumed",
            "check slurm.conf's NodeName lines, and that PrivateData=nodes does not hide them "
            "from this user",
        )
    out = sum(1 for node in nodes.values() if node.out_of_service)
    said = f"{len(nodes)} listed, {out} drained or down"
    return Line(PART, "nodes", Status.PASS, said)


def drain_path_line(api: SlurmApi, scontrol: str, found: str | None) -> Line:
    """How a drain reaches slurmctld: the REST API's node update, or scontrol (`found`: where
    it is on PATH, None when it is not)."""
    if api.node_update:
        return Line(PART, "drain path", Status.PASS, f"the REST API's node update ({api.version})")
    if found is None:
        return Line(
            PART,
            "drain path",
            Status.FAIL,
            f"REST API {api.version} cannot update nodes, so drain and resume run {scontrol}, "
            "which is not on PATH: every Drain and Resume fails",
            "install slurm-client (meowbot's image has it) with a slurm.conf (SLURM_CONF) "
            "that names slurmctld",
        )
    said = f"scontrol at {found} (REST API {api.version} cannot update nodes)"
    return Line(PART, "drain path", Status.PASS, said)


def may_drain_line(who: str, answer: str | None) -> Line:
    """The probe's answer (the error it came back with; None: no error) judged: one of the
    two shapes slurmctld gives, or unknown."""
    what = "may drain"
    text = answer or "no error"
    refused = next((shape for shape in MAY_NOT if shape in text), None)
    if answer is not None and any(shape in answer for shape in MAY):
        return Line(
            PART,
            what,
            Status.PASS,
            f"{who} may update nodes: slurmctld took a drain of a node that does not exist "
            "past its rights check (nothing changed)",
        )
    if answer is not None and refused is not None:
        return Line(
            PART,
            what,
            Status.FAIL,
            f"slurmctld refuses node updates from {who} ({refused}): every Drain and Resume "
            "meowbot sends is refused",
            f"make {who} a Slurm admin (`sacctmgr modify user {who} set adminlevel=admin`: "
            "Operator is not enough), or give meowbot a token of root or SlurmUser",
        )
    return Line(
        PART,
        what,
        Status.WARN,
        f"unknown: a drain of a node that does not exist came back neither refused nor past "
        f"the rights check: {text}",
        f"send the same drain by hand as meowbot does (`scontrol update nodename={PROBE_NODE} "
        "state=drain reason=probe` with SLURM_JWT and SLURM_CONF set, or the REST API's node "
        "update) and read what slurmctld says",
    )


async def _probe(slurm: SlurmRest) -> str | None:
    try:
        await slurm.drain(PROBE_NODE, PROBE_REASON)
    except BackendError as exc:
        return exc.sentence
    return None


async def slurm_lines(
    slurm: SlurmRest | None, problem: str | None = None, now: datetime | None = None
) -> list[Line]:
    """`problem`: why the adapter could not be built from the settings (no SLURM_JWT)."""
    if problem:
        return [
            Line(
                PART,
                "configured",
                Status.FAIL,
                problem,
                "set SLURM_JWT (`scontrol token username=<SLURM_USER> lifespan=<seconds>`) and "
                "SLURM_USER",
            )
        ]
    if slurm is None:
        return [Line(PART, "configured", Status.OFF, "SLURM_REST_URL is not set")]
    claims = slurm.token_claims()
    token = token_line(slurm.user, claims, now or datetime.now(UTC))
    try:
        api = await slurm.api()
        about = await slurm.about()
    except BackendError as exc:
        said = f"{slurm.base_url}: {exc.sentence}"
        fix = (
            f"make a new token for SLURM_USER (`scontrol token username={slurm.user}`)"
            if "SLURM_JWT" in exc.sentence
            else "start slurmrestd, or correct SLURM_REST_URL"
        )
        return [Line(PART, "slurmrestd", Status.FAIL, said, fix), token]
    lines = [server_line(slurm.base_url, api, about), token]
    try:
        nodes = await slurm.nodes()
    except BackendError as exc:
        return [*lines, Line(PART, "nodes", Status.FAIL, exc.user_text(), "see above")]
    lines.append(nodes_line(nodes, slurm.user))
    found = None if api.node_update else shutil.which(slurm.scontrol)
    path = drain_path_line(api, slurm.scontrol, found)
    lines.append(path)
    if path.status is Status.FAIL:
        return lines
    # A drain over REST acts as SLURM_USER; scontrol sends only the token: its user.
    who = (None if api.node_update else token_user(claims)) or slurm.user
    if PROBE_NODE in nodes:
        said = f"a node is named {PROBE_NODE}: the probe would drain it, so it was not sent"
        lines.append(Line(PART, "may drain", Status.UNCHECKED, said))
        return lines
    lines.append(may_drain_line(who, await _probe(slurm)))
    return lines
