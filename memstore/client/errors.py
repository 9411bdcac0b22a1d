"""The server's error taxonomy as exceptions, one class per documented code.

Every error answer of ``memstore serve`` is ``{"error": code, "message": text}``
with an optional ``details`` object (docs/protocol.md, "Errors"). The client
raises the class registered for ``code``; a code it does not know becomes the
base class for its status family, so a newer server never breaks an older
client. Each class also derives from the built-in a caller would catch
(``PermissionError`` for 401/403, ``LookupError`` for 404, ``ValueError`` for a
refused request), as every :class:`~memstore.errors.MemstoreError` does.

>>> err = error_from_response(429, {"error": "rate_limited", "message": "slow down",
...                                 "details": {"retry_after": 2}})
>>> type(err).__name__, err.status, err.code, err.retry_after
('RateLimitedError', 429, 'rate_limited', 2.0)
>>> isinstance(error_from_response(404, {"error": "shiny_new", "message": "?"}), NotFoundError)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstore.errors import MemstoreError

__all__ = [
    "AuthenticationError",
    "ClientClosedError",
    "ClientError",
    "ConfirmationRequiredError",
    "ForbiddenError",
    "GraphUnavailableError",
    "InvalidConfirmationTokenError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProtocolTransportError",
    "RateLimitedError",
    "ServerError",
    "ServerFailureError",
    "UnavailableError",
    "error_from_response",
]


class ClientError(MemstoreError):
    """Root of every error :mod:`memstore.client` raises."""


class ClientClosedError(ClientError, RuntimeError):
    """The client was closed (``close()``, the end of its ``with`` block): it sends nothing more.

    Nothing was sent; open a new client. (A ``RuntimeError``, as httpx raises
    for a closed client.)
    """


class ProtocolTransportError(ClientError, ConnectionError):
    """No answer: the server could not be reached, or the connection broke or timed out."""


class ServerError(ClientError):
    """The server answered with an error status.

    ``status`` is the HTTP status, ``code`` the taxonomy's stable code,
    ``message`` the server's human-readable text and ``details`` its extra
    fields (``{}`` when it sent none).
    """

    def __init__(
        self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})


class InvalidRequestError(ServerError, ValueError):
    """400: the request was refused as malformed (``invalid_request``, ``invalid_filter``, ...)."""


class InvalidConfirmationTokenError(InvalidRequestError):
    """400 ``invalid_confirmation_token``: the receipt is not a live preview of this target."""


class AuthenticationError(ServerError, PermissionError):
    """401 ``unauthorized``: no token, a malformed one, or one the server does not know."""


class ForbiddenError(ServerError, PermissionError):
    """403: the token lacks the route's scope (``forbidden``), or the Host/Origin is refused."""


class NotFoundError(ServerError, LookupError):
    """404: no such episode (``episode_not_found``), route, or snapshot position."""


class PayloadTooLargeError(ServerError, ValueError):
    """413 ``payload_too_large``: the body or an episode's content is over the limit."""


class ConfirmationRequiredError(ServerError, ValueError):
    """428 ``confirmation_required``: a hard forget needs a dry run's receipt first."""


class RateLimitedError(ServerError):
    """429 ``rate_limited``: the tenant's bucket is empty; ``retry_after`` says when to retry."""

    @property
    def retry_after(self) -> float:
        """Seconds until the bucket holds a token again (``details.retry_after``)."""
        value = self.details.get("retry_after", 1)
        return float(value) if isinstance(value, int | float) else 1.0


class ServerFailureError(ServerError):
    """500 ``internal``: the server failed; the request may or may not have taken effect."""


class GraphUnavailableError(ServerError):
    """501 ``graph_unavailable``: recall mode ``graph`` is not supported by this server."""


class UnavailableError(ServerError):
    """503 ``unavailable``: the server is shutting down and took no new request."""


_BY_CODE: dict[str, type[ServerError]] = {
    "invalid_confirmation_token": InvalidConfirmationTokenError,
    "unauthorized": AuthenticationError,
    "confirmation_required": ConfirmationRequiredError,
    "rate_limited": RateLimitedError,
    "payload_too_large": PayloadTooLargeError,
    "internal": ServerFailureError,
    "graph_unavailable": GraphUnavailableError,
    "unavailable": UnavailableError,
}
_BY_STATUS: dict[int, type[ServerError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: ForbiddenError,
    404: NotFoundError,
    413: PayloadTooLargeError,
    428: ConfirmationRequiredError,
    429: RateLimitedError,
    501: GraphUnavailableError,
    503: UnavailableError,
}


def error_from_response(status: int, body: object) -> ServerError:
    """The exception for an error answer: by its code, else by its status family."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), str):
        code = str(body["error"])
        message = str(body.get("message", ""))
        details = body.get("details")
        details = details if isinstance(details, Mapping) else None
    else:
        code, message, details = "http_error", f"unexpected answer: {str(body)[:200]}", None
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerFailureError if status >= 500 else InvalidRequestError
    return cls(status, code, message, details)
