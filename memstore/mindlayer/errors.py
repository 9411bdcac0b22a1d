"""The Mind Layer API's errors: a status, a stable code and a message of ours.

Every error body is ``{"error": code, "message": message}``, the shape
:func:`memstore.web.refusal.refusal_body` writes, so a refusal of the shared
plumbing (a foreign ``Host``, a browser ``Origin``) and one of the routes
read alike. A 500 never carries a provider's response body or an exception's
text: the message is :data:`INTERNAL_MESSAGE`.

>>> e = invalid("text must not be empty")
>>> e.status, e.body()
(400, {'error': 'invalid_request', 'message': 'text must not be empty'})
"""

from __future__ import annotations

from typing import Final

from memstore.errors import OutOfRangeError
from memstore.web.refusal import Refusal

__all__ = [
    "INTERNAL_MESSAGE",
    "MindLayerError",
    "internal",
    "invalid",
    "not_found",
    "out_of_range",
    "unauthorized",
]

INTERNAL_MESSAGE: Final = "the request failed inside the server (see its log)"
"""The one message of every 500."""


class MindLayerError(Exception):
    """An error answered with ``status`` and ``{"error": code, "message": message}``."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details

    def body(self) -> dict[str, object]:
        """The JSON body (``details`` only when there are some, as MemoryProtocol's)."""
        body: dict[str, object] = {"error": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body

    def refusal(self) -> Refusal:
        """The same error as a :class:`~memstore.web.refusal.Refusal` (for the plumbing)."""
        return Refusal(self.status, self.code, self.message)


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


def internal() -> MindLayerError:
    """500 ``internal``, with :data:`INTERNAL_MESSAGE`."""
    return MindLayerError(500, "internal", INTERNAL_MESSAGE)
