"""Read timeouts and connection caps for uvicorn's HTTP/1.1 protocols (slow clients).

uvicorn reads a request's headers for as long as the client cares to send
them: a client that opens a connection and sends half a header line, or a
header every few seconds, holds a socket (a file descriptor) for ever, and
about a thousand such clients exhaust a process's descriptors. uvicorn's own
``limit_concurrency`` answers 503 only once a request's headers are complete,
which these clients never are; its keep-alive timeout is cancelled by the
first byte of the next request.

:class:`GuardedProtocol` wraps uvicorn's protocol (h11 or httptools; it holds
one per connection and forwards every event to it) and adds:

- **connection caps**: at most ``max_connections`` open connections, and
  ``max_connections_per_client`` per client IP address. A connection over a
  cap is answered at once with ``503 unavailable`` (``Retry-After: 1``) and
  closed, so that its descriptor is freed at once. "Closed" is a lingering
  close: the answer and a FIN go out, and what the client still sends is read
  and dropped for up to :data:`LINGER_SECONDS` (closing a socket with unread
  input makes the kernel send a reset, which can destroy the 503 before the
  client reads it). At most :data:`MAX_LINGERING` refused sockets linger at
  a time; beyond that they are closed outright;
- **a header timeout**: a request's headers must be complete within
  ``header_timeout`` seconds of the connection opening, or of the first byte
  of a keep-alive connection's next request; otherwise ``408
  request_timeout`` and the connection is closed;
- **a header size cap**: ``max_header_bytes``; ``431 headers_too_large``;
- **a body timeout**: once the headers are in, the whole body must arrive
  within ``body_timeout`` seconds, or the connection is closed (the
  application sees the client disconnect);
- **an idle timeout**: a keep-alive connection with no request for
  ``keepalive_timeout`` seconds is closed (uvicorn's own timer, given the
  same value by :func:`~memstore.web.runner.serve_app`).

uvicorn's protocol writes through a
:class:`~memstore.web.onewrite.OneWriteTransport`: each answer's head and
body leave in one socket write, not two.

While a request is being answered no read timeout runs: the application's
time is its own (streams run for as long as they need).

How the phase of a connection is known: after each chunk of bytes the
wrapper looks at the request cycle uvicorn's protocol keeps (``cycle``, with
``more_body`` and ``response_complete``; h11 and httptools keep the same
three), so the wrapper never parses HTTP itself. The one thing it reads of
the bytes is where a header block ends (its blank line): a chunk that holds
the end of the headers is measured, and refused with 431, *before* uvicorn's
protocol sees it, since the request would be under way once it has.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, cast

from memstore.web.onewrite import OneWriteTransport
from memstore.web.refusal import (
    HEADERS_TOO_LARGE,
    REQUEST_TIMEOUT,
    UNAVAILABLE,
    Refusal,
    RenderRefusal,
    refusal_body,
)

__all__ = [
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_KEEPALIVE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_CLIENT",
    "DEFAULT_MAX_HEADER_BYTES",
    "LINGER_SECONDS",
    "MAX_LINGERING",
    "ConnectionCounter",
    "ConnectionLimits",
    "GuardedProtocol",
    "canned_response",
    "guarded_protocol",
]

DEFAULT_HEADER_TIMEOUT_SECONDS: Final = 10.0
"""Time a client has to send a request's headers (``--header-timeout``)."""
DEFAULT_BODY_TIMEOUT_SECONDS: Final = 30.0
"""Time a client has to send a request's whole body after its headers (``--body-timeout``)."""
DEFAULT_KEEPALIVE_TIMEOUT_SECONDS: Final = 5.0
"""Idle time after which a keep-alive connection is closed (``--keepalive-timeout``)."""
DEFAULT_MAX_CONNECTIONS: Final = 512
"""Open connections accepted in all (``--max-connections``)."""
DEFAULT_MAX_CONNECTIONS_PER_CLIENT: Final = 128
"""Open connections accepted from one client IP address (``--max-connections-per-client``)."""
DEFAULT_MAX_HEADER_BYTES: Final = 64 * 1024
"""Largest request line and headers, in bytes."""
LINGER_SECONDS: Final = 1.0
"""How long a refused connection is drained before it is closed."""
MAX_LINGERING: Final = 64
"""Most refused connections draining at once (more are closed outright)."""

