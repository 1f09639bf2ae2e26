"""The Slurm scheduler adapter, through slurmrestd (JWT auth), with scontrol for drains on 22.05.

The API version is detected from the OpenAPI spec the server offers (`GET /openapi/v3`, or
`/openapi` on older servers): the newest `slurm/v0.0.NN` it lists is used, and its paths are
taken from the spec (newer servers spell them with a trailing slash). Field names differ
between versions, so the JSON is read by small pure functions below that accept both shapes:

- v0.0.38 (Slurm 22.05): node `state` is the base state ("mixed") and `state_flags` the
  modifiers (["DRAIN"]); job `job_state` a string; times plain integers (0 = unset); `nodes`
  a hostlist string.
- v0.0.39 and later: node `state` is a list (["IDLE", "DRAIN"]), `job_state` a list, numbers
  `{"set": true, "infinite": false, "number": N}`, and `nodes` may come as a list.

Drain and resume: where the spec has `POST /slurm/v0.0.NN/node/{node_name}` (v0.0.39+), the
REST API updates the node. v0.0.38 has no node update ("Requested REST method is not defined"),
so there the adapter falls back to `scontrol update nodename=N state=drain reason=R`, run as a
subprocess with an argument list (never a shell), with `SLURM_CONF` set when configured and the
same token in `SLURM_JWT`, so scontrol acts as the same Slurm user as the REST calls. The
fallback is logged once per adapter.

Everything that goes into a URL or a command line is validated first: node names against a
strict pattern, job ids as digits, reasons as bot/drain_reason.py checks them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
import hostlist

from bot import drain_reason
from bot.backends.http import Deadline, request_json
from bot.errors import BackendError
from bot.models import Job, JobState
from bot.ports import SchedulerNode

log = logging.getLogger(__name__)

NAME = "Slurm"
NODE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
JOB_ID_RE = re.compile(r"^[0-9]{1,12}$")
MAX_HOSTLIST_NAMES = 100_000
"""A job's node list is never expanded past this many names (a hostlist is tiny to send and
can be huge to expand)."""

# slurmrestd answers its own errors as JSON with these statuses; anything else is the HTTP error.
_JSON_STATUSES = frozenset({200, 400, 404, 500})
_ERR_INVALID_JOB_ID = 2017
_ERR_INVALID_NODE_NAME = 2018

_BASE_NODE_STATES = frozenset(
    {"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "END", "INVALID"}
)

_JOB_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "CONFIGURING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "POWER_UP_NODE": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "DEADLINE": JobState.TIMEOUT,
    "TIMEOUT": JobState.TIMEOUT,
    "FAILED": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "PREEMPTED": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
}
# Base states win over flags when a list carries both (["RUNNING", "COMPLETING"]).
_JOB_FLAG_STATES = frozenset(
    {
        "COMPLETING",
        "CONFIGURING",
        "REQUEUED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "POWER_UP_NODE",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESV_DEL_HOLD",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)

_GPU_TRES_RE = re.compile(r"gres[:/]gpu(?::[A-Za-z0-9_.-]+)?[:=](\d+)")


# ---------------------------------------------------------------- validation (before any I/O)


def check_node_name(name: str) -> str:
    if not isinstance(name, str) or not NODE_NAME_RE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a node name: letters, digits, '.', '_' and '-' only, "
            "starting with a letter or digit, at most 63 characters."
        )
    return name


RESERVATION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def check_reservation(name: str) -> str:
    if not RESERVATION_RE.fullmatch(name):
        raise ValueError(f"not a reservation name: {name[:40]!r}")
    return name


def check_job_id(job_id: str) -> str:
    text = str(job_id).strip() if isinstance(job_id, str | int) else ""
    if not JOB_ID_RE.fullmatch(text):
        raise ValueError(f"{job_id!r} is not a Slurm job id: a job id is digits only.")
    return text


# ---------------------------------------------------------------- pure parsing of both versions


@dataclass(frozen=True)
class SlurmApi:
    """What the server's OpenAPI spec offers, for the newest slurm/v0.0.NN it lists."""

    version: str  # "v0.0.38"
    nodes_path: str
    node_path: str  # with "{node_name}"
    jobs_path: str
    job_path: str  # with "{job_id}"
    ping_path: str
    node_update: bool  # POST on node_path

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return _version_tuple(self.version)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.lstrip("v").split("."))


_PATH_RE = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/(.*?)/?$")


