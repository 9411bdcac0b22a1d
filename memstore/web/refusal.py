"""A request refused by the HTTP plumbing: status, stable code, message, and its JSON body.

The plumbing of :mod:`memstore.web` refuses requests before any surface sees
them (a Host it does not serve, a body too large, a repeated credential). It
says so with a :class:`Refusal`, whose codes are surface-neutral constants
(:data:`REFUSAL_CODES`); a surface renders it in its own error shape, or
uses :func:`refusal_body`, the ``{"error": code, "message": message}`` shape
MemoryProtocol uses.

>>> r = Refusal(403, FORBIDDEN_HOST, "Host 'evil.example' is not served here")
>>> refusal_body(r)
b'{"error":"forbidden_host","message":"Host \\'evil.example\\' is not served here"}\\n'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from memstore.web.asgi import Send
from memstore.web.jsonbytes import json_bytes

__all__ = [
    "FORBIDDEN_HOST",
    "FORBIDDEN_ORIGIN",
    "HEADERS_TOO_LARGE",
    "INVALID_REQUEST",
    "PAYLOAD_TOO_LARGE",
    "REFUSAL_CODES",
    "REQUEST_TIMEOUT",
    "UNAVAILABLE",
    "UNSUPPORTED_MEDIA_TYPE",
    "Refusal",
    "RenderRefusal",
    "json_bytes",
    "refusal_body",
    "send_json",
    "send_refusal",
]

INVALID_REQUEST: Final = "invalid_request"
"""400: the request is malformed (a repeated credential, a body that is not UTF-8 JSON)."""
FORBIDDEN_HOST: Final = "forbidden_host"
"""403: the ``Host`` header names a host this server does not serve (DNS rebinding)."""
FORBIDDEN_ORIGIN: Final = "forbidden_origin"
"""403: the ``Origin`` header names a web origin this server does not accept."""
REQUEST_TIMEOUT: Final = "request_timeout"
"""408: the request's headers did not arrive within the header timeout."""
PAYLOAD_TOO_LARGE: Final = "payload_too_large"
"""413: the body is larger than the limit."""
UNSUPPORTED_MEDIA_TYPE: Final = "unsupported_media_type"
"""415: the body's ``Content-Type`` is not JSON."""
HEADERS_TOO_LARGE: Final = "headers_too_large"
"""431: the request's headers are larger than the limit."""
UNAVAILABLE: Final = "unavailable"
"""503: the server (or this client address) has as many connections as it accepts."""

REFUSAL_CODES: Final[Mapping[str, int]] = {
    INVALID_REQUEST: 400,
    FORBIDDEN_HOST: 403,
    FORBIDDEN_ORIGIN: 403,
    REQUEST_TIMEOUT: 408,
    PAYLOAD_TOO_LARGE: 413,
    UNSUPPORTED_MEDIA_TYPE: 415,
    HEADERS_TOO_LARGE: 431,
    UNAVAILABLE: 503,
}
"""Every code the plumbing refuses with, and its HTTP status (a surface documents them)."""


class Refusal(Exception):
    """A request the plumbing refuses; ``headers`` are extra response headers.

    >>> Refusal(413, PAYLOAD_TOO_LARGE, "too big", {"limit": 1})
    Refusal(413, 'payload_too_large', 'too big', {'limit': 1})
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, object] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, object] = dict(details or {})
        self.headers: dict[str, str] = dict(headers or {})

    def __repr__(self) -> str:
        extra = f", {self.details!r}" if self.details else ""
        return f"Refusal({self.status}, {self.code!r}, {self.message!r}{extra})"


RenderRefusal = Callable[[Refusal], bytes]
"""How a surface turns a refusal into a JSON response body."""


def refusal_body(refusal: Refusal) -> bytes:
    """``{"error": code, "message": message}`` (plus ``details`` when there are some)."""
    body: dict[str, object] = {"error": refusal.code, "message": refusal.message}
    if refusal.details:
        body["details"] = refusal.details
    return json_bytes(body)


async def send_refusal(refusal: Refusal, send: Send, render: RenderRefusal = refusal_body) -> None:
    """Answer an ASGI HTTP request with ``refusal`` as JSON."""
    await send_json(send, refusal.status, render(refusal), refusal.headers)


async def send_json(
    send: Send, status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> None:
    """Answer an ASGI HTTP request with ``body`` (JSON bytes), ``status`` and extra headers."""
    raw = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