_REASONS: Final = {
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}
# Phases of a connection (see the module documentation).
_HEADERS, _BODY, _BUSY = "headers", "body", "busy"
_UNCOUNTED: Final = 1 << 62  # header bytes not counted (see data_received)
_BLANK_LINE: Final = re.compile(rb"\n\r?\n")
"""The end of a header block: an empty line (CR LF, or a bare LF as lenient parsers take)."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The timeouts and caps of :class:`GuardedProtocol` (seconds, counts, bytes)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    """Seconds to send a request line and headers."""
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    """Seconds to send a whole body, counted from the end of the headers."""
    keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT_SECONDS
    """Seconds a keep-alive connection may stay idle between requests."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Open connections in all."""
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    """Open connections per client IP address."""
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    """Bytes of request line and headers."""

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keepalive_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        for name in ("max_connections", "max_connections_per_client", "max_header_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


def canned_response(refusal: Refusal, render: RenderRefusal = refusal_body) -> bytes:
    """A whole HTTP/1.1 response for ``refusal``, with ``Connection: close``."""
    body = render(refusal)
    head = [
        f"HTTP/1.1 {refusal.status} {_REASONS.get(refusal.status, 'Error')}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{k}: {v}" for k, v in refusal.headers.items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class ConnectionCounter:
    """Open connections, in all and per client address, against :class:`ConnectionLimits`.

    >>> limits = ConnectionLimits(max_connections=2, max_connections_per_client=1)
    >>> counter = ConnectionCounter(limits)
    >>> counter.admit("10.0.0.1") is None, counter.admit("10.0.0.1").code
    (True, 'unavailable')
    >>> counter.admit("10.0.0.2") is None, counter.admit("10.0.0.3").message
    (True, 'this server has as many connections as it accepts (2); retry later')
    >>> counter.release("10.0.0.1"); counter.open, counter.of("10.0.0.1")
    (1, 0)
    """

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open = 0
        """Connections admitted and not yet closed."""
        self.refused = 0
        """Connections refused over a cap so far."""
        self.lingering = 0
        """Refused connections being drained before they close."""
        self._per_client: dict[str | None, int] = {}

    def of(self, client: str | None) -> int:
        """Open connections of ``client``."""
        return self._per_client.get(client, 0)

    def admit(self, client: str | None) -> Refusal | None:
        """Count a new connection from ``client`` in, or say why it is refused (nothing counted)."""
        limits = self.limits
        if self.open >= limits.max_connections:
            self.refused += 1
            return Refusal(
                503,
                UNAVAILABLE,
                f"this server has as many connections as it accepts ({limits.max_connections}); "
                "retry later",
                headers={"Retry-After": "1"},
            )
        held = self._per_client.get(client, 0)
        if held >= limits.max_connections_per_client:
            self.refused += 1
            return Refusal(
                503,
                UNAVAILABLE,
                f"this client address has as many connections as one may hold "
                f"({limits.max_connections_per_client}); retry later",
                headers={"Retry-After": "1"},
            )
        self.open += 1
        self._per_client[client] = held + 1
        return None

    def release(self, client: str | None) -> None:
        """Count a closed connection of ``client`` out."""
        self.open -= 1
        held = self._per_client.get(client, 0) - 1
        if held > 0:
            self._per_client[client] = held
        else:
            self._per_client.pop(client, None)


class GuardedProtocol(asyncio.Protocol):
    """One connection: uvicorn's protocol inside, the timeouts and caps around it.

    Made by :func:`guarded_protocol`, which fills in the class attributes;
    uvicorn constructs it with the keyword arguments of its own protocols.
    """

    inner_class: ClassVar[Callable[..., asyncio.Protocol]]
    limits: ClassVar[ConnectionLimits]
    counter: ClassVar[ConnectionCounter]
    render: ClassVar[tuple[RenderRefusal]]
    """The error body (in a tuple, so that it is not bound as a method)."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        loop = kwargs.get("_loop")
        self._loop: asyncio.AbstractEventLoop = loop or asyncio.get_event_loop()
        self._inner: Any = None
        self._transport: asyncio.Transport | None = None
        self._client: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._phase = _HEADERS
        self._header_bytes = 0
        self._header_tail = b""  # the last bytes of the header block so far (see _headers_over)
        self._lingering = False

    # ------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but quack alike.
        transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        client = peer[0] if isinstance(peer, tuple) and peer else None
        refusal = self.counter.admit(client)
        if refusal is not None:
            transport.write(canned_response(refusal, self.render[0]))
            self._linger(transport)
            return
        # Each answer's head and body in one write (see memstore.web.onewrite); the
        # refusals written here go through it too, so nothing overtakes a held head.
        transport = cast(asyncio.Transport, OneWriteTransport(transport, self._loop))
        self._transport, self._client = transport, client
        self._inner = self.inner_class(**self._kwargs)
        self._inner.connection_made(transport)
        self._arm(self.limits.header_timeout)

    def data_received(self, data: bytes) -> None:
        inner = self._inner
        if inner is None:
            return
        before = self._phase
        if before == _BUSY and self._phase_now() == _HEADERS:
            # The answer went out since the last bytes: these begin the next request of a
            # kept-alive connection. Its headers are measured as a new connection's, before
            # the parser sees them (a whole header block in one read would start it).
            before = self._phase = _HEADERS
            self._header_bytes = 0
            self._header_tail = b""
            self._arm(self.limits.header_timeout)
        if before == _HEADERS and self._header_bytes >= 0 and self._headers_over(data):
            self._refuse(self._headers_too_large())
            return
        inner.data_received(data)
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        phase = self._phase_now()
        self._phase = phase
        if phase == _HEADERS:
            if before != _HEADERS:  # the first bytes of the next request on a kept-alive one
                # After an answer given before the body was read (a 401, say), the
                # rest of that body comes first: those bytes are not headers.
                self._header_bytes = len(data) if before == _BUSY else -_UNCOUNTED
                self._header_tail = b""
                self._arm(self.limits.header_timeout)
                if self._header_bytes > self.limits.max_header_bytes:
                    self._refuse(self._headers_too_large())
            return
        self._header_bytes = 0
        self._header_tail = b""
        if phase == _BODY:
            if before != _BODY:
                self._arm(self.limits.body_timeout)
        else:
            self._disarm()

    def eof_received(self) -> bool | None:
        if self._inner is None:
            return None  # a refused connection: the client is done, the transport closes
        answer: bool | None = self._inner.eof_received()
        return answer

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lingering:
            self._lingering = False
            self.counter.lingering -= 1
            self._disarm()
        if self._inner is None:
            return
        self._disarm()
        self.counter.release(self._client)
        inner, self._inner = self._inner, None
        inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    # -------------------------------------------------------------------- phases

    def _headers_over(self, data: bytes) -> bool:
        """Count ``data``'s header bytes (up to the blank line that ends them); over the cap?

        Linear in ``data``. CR and LF before a request line are counted but end
        nothing (parsers skip them). A chunk holding the blank line and a body
        counts only the bytes up to the blank line.
        """
        tail = self._header_tail
        start = 0 if tail else len(data) - len(data.lstrip(b"\r\n"))
        seen = tail + data[start:]
        end = _BLANK_LINE.search(seen)
        if end is None:
            self._header_bytes += len(data)
            self._header_tail = seen[-2:]
        else:
            self._header_bytes += start + end.end() - len(tail)
            self._header_tail = b""
        return self._header_bytes > self.limits.max_header_bytes

    def _headers_too_large(self) -> Refusal:
        limit = self.limits.max_header_bytes
        return Refusal(431, HEADERS_TOO_LARGE, f"the request's headers exceed {limit} bytes")

    def _phase_now(self) -> str:
        """Where the connection is, from uvicorn's request cycle (see the module docs)."""
        cycle = getattr(self._inner, "cycle", None)
        if cycle is None or cycle.response_complete:
            return _HEADERS  # bytes came, and no request is open: the next one's headers
        return _BODY if cycle.more_body else _BUSY

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self._loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._phase == _BODY:
            transport.close()  # the application is reading: it sees a disconnect
            return
        self._refuse(
            Refusal(
                408,
                REQUEST_TIMEOUT,
                f"the request's headers did not arrive within {self.limits.header_timeout:g} s",
            )
        )

    def _linger(self, transport: asyncio.Transport) -> None:
        """Close a refused connection gently: FIN now, input drained, closed within a second."""
        counter = self.counter
        if counter.lingering >= MAX_LINGERING or not transport.can_write_eof():
            transport.close()
            return
        counter.lingering += 1
        self._lingering = True
        transport.write_eof()
        self._timer = self._loop.call_later(LINGER_SECONDS, transport.close)

    def _refuse(self, refusal: Refusal) -> None:
        transport = self._transport
        if transport is None:
            return
        self._disarm()
        transport.write(canned_response(refusal, self.render[0]))
        transport.close()


def guarded_protocol(
    inner: Callable[..., asyncio.Protocol],
    limits: ConnectionLimits,
    *,
    render: RenderRefusal = refusal_body,
) -> type[GuardedProtocol]:
    """A :class:`GuardedProtocol` class over uvicorn's protocol class ``inner``, for one server.

    Each call makes a class with its own :class:`ConnectionCounter` (reachable
    as ``cls.counter``), so two servers in one process count apart.
    """
    return type(
        "GuardedProtocol",
        (GuardedProtocol,),
        {
            "inner_class": inner,
            "limits": limits,
            "counter": ConnectionCounter(limits),
            "render": (render,),
        },
    )