def parse_openapi(spec: Any) -> SlurmApi:
    """The newest slurm API version in an OpenAPI document, with its paths."""
    paths = spec.get("paths") if isinstance(spec, Mapping) else None
    if not isinstance(paths, Mapping):
        raise BackendError(NAME, "answered an OpenAPI document without paths.")
    by_version: dict[str, dict[str, tuple[str, set[str]]]] = {}
    for path, ops in paths.items():
        m = _PATH_RE.match(str(path))
        if not m:
            continue
        methods = {str(k).lower() for k in ops} if isinstance(ops, Mapping) else set()
        # Normalise the parameter names ("{node_name}", "{job_id}") to find the endpoints.
        key = re.sub(r"\{[^}]*\}", "{}", m.group(2))
        by_version.setdefault(m.group(1), {})[key] = (str(path), methods)
    usable = {v: eps for v, eps in by_version.items() if {"nodes", "jobs", "job/{}"} <= set(eps)}
    if not usable:
        raise BackendError(
            NAME, "does not offer a slurm/v0.0.NN REST API this bot can use (no jobs and nodes)."
        )
    version = max(usable, key=_version_tuple)
    eps = usable[version]
    node_path, node_methods = eps.get("node/{}", (f"/slurm/{version}/node/{{}}", set()))
    return SlurmApi(
        version=version,
        nodes_path=eps["nodes"][0],
        node_path=re.sub(r"\{[^}]*\}", "{node_name}", node_path),
        jobs_path=eps["jobs"][0],
        job_path=re.sub(r"\{[^}]*\}", "{job_id}", eps["job/{}"][0]),
        ping_path=eps.get("ping", (f"/slurm/{version}/ping", set()))[0],
        node_update="post" in node_methods,
    )


def parse_number(value: Any) -> int | None:
    """A plain int (0 or negative means unset) or a v0.0.39+ `{"set", "infinite", "number"}`."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def parse_time(value: Any) -> datetime | None:
    """Epoch seconds in either shape, as a UTC datetime; unset, 0 or infinite is None."""
    seconds = parse_number(value)
    if seconds is None or seconds <= 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, Sequence):
        return [str(v) for v in value if v is not None and str(v)]
    return [str(value)]


def parse_node_state(raw: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(base state lower case, modifier flags upper case) from either version's node JSON.

    v0.0.38: `state: "mixed"`, `state_flags: ["DRAIN"]`. v0.0.39+: `state: ["MIXED", "DRAIN"]`.
    """
    words = [w.upper() for w in _as_list(raw.get("state"))]
    flags = [w.upper() for w in _as_list(raw.get("state_flags"))]
    base = next((w for w in words if w in _BASE_NODE_STATES), None)
    if base is None and words:
        # An unknown word first is kept as the base rather than guessing.
        base = words[0]
    extra = [w for w in words if w != base]
    seen: dict[str, None] = {}
    for flag in [*extra, *flags]:
        seen.setdefault(flag, None)
    return (base or "UNKNOWN").lower(), tuple(seen)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def parse_node(raw: Mapping[str, Any]) -> SchedulerNode:
    state, flags = parse_node_state(raw)
    reason = _text(raw.get("reason"))
    return SchedulerNode(
        name=str(raw.get("name") or raw.get("hostname") or ""),
        state=state,
        flags=flags,
        reason=reason,
        reason_set_by=_text(raw.get("reason_set_by_user")) if reason else None,
        reason_changed_at=parse_time(raw.get("reason_changed_at")) if reason else None,
        booted_at=parse_time(raw.get("boot_time")),
    )


def hostlist_size(expr: str) -> int:
    """How many names a hostlist expression expands to, computed without expanding it."""
    total = 0
    depth = 0
    part: list[str] = []
    parts: list[str] = []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced brackets in hostlist {expr[:80]!r}")
        if ch == "," and depth == 0:
            parts.append("".join(part))
            part = []
        else:
            part.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced brackets in hostlist {expr[:80]!r}")
    parts.append("".join(part))
    for p in parts:
        if not p.strip():
            continue
        size = 1
        for group in re.findall(r"\[([^\]]*)\]", p):
            count = 0
            for item in group.split(","):
                lo, sep, hi = item.partition("-")
                if not lo.strip().isdigit() or (sep and not hi.strip().isdigit()):
                    raise ValueError(f"bad range {item!r} in hostlist {expr[:80]!r}")
                item_size = (int(hi) - int(lo) + 1) if sep else 1
                if item_size <= 0:
                    raise ValueError(f"bad range {item!r} in hostlist {expr[:80]!r}")
                count += item_size
            size *= count
        total += size
    return total


