"""Errors and warnings of the remote backend: each names the server URL and what went wrong."""

from __future__ import annotations


class RemoteError(RuntimeError):
    """A request to an inference server failed (unreachable, HTTP error, malformed answer).

    ``url`` is the full address of the request and ``status`` the HTTP status (None when no
    answer came back).
    """

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class MalformedResponse(RemoteError):
    """The server answered 200 but not in the format its backend promises."""


class TopNWarning(UserWarning):
    """Some k-mers were missing from the server's top-N log-probabilities, so the base-level
    marginals are an approximation (missing k-mers count as probability 0)."""
