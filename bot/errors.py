"""The errors the core raises and catches. Adapters raise them too: a backend failing raises
`BackendError` (naming the backend, saying what went wrong in a sentence), a write whose lock
was lost raises `FenceLost`, so the services can catch them without knowing any adapter."""

from __future__ import annotations


class BackendError(Exception):
    def __init__(self, backend: str, sentence: str, *, retryable: bool = False) -> None:
        super().__init__(f"{backend}: {sentence}")
        self.backend = backend
        self.sentence = sentence
        self.retryable = retryable

    def user_text(self) -> str:
        """What the person in Slack reads: never a stack trace."""
        return f"{self.backend} {self.sentence}"


class StreamStalled(BackendError):
    """A stream sent nothing for too long and was cut."""


class PostError(Exception):
    """Slack refused a call for good (not a rate limit: those are retried by slack_sdk)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class FenceLost(Exception):
    """The lock this write was made under is no longer ours: the write did not happen."""
