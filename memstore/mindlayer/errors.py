"""The Mind Layer API's errors: a status, a stable code and a message of ours.

Every error body is ``{"error": code, "message": message}``, the shape
:func:`memstore.web.refusal.refusal_body` writes, so a refusal of the shared
plumbing (a foreign ``Host``, a browser ``Origin``) and one of the routes
read alike: a body over ``--max-body`` is 413 ``payload_too_large``, a request
over the owner's rate 429 ``rate_limited`` with ``Retry-After``, as on every
memstore server. A 500 never carries a provider's response body or an exception's
text: the message is :data:`INTERNAL_MESSAGE`.

>>> e = invalid("text must not be empty")
>>> e.status, e.body()
(400, {'error': 'invalid_request', 'message': 'text must not be empty'})
"""

from __future__ import annotations

from typing import Final

from memstore.errors import OutOfRangeError
from memstore.web.ratelimit import retry_after_seconds
from memstore.web.refusal import PAYLOAD_TOO_LARGE, Refusal

__all__ = [
    "INTERNAL_MESSAGE",
    "MindLayerError",
    "internal",
    "invalid",
    "not_found",
    "out_of_range",
    "payload_too_large",
    "rate_limited",
    "unauthorized",
]

INTERNAL_MESSAGE: Final = "the request failed inside the server (see its log)"
"""The one message of every 500."""


class MindLayerError(Exception):
    """An error answered with ``status`` and ``{"error": code, "message": message}``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, object] | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}
        """Headers the answer carries besides the body (a 429's ``Retry-After``)."""

    def body(self) -> dict[str, object]:
        """The JSON body (``details`` only when there are some, as MemoryProtocol's)."""
        body: dict[str, object] = {"error": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body

    def refusal(self) -> Refusal:
        """The same error as a :class:`~memstore.web.refusal.Refusal` (for the plumbing)."""
        return Refusal(self.status, self.code, self.message, self.details, headers=self.headers)


def invalid(message: str) -> MindLayerError:
    """400 ``invalid_request``."""
    return MindLayerError(400, "invalid_request", message)


def out_of_range(error: OutOfRangeError) -> MindLayerError:
    """400 ``invalid_request`` for a number out of its range: the engine's message and code.

    >>> from memstore.arguments import count
    >>> try:
    ...     count(101, "limit", 1, 100)
    ... except OutOfRangeError as e:
    ...     out_of_range(e).body()["details"]["code"]
    'arguments.out_of_range'
    """
    return MindLayerError(
        400, "invalid_request", str(error), {"code": error.code, **error.details()}
    )


def unauthorized(message: str) -> MindLayerError:
    """401 ``unauthorized``."""
    return MindLayerError(401, "unauthorized", message)


def not_found(message: str) -> MindLayerError:
    """404 ``not_found``."""
    return MindLayerError(404, "not_found", message)


def payload_too_large(size: int, limit: int) -> MindLayerError:
    """413 ``payload_too_large``: a body of ``size`` bytes over ``--max-body``'s ``limit``.

    ``size`` is what had arrived when the read stopped (or the ``Content-Length``
    that announced more than ``limit``): the body is never held whole.

    >>> payload_too_large(2048, 1024).body()["message"]
    'the request body is 2048 bytes; the limit is 1024 (--max-body)'
    """
    return MindLayerError(
        413,
        PAYLOAD_TOO_LARGE,
        f"the request body is {size} bytes; the limit is {limit} (--max-body)",
        {"size": size, "limit": limit},
    )


def rate_limited(wait: float) -> MindLayerError:
    """429 ``rate_limited``, ``Retry-After`` the whole seconds until a request may pass.

    ``wait``: what :meth:`~memstore.web.ratelimit.RateLimiter.acquire` answered,
    rounded up (:func:`~memstore.web.ratelimit.retry_after_seconds`), so a client
    that waits that long finds its request served.

    >>> e = rate_limited(0.25)
    >>> e.status, e.headers, e.body()["details"]
    (429, {'Retry-After': '1'}, {'retry_after': 1})
    """
    seconds = retry_after_seconds(wait)
    return MindLayerError(
        429,
        "rate_limited",
        f"over the owner's rate limit (--rate-per-second, --rate-burst); retry after {seconds} s",
        {"retry_after": seconds},
        headers={"Retry-After": str(seconds)},
    )


def internal() -> MindLayerError:
    """500 ``internal``, with :data:`INTERNAL_MESSAGE`."""
    return MindLayerError(500, "internal", INTERNAL_MESSAGE)
