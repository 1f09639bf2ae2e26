"""Alertmanager's webhook (payload version 4) into `Alert`s, and who may post it. No I/O.

A node name from a label is checked like any node name before it goes anywhere; a label value
that is not one (`gpu-1"} or vector(1) #`) leaves the alert without a node rather than passing on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from bot.alerts.causes import CAUSE_LABEL, cause_of
from bot.alerts.correlate import facts_from_labels
from bot.alerts.models import Alert, AlertSource, AlertStatus
from bot.models import Severity
from bot.triage.targets import NODE_RE

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_ALERTS = 5_000
NODE_LABELS = ("Hostname", "hostname", "node", "instance")
_SEVERITY = {
    "critical": Severity.CRITICAL,
    "page": Severity.CRITICAL,
    "error": Severity.CRITICAL,
    "warning": Severity.WARNING,
    "warn": Severity.WARNING,
}
_ZERO_TIME = "0001-01-01T00:00:00Z"


class WebhookError(ValueError):
    """The post is not an Alertmanager webhook we can read; the message is one sentence."""


def authorized(header: str | None, token: str | None, basic_user: str = "alertmanager") -> bool:
    """`Authorization: Bearer <token>`, or Basic `<basic_user>:<token>`, compared in constant
    time. Without a configured token nobody is authorised."""
    if not token or not header:
        return False
    scheme, _, credential = header.partition(" ")
    credential = credential.strip()
    if scheme.lower() == "bearer":
        return hmac.compare_digest(credential.encode(), token.encode())
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credential, validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(decoded, f"{basic_user}:{token}".encode())
    return False


def _node(labels: dict[str, str]) -> str | None:
    for name in NODE_LABELS:
        value = labels.get(name)
        if value:
            host = value.rsplit(":", 1)[0] if name == "instance" else value
            return host if NODE_RE.fullmatch(host) else None
    return None


def _time(value: Any) -> datetime | None:
    if not value or value == _ZERO_TIME:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise WebhookError(f"An alert's time {str(value)[:40]!r} is not ISO 8601.") from None


# Group labels that say what an alert is, or which node: an Alertmanager group by any of them
# is still one event of its cause (grouping by host is how rules storm a channel).
_NOT_EVENT_LABELS = frozenset({"alertname", "xid", "gpu", "severity", CAUSE_LABEL, *NODE_LABELS})


def event_of(group_labels: Any) -> str:
    """What an Alertmanager grouping adds to the cause (`cluster="b"`), as a short stable id;
    "" when it groups by cause alone."""
    if not isinstance(group_labels, dict):
        return ""
    rest = sorted(
        (str(k), str(v)) for k, v in group_labels.items() if str(k) not in _NOT_EVENT_LABELS
    )
    if not rest:
        return ""
    return hashlib.sha256(json.dumps(rest).encode()).hexdigest()[:12]


def _alert(raw: Any, event: str = "") -> Alert:
    if not isinstance(raw, dict):
        raise WebhookError("An alert in the payload is not an object.")
    labels = raw.get("labels")
    annotations = raw.get("annotations") or {}
    if not isinstance(labels, dict) or not isinstance(annotations, dict):
        raise WebhookError("An alert's labels or annotations are not a mapping.")
    labels = {str(k): str(v) for k, v in labels.items()}
    name = labels.get("alertname")
    fingerprint = raw.get("fingerprint")
    if not name or not fingerprint:
        raise WebhookError("An alert has no alertname label or no fingerprint.")
    gpu = labels.get("gpu", "")
    starts = _time(raw.get("startsAt"))
    if starts is None:
        raise WebhookError("An alert has no startsAt.")
    status = raw.get("status")
    if status not in ("firing", "resolved"):
        raise WebhookError(
            f"An alert's status {str(status)[:20]!r} is neither firing nor resolved."
        )
    summary = annotations.get("summary") or annotations.get("description") or ""
    try:
        return Alert(
            fingerprint=str(fingerprint),
            source=AlertSource.ALERTMANAGER,
            status=AlertStatus(status),
            cause=cause_of(name, labels),
            node=_node(labels),
            gpu=int(gpu) if gpu.isdigit() else None,
            severity=_SEVERITY.get(labels.get("severity", "").lower(), Severity.INFO),
            summary=str(summary)[:1000],
            labels=labels,
            starts_at=starts,
            ends_at=_time(raw.get("endsAt")) if status == "resolved" else None,
            generator_url=str(raw.get("generatorURL") or "")[:500],
            event=event,
            facts=facts_from_labels(labels),
        )
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"])
        raise WebhookError(f"An alert's {where} is not valid.") from None


def parse_webhook(body: bytes) -> list[Alert]:
    if len(body) > MAX_BODY_BYTES:
        raise WebhookError(f"The payload is over {MAX_BODY_BYTES // 1024 // 1024} MB.")
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WebhookError("The payload is not JSON.") from None
    if not isinstance(payload, dict) or str(payload.get("version")) != "4":
        raise WebhookError("This is not an Alertmanager webhook of version 4.")
    alerts = payload.get("alerts")
    if not isinstance(alerts, list):
        raise WebhookError("The payload has no list of alerts.")
    if len(alerts) > MAX_ALERTS:
        raise WebhookError(f"The payload holds {len(alerts)} alerts, over {MAX_ALERTS}.")
    event = event_of(payload.get("groupLabels"))
    return [_alert(a, event) for a in alerts]