def expand_nodes(value: Any, *, cap: int = MAX_HOSTLIST_NAMES) -> tuple[str, ...]:
    """A job's node list (a hostlist string, or a list of them) as names, capped."""
    exprs = [e for e in _as_list(value) if e.strip() and e.strip() not in {"None", "(null)"}]
    if not exprs:
        return ()
    expr = ",".join(exprs)
    try:
        size = hostlist_size(expr)
    except ValueError as exc:
        raise BackendError(NAME, f"sent a node list that is not a hostlist ({exc}).") from exc
    if size > cap:
        raise BackendError(
            NAME, f"sent a node list of {size:,} names, more than the {cap:,} this bot expands."
        )
    try:
        return tuple(hostlist.expand_hostlist(expr))
    except hostlist.BadHostlist as exc:
        raise BackendError(NAME, f"sent a node list that is not a hostlist ({exc}).") from exc


def parse_job_state(value: Any) -> JobState:
    words = [w.upper() for w in _as_list(value)]
    base = [w for w in words if w in _JOB_STATES and w not in _JOB_FLAG_STATES]
    for word in [*base, *words]:
        if word in _JOB_STATES:
            return _JOB_STATES[word]
    return JobState.PENDING if not words else JobState.FAILED


def parse_gpus_per_node(raw: Mapping[str, Any], node_count: int) -> int:
    for key in ("tres_per_node", "gres_per_node"):
        m = _GPU_TRES_RE.search(str(raw.get(key) or ""))
        if m:
            return int(m.group(1))
    for key in ("tres_alloc_str", "tres_req_str"):
        m = _GPU_TRES_RE.search(str(raw.get(key) or ""))
        if m and node_count > 0:
            return int(m.group(1)) // node_count
    return 0


def parse_job(raw: Mapping[str, Any], *, cap: int = MAX_HOSTLIST_NAMES) -> Job:
    state = parse_job_state(raw.get("job_state", raw.get("state")))
    nodes = expand_nodes(raw.get("nodes"), cap=cap)
    submit = parse_time(raw.get("submit_time"))
    started = parse_time(raw.get("start_time"))
    start = submit if state is JobState.PENDING or started is None else started
    if start is None:
        start = started or datetime.now(UTC)
    end: datetime | None = None
    if state not in {JobState.PENDING, JobState.RUNNING}:
        end = parse_time(raw.get("end_time"))
        if end is not None and end < start:
            end = None
    user = _text(raw.get("user_name")) or str(parse_number(raw.get("user_id")) or "")
    node_count = parse_number(raw.get("node_count")) or len(nodes)
    return Job(
        job_id=str(parse_number(raw.get("job_id")) or raw.get("job_id") or ""),
        name=str(raw.get("name") or ""),
        user=user,
        state=state,
        nodes=nodes,
        start=start,
        end=end,
        partition=str(raw.get("partition") or ""),
        gpus_per_node=max(0, parse_gpus_per_node(raw, node_count)),
        requeue=raw["requeue"] if isinstance(raw.get("requeue"), bool) else None,
    )


@dataclass(frozen=True)
class SlurmAbout:
    """What slurmrestd's ping says: the Slurm release it runs, and each controller's state."""

    release: str | None  # "22.05.8"
    controllers: tuple[tuple[str, str], ...]  # (hostname, "UP"), as listed


def parse_ping(body: Any) -> SlurmAbout:
    """A ping answer of either shape: v0.0.38 `meta.Slurm.release` and `pings[].ping`, newer
    `meta.slurm.release` and `pings[].pinged`."""
    meta = body.get("meta") if isinstance(body, Mapping) else None
    slurm = (meta.get("Slurm") or meta.get("slurm")) if isinstance(meta, Mapping) else None
    release = _text(slurm.get("release")) if isinstance(slurm, Mapping) else None
    version = slurm.get("version") if isinstance(slurm, Mapping) else None
    if release is None and isinstance(version, Mapping):
        release = ".".join(str(version.get(k, "?")) for k in ("major", "minor", "micro"))
    pings = body.get("pings") if isinstance(body, Mapping) else None
    controllers = tuple(
        (_text(p.get("hostname")) or "?", (_text(p.get("pinged") or p.get("ping")) or "?").upper())
        for p in pings or []
        if isinstance(p, Mapping)
    )
    return SlurmAbout(release, controllers)


