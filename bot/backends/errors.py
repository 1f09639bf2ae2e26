"""The one error a backend raises: it names the backend and says what went wrong in a sentence."""

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
