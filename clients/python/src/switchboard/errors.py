"""Typed exceptions carrying the server's error envelope (`{"error": {"code", "message", "details"}}`)."""

from __future__ import annotations

from typing import Any


class SwitchboardError(Exception):
    """Base of every error this package raises."""


class TransportError(SwitchboardError):
    """The server could not be reached, or did not answer in time (after the retries allowed)."""


class ApiError(SwitchboardError):
    """The server answered with an error status; `code`, `message` and `details` are its envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        *,
        method: str = "",
        path: str = "",
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.method = method
        self.path = path
        super().__init__(f"{method} {path}: {status} {code}: {message}".strip())


class BadRequest(ApiError):
    """400/415/422: the request was refused as it is; `details` says what to change."""


class Unauthorized(ApiError):
    """401/403: the API key is missing, wrong or lacks the right (a tenant key, not the admin key)."""


class NotFound(ApiError):
    """404: no such agent, call or tool in this key's tenant."""


class Conflict(ApiError):
    """409: e.g. the call has ended, or its id is taken."""


class RateLimited(ApiError):
    """429: too many live calls or requests; `details` may hold `retry_after_s`."""


class ServerError(ApiError):
    """5xx: the server failed (or, for 504, had no answer in time: the call's record will have it)."""


def error_for_status(
    status: int, code: str, message: str, details: Any, *, method: str, path: str
) -> ApiError:
    """The exception class that fits an HTTP status."""
    cls: type[ApiError]
    if status in (401, 403):
        cls = Unauthorized
    elif status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    elif status == 429:
        cls = RateLimited
    elif status >= 500:
        cls = ServerError
    else:
        cls = BadRequest
    return cls(status, code, message, details, method=method, path=path)