def jwt_claims(token: str) -> dict[str, Any] | None:
    """A JWT's claims, read without checking its signature (slurmctld checks it): `sun`, the
    Slurm user it stands for, and `exp`. None when `token` is not a JWT."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:  # bad base64 (binascii.Error), bytes or JSON
        return None
    return claims if isinstance(claims, dict) else None


def slurm_errors(body: Any) -> list[tuple[int | None, str]]:
    """(error number, description) of each entry in a slurmrestd `errors` list."""
    errors = body.get("errors") if isinstance(body, Mapping) else None
    out: list[tuple[int | None, str]] = []
    for err in errors or []:
        if not isinstance(err, Mapping):
            out.append((None, str(err)))
            continue
        number = err.get("error_number", err.get("errno"))
        text = _text(err.get("description")) or _text(err.get("error")) or "unspecified error"
        if _text(err.get("error")) and _text(err.get("description")) and err["error"] != text:
            text = f"{text}: {err['error']}"
        out.append((int(number) if isinstance(number, int) else None, text))
    return out


def _error_sentence(errors: list[tuple[int | None, str]], status: int) -> str:
    text = "; ".join(desc for _, desc in errors[:3])[:200] or f"HTTP {status} without details"
    hint = ""
    if "slurmctld config is unable to load" in text or (
        errors and all(num == -1 and desc == "Unspecified error" for num, desc in errors)
    ):
        # What 22.05's slurmrestd answers for a token slurmctld does not accept.
        hint = " (slurmrestd 22.05 answers this to a bad or expired SLURM_JWT)"
    return f"answered an error: {text}{hint}."


# ---------------------------------------------------------------- the adapter


class SlurmRest:
    """The `Scheduler` port over slurmrestd; `scontrol` for drain and resume where REST cannot."""

    name = NAME

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        user: str,
        session: aiohttp.ClientSession | None = None,
        timeout_s: float = 5.0,
        scontrol: str = "scontrol",
        slurm_conf: str | None = None,
    ) -> None:
        if not token:
            raise ValueError("Slurm needs a token (SLURM_JWT) for slurmrestd.")
        if not user or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}", user):
            raise ValueError("Slurm needs a user name (SLURM_USER) sent beside the token.")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._user = user
        self._session = session
        self._own_session = session is None
        self.timeout_s = timeout_s
        self._scontrol = scontrol
        self._slurm_conf = slurm_conf
        self._api: SlurmApi | None = None
        self._api_lock: asyncio.Lock | None = None
        self._told_fallback = False

    # -- plumbing

    def _headers(self) -> dict[str, str]:
        return {
            "X-SLURM-USER-NAME": self._user,
            "X-SLURM-USER-TOKEN": self._token,
            "Accept": "application/json",
        }

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if not self._own_session and self._session is not None:
                raise BackendError(NAME, "cannot be asked: its HTTP session was closed.")
            self._session = aiohttp.ClientSession()
            self._own_session = True
        return self._session

    async def _call(
        self, method: str, path: str, deadline: Deadline, *, json: Any = None
    ) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": self._headers()}
        if json is not None:
            kwargs["json"] = json
        try:
            return await request_json(
                self._get_session(),
                method,
                self.base_url + path,
                backend=NAME,
                deadline=deadline,
                ok_statuses=_JSON_STATUSES,
                **kwargs,
            )
        except BackendError as exc:
            if "not JSON" in exc.sentence:
                raise BackendError(
                    NAME,
                    "answered something that is not slurmrestd's JSON (an error page, or no "
                    "slurmrestd at SLURM_REST_URL?).",
                ) from exc
            if "HTTP 401" in exc.sentence or "HTTP 403" in exc.sentence:
                raise BackendError(
                    NAME,
                    "refused the credentials: check SLURM_JWT (expired?) and SLURM_USER "
                    "(slurmrestd needs both the user name and its token).",
                ) from exc
            raise

    async def api(self, deadline: Deadline | None = None) -> SlurmApi:
        """The detected API (cached after the first successful detection)."""
        if self._api is not None:
            return self._api
        if self._api_lock is None:
            self._api_lock = asyncio.Lock()
        deadline = deadline or Deadline(self.timeout_s)
        async with self._api_lock:
            if self._api is None:
                try:
                    status, spec = await self._call("GET", "/openapi/v3", deadline)
                except BackendError as exc:
                    if "not slurmrestd's JSON" not in exc.sentence:
                        raise
                    status, spec = 404, None  # an older server: its spec is at /openapi
                if status == 404 or not (isinstance(spec, Mapping) and "paths" in spec):
                    status, spec = await self._call("GET", "/openapi", deadline)
                if status != 200:
                    raise BackendError(NAME, _error_sentence(slurm_errors(spec), status))
                self._api = parse_openapi(spec)
                log.info(
                    "Slurm REST API %s at %s (node update over REST: %s)",
                    self._api.version,
                    self.base_url,
                    "yes" if self._api.node_update else "no, scontrol",
                )
        return self._api

    async def _get(self, path: str, deadline: Deadline, missing: int | None = None) -> Any:
        status, body = await self._call("GET", path, deadline)
        errors = slurm_errors(body)
        if missing is not None and any(num == missing for num, _ in errors):
            return None
        if status != 200 or errors:
            raise BackendError(NAME, _error_sentence(errors, status))
        if not isinstance(body, Mapping):
            raise BackendError(NAME, "answered JSON that is not an object.")
        return body

    # -- what the doctor reads (bot/doctor/slurm_part.py): nothing here changes anything

    @property
    def user(self) -> str:
        """SLURM_USER, sent beside the token to slurmrestd."""
        return self._user

    @property
    def scontrol(self) -> str:
        """The command drain and resume run where the REST API cannot update nodes."""
        return self._scontrol

    def token_claims(self) -> dict[str, Any] | None:
        return jwt_claims(self._token)

    async def about(self) -> SlurmAbout:
        """The Slurm release slurmrestd runs and its controllers' answers to a ping."""
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        return parse_ping(await self._get(api.ping_path, deadline))

    # -- the port

    async def ping(self) -> None:
        await self.about()

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SchedulerNode]:
        wanted = {check_node_name(n) for n in names} if names is not None else None
        if wanted is not None and not wanted:
            return {}
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        # One request for any number of nodes: the list is filtered here.
        body = await self._get(api.nodes_path, deadline)
        out: dict[str, SchedulerNode] = {}
        for raw in body.get("nodes") or []:
            if not isinstance(raw, Mapping):
                continue
            node = parse_node(raw)
            if node.name and (wanted is None or node.name in wanted):
                out[node.name] = node
        return out

    async def jobs(self, *, user: str | None = None) -> list[Job]:
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        body = await self._get(api.jobs_path, deadline)
        out: list[Job] = []
        for raw in body.get("jobs") or []:
            if not isinstance(raw, Mapping):
                continue
            if user is not None and _text(raw.get("user_name")) != user:
                continue
            job = parse_job(raw)
            if job.state in {JobState.PENDING, JobState.RUNNING}:
                out.append(job)
        return out

    async def last_finished(self, user: str) -> Job | None:
        """Of the ended jobs the controller still lists (MinJobAge, 300 s by default)."""
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        body = await self._get(api.jobs_path, deadline)
        ended = [
            job
            for raw in body.get("jobs") or []
            if isinstance(raw, Mapping) and _text(raw.get("user_name")) == user
            for job in (parse_job(raw),)
            if job.state not in {JobState.PENDING, JobState.RUNNING} and job.end is not None
        ]
        return max(ended, key=lambda j: j.end or j.start, default=None)

    async def previous_run(self, job: Job) -> Job | None:
        """The id the job carries, else the newest earlier job of the same name and user that
        the controller still lists (ended jobs stay there for MinJobAge, 300 s by default;
        slurmdbd's longer memory is not read)."""
        if job.prev_job_id:
            found = await self.job(job.prev_job_id)
            if found is not None:
                return found
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        body = await self._get(api.jobs_path, deadline)
        earlier = [
            parsed
            for raw in body.get("jobs") or []
            if isinstance(raw, Mapping)
            and _text(raw.get("name")) == job.name
            and _text(raw.get("user_name")) == job.user
            for parsed in (parse_job(raw),)
            if parsed.job_id != job.job_id and parsed.start < job.start
        ]
        return max(earlier, key=lambda j: j.start, default=None)

    async def job(self, job_id: str) -> Job | None:
        if not JOB_ID_RE.fullmatch(str(job_id).strip()):
            return None  # another scheduler's id (Kubernetes' namespace/kind/name): not Slurm's
        jid = check_job_id(job_id)
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        body = await self._get(
            api.job_path.replace("{job_id}", jid), deadline, missing=_ERR_INVALID_JOB_ID
        )
        if body is None:
            return None
        for raw in body.get("jobs") or []:
            if isinstance(raw, Mapping) and str(parse_number(raw.get("job_id"))) == jid:
                return parse_job(raw)
        return None

    async def drain(self, node: str, reason: str, *, now: bool = False) -> None:
        name = check_node_name(node)
        why = drain_reason.check(reason)
        # Drained first, then down: with ReturnToService=2 Slurm puts a DOWN node back in
        # service as soon as its slurmd registers again (seen right after its jobs were
        # killed); the DRAIN flag it keeps holds the node out until meowbot resumes it.
        for state in ("DRAIN", "DOWN") if now else ("DRAIN",):
            await self._update_node(
                name,
                {"state": [state], "reason": why},
                [f"state={state.lower()}", f"reason={why}"],
            )

    async def resume(self, node: str, *, force: bool = False) -> None:
        # Slurm's resume clears any drain, an operator's too: `force` asks nothing more.
        name = check_node_name(node)
        await self._update_node(name, {"state": ["RESUME"]}, ["state=resume"])

    # -- validation jobs (bot/backends/slurm_validation.py)

    async def submit(self, script: str, job: Mapping[str, Any]) -> str:
        """Submits a batch `script` with `job`'s properties (slurmrestd's job/submit);
        returns the job id."""
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        body = {"script": script, "job": dict(job)}
        status, answer = await self._call(
            "POST", f"/slurm/{api.version}/job/submit", deadline, json=body
        )
        errors = slurm_errors(answer)
        job_id = parse_number(answer.get("job_id")) if isinstance(answer, Mapping) else None
        if status != 200 or errors or job_id is None:
            raise BackendError(NAME, _error_sentence(errors, status))
        return str(job_id)

    async def cancel(self, job_id: str) -> None:
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        path = api.job_path.replace("{job_id}", quote(check_job_id(job_id), safe=""))
        status, answer = await self._call("DELETE", f"{path}?signal=TERM", deadline)
        errors = slurm_errors(answer)
        if status != 200 or errors:
            raise BackendError(NAME, _error_sentence(errors, status))

    async def reserve(self, name: str, node: str, minutes: int) -> None:
        """A maintenance reservation of `node` for this token's user alone, from now: slurmrestd
        up to 23.x cannot create one, so through scontrol. Slurm takes it on a drained node."""
        args = [
            "create",
            "reservation",
            f"ReservationName={check_reservation(name)}",
            f"Nodes={check_node_name(node)}",
            "StartTime=now",
            f"Duration={max(1, int(minutes))}",
            f"Users={self._user}",
            "Flags=MAINT,IGNORE_JOBS",
        ]
        await self._run_scontrol(args, Deadline(self.timeout_s))

    async def unreserve(self, name: str) -> None:
        await self._run_scontrol(
            ["delete", f"ReservationName={check_reservation(name)}"], Deadline(self.timeout_s)
        )

    async def close(self) -> None:
        if self._own_session and self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None if self._own_session else self._session

    # -- node updates

    async def _update_node(self, name: str, body: dict[str, Any], scontrol_args: list[str]) -> None:
        deadline = Deadline(self.timeout_s)
        api = await self.api(deadline)
        if api.node_update:
            path = api.node_path.replace("{node_name}", quote(name, safe=""))
            status, answer = await self._call("POST", path, deadline, json=body)
            errors = slurm_errors(answer)
            if status != 200 or errors:
                raise BackendError(NAME, _error_sentence(errors, status))
            return
        if not self._told_fallback:
            self._told_fallback = True
            log.warning(
                "Slurm REST API %s cannot update nodes; drain and resume go through %s",
                api.version,
                self._scontrol,
            )
        await self._run_scontrol(["update", f"nodename={name}", *scontrol_args], deadline)

    async def _run_scontrol(self, args: list[str], deadline: Deadline) -> None:
        env = dict(os.environ)
        env["SLURM_JWT"] = self._token
        if self._slurm_conf:
            env["SLURM_CONF"] = self._slurm_conf
        try:
            proc = await asyncio.create_subprocess_exec(
                self._scontrol,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise BackendError(
                NAME,
                f"cannot update nodes on REST API {self._api.version if self._api else '?'} "
                f"and {self._scontrol} cannot be run ({exc.strerror or exc}).",
            ) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=deadline.left())
        except TimeoutError as exc:
            proc.kill()
            await proc.wait()
            raise BackendError(NAME, "did not answer scontrol in time.") from exc
        if proc.returncode != 0:
            text = " ".join((err or out).decode(errors="replace").split())[:200]
            what = "the node update" if args[0] == "update" else f"scontrol {' '.join(args[:2])}"
            raise BackendError(NAME, f"refused {what}: {text or 'scontrol failed'}.")
