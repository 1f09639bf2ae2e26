"""What a job id may be, checked before any scheduler or PromQL sees it (no I/O).

Two shapes, one a scheduler: Slurm's number (`4100123`, or an array task `4100123_7`), and
the Kubernetes adapter's `namespace/kind/name` (`team-a/pytorchjob/llm-7b`: the top of the
pods' owner chain, bot/backends/kubernetes_jobs.py). The Kubernetes parts are held to what the
API server itself accepts (a DNS-1123 label for the namespace, a DNS-1123 subdomain for the
name, a kind a word of letters and digits), so quotes, braces, spaces or PromQL never get
through, whatever the adapters do with the id after.
"""

from __future__ import annotations

import re

SLURM_ID_RE = re.compile(r"[0-9]{1,12}(_[0-9]{1,9})?")
# DNS-1123 label: what a namespace is.
NAMESPACE_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# A kind is a Go type name; the adapter writes it lower-cased (`PyTorchJob` -> `pytorchjob`).
KIND_RE = re.compile(r"[a-z][a-z0-9]{0,62}")
# DNS-1123 subdomain: what a Job, JobSet, PyTorchJob or pod name is (at most 253).
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
NAME_RE = re.compile(rf"{_LABEL}(\.{_LABEL})*")
NAME_MAX = 253

SLURM_EXAMPLE = "`/job-slow 4100123`"
KUBERNETES_EXAMPLE = "`/job-slow team-a/pytorchjob/llm-7b`"


ONE_ID = (
    f"give the number Slurm shows ({SLURM_EXAMPLE}) or a Kubernetes job as namespace/kind/name "
    f"({KUBERNETES_EXAMPLE})."
)


class BadJobId(ValueError):
    """The sentence saying why a text is no job id."""


def is_kubernetes_id(job_id: str) -> bool:
    """Whether the id is the Kubernetes adapter's (Slurm's are digits)."""
    return "/" in job_id


def check_job_id(text: str) -> str:
    """The job id `text` is, in the form the scheduler writes it, or BadJobId saying why not.

    A Kubernetes kind is taken in any case (people write `PyTorchJob`); namespace and name
    must be lower case, as Kubernetes has them.
    """
    if SLURM_ID_RE.fullmatch(text):
        return text
    parts = text.split("/")
    if len(parts) != 3:
        raise BadJobId(ONE_ID)
    namespace, kind, name = parts
    if not NAMESPACE_RE.fullmatch(namespace):
        raise BadJobId(
            "a Kubernetes namespace is lower-case letters, digits and '-', at most 63, "
            f"starting and ending with a letter or digit ({KUBERNETES_EXAMPLE})."
        )
    if not KIND_RE.fullmatch(kind.lower()):
        raise BadJobId(
            "a Kubernetes kind is one word of letters and digits, such as job, jobset, "
            f"pytorchjob or mpijob ({KUBERNETES_EXAMPLE})."
        )
    if len(name) > NAME_MAX or not NAME_RE.fullmatch(name):
        raise BadJobId(
            "a Kubernetes job's name is lower-case letters, digits, '-' and '.', at most "
            f"{NAME_MAX}, starting and ending with a letter or digit ({KUBERNETES_EXAMPLE})."
        )
    return f"{namespace}/{kind.lower()}/{name}"
