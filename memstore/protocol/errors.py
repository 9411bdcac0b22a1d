"""The error taxonomy of the HTTP adapter: one exception, one body shape.

Every error the adapter answers with is a :class:`ProtocolError` carrying an
HTTP status, a stable machine-readable ``code``, a human message and optional
``details``. Its JSON body is the seed's shape, ``{"error": code, "message":
message}``, with a ``details`` object added only when there are details (a
backwards-compatible addition: clients that read ``error`` and ``message``
see exactly what the seed shows).

>>> err = confirmation_required()
>>> err.status, err.body()["error"]
(428, 'confirmation_required')
>>> err.body()["message"]
'hard-delete requires confirmation_token (serialized prior ForgetReceipt JSON)'
>>> rate_limited(2.1).headers
{'Retry-After': '3'}

The table of codes is :data:`ERROR_KINDS`; ``docs/protocol.md`` prints the same
table and a test keeps the two in step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from memstore.errors import MemstoreError
from memstore.protocol.filter import FilterSyntaxError
from memstore.web.refusal import Refusal, json_bytes

__all__ = [
    "CONFIRMATION_REQUIRED",
    "CONFIRMATION_REQUIRED_MESSAGE",
    "EPISODE_NOT_FOUND",
    "ERROR_KINDS",
    "FORBIDDEN",
    "FORBIDDEN_HOST",
    "FORBIDDEN_ORIGIN",
    "GRAPH_UNAVAILABLE",
    "HEADERS_TOO_LARGE",
    "INTERNAL",
    "INVALID_CONFIRMATION_TOKEN",
    "INVALID_EPISODE_ID",
    "INVALID_FILTER",
    "INVALID_LSN",
    "INVALID_REQUEST",
    "METHOD_NOT_ALLOWED",
    "NOT_FOUND",
    "PAYLOAD_TOO_LARGE",
    "RATE_LIMITED",
    "REQUEST_TIMEOUT",
    "SNAPSHOT_OUT_OF_RANGE",
    "UNAUTHORIZED",
    "UNAVAILABLE",
    "UNSUPPORTED_MEDIA_TYPE",
    "ErrorKind",
    "ProtocolError",
    "confirmation_required",
    "episode_not_found",
    "error_body",
    "forbidden",
    "from_refusal",
    "internal_error",
    "invalid_confirmation_token",
    "invalid_episode_id",
    "invalid_filter",
    "invalid_lsn",
    "invalid_request",
    "payload_too_large",
    "rate_limited",
    "render_refusal",
    "retry_after_header",
    "snapshot_out_of_range",
    "unauthorized",
]


@dataclass(frozen=True, slots=True)
class ErrorKind:
    """One row of the error taxonomy: a code, its HTTP status, and when it is used."""

    code: str
    """The stable value of the body's ``error`` field, e.g. ``"invalid_lsn"``."""
    status: int
    """The HTTP status answered with it."""
    when: str
    """When the adapter answers with it (the documentation of the row)."""

    def error(
        self,
        message: str,
        details: Mapping[str, object] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> ProtocolError:
        """A :class:`ProtocolError` of this kind."""
        return ProtocolError(self.status, self.code, message, details, headers=headers)


INVALID_REQUEST: Final = ErrorKind(
    "invalid_request",
    400,
    "the body is not UTF-8 JSON, nests deeper than MAX_JSON_DEPTH, is not a JSON object, "
    "misses a required field, has a field of the wrong type or value (text with a lone "
    "surrogate too, or a `NaN`, `Infinity` or overflowing number such as `1e400` in "
    "`metadata`), has a field the verb does not know, or names a key twice in one object; "
    "or the request repeats its "
    "Authorization header, or carries a query parameter (no route reads one)",
)
INVALID_FILTER: Final = ErrorKind(
    "invalid_filter",
    400,
    "the recall `filter` is not v0 filter DSL; `details` says where and what was expected",
)
INVALID_LSN: Final = ErrorKind(
    "invalid_lsn",
    400,
    "the snapshot path parameter is not `wall_ms.counter[.node_id]`",
)
INVALID_EPISODE_ID: Final = ErrorKind(
    "invalid_episode_id",
    400,
    "the episode path parameter is not a 26-character Crockford base-32 ULID",
)
INVALID_CONFIRMATION_TOKEN: Final = ErrorKind(
    "invalid_confirmation_token",
    400,
    "a hard forget's `confirmation_token` is not a receipt this server issued for this "
    "tenant and target, or it has expired or was already used",
)
UNAUTHORIZED: Final = ErrorKind(
    "unauthorized",
    401,
    "the Authorization header is missing, is not `Bearer <token>`, or names an unknown token",
)
FORBIDDEN: Final = ErrorKind(
    "forbidden",
    403,
    "the token is valid but lacks the scope the route requires",
)
FORBIDDEN_HOST: Final = ErrorKind(
    "forbidden_host",
    403,
    "the Host header is missing, repeated, or not a name this server answers to "
    "(a loopback name, or one of --allow-host)",
)
FORBIDDEN_ORIGIN: Final = ErrorKind(
    "forbidden_origin",
    403,
    "the Origin header is repeated, or names a web origin other than the server's own "
    "and those of --allow-origin",
)
NOT_FOUND: Final = ErrorKind(
    "not_found",
    404,
    "no such route (also GET /metrics when metrics are disabled)",
)
EPISODE_NOT_FOUND: Final = ErrorKind(
    "episode_not_found",
    404,
    "no episode with that id in the caller's tenant",
)
SNAPSHOT_OUT_OF_RANGE: Final = ErrorKind(
    "snapshot_out_of_range",
    404,
    "the snapshot Lsn's wall_ms is later than the server's current wall clock",
)
METHOD_NOT_ALLOWED: Final = ErrorKind(
    "method_not_allowed",
    405,
    "the route exists but not with this HTTP method",
)
REQUEST_TIMEOUT: Final = ErrorKind(
    "request_timeout",
    408,
    "the request's headers did not arrive within --header-timeout; the connection is closed",
)
PAYLOAD_TOO_LARGE: Final = ErrorKind(
    "payload_too_large",
    413,
    "the request body, or an episode's content, is larger than the documented limit",
)
UNSUPPORTED_MEDIA_TYPE: Final = ErrorKind(
    "unsupported_media_type",
    415,
    "a POST body whose Content-Type is not application/json, or whose Content-Encoding is "
    "not `identity` (a compressed body; `Accept-Encoding: identity` says so)",
)
CONFIRMATION_REQUIRED: Final = ErrorKind(
    "confirmation_required",
    428,
    "a hard forget without a `confirmation_token`",
)
HEADERS_TOO_LARGE: Final = ErrorKind(
    "headers_too_large",
    431,
    "the request line and headers are larger than MAX_HEADER_BYTES; the connection is closed",
)
RATE_LIMITED: Final = ErrorKind(
    "rate_limited",
    429,
    "the tenant's token bucket is empty; the Retry-After header says when to retry",
)
INTERNAL: Final = ErrorKind(
    "internal",
    500,
    "a storage or engine failure; the message names no internals",
)
GRAPH_UNAVAILABLE: Final = ErrorKind(
    "graph_unavailable",
    501,
    "recall with mode `graph` on a server that cannot traverse links",
)
UNAVAILABLE: Final = ErrorKind(
    "unavailable",
    503,
    "the server is shutting down and takes no new requests, or it (or the client's address) "
    "holds as many connections as --max-connections (--max-connections-per-client) allow; "
    "the connection is closed; or a forget on a replica still 10 s behind the others "
    "sharing its PostgreSQL journal (nothing forgotten: send it again)",
)

ERROR_KINDS: Final[Mapping[str, ErrorKind]] = {
    kind.code: kind
    for kind in (
        INVALID_REQUEST,
        INVALID_FILTER,
        INVALID_LSN,
        INVALID_EPISODE_ID,
        INVALID_CONFIRMATION_TOKEN,
        UNAUTHORIZED,
        FORBIDDEN,
        FORBIDDEN_HOST,
        FORBIDDEN_ORIGIN,
        NOT_FOUND,
        EPISODE_NOT_FOUND,
        SNAPSHOT_OUT_OF_RANGE,
        METHOD_NOT_ALLOWED,
        REQUEST_TIMEOUT,
        PAYLOAD_TOO_LARGE,
        UNSUPPORTED_MEDIA_TYPE,
        CONFIRMATION_REQUIRED,
        HEADERS_TOO_LARGE,
        RATE_LIMITED,
        INTERNAL,
        GRAPH_UNAVAILABLE,
        UNAVAILABLE,
    )
}
"""Every error code the adapter answers with, in documentation order."""

CONFIRMATION_REQUIRED_MESSAGE: Final = (
    "hard-delete requires confirmation_token (serialized prior ForgetReceipt JSON)"
)
"""The seed's message for 428 ``confirmation_required``, verbatim."""


class ProtocolError(MemstoreError):
    """An error the HTTP adapter answers with: status, code, message, details.

    ``headers`` are extra response headers (``Retry-After`` on a 429,
    ``WWW-Authenticate`` on a 401). ``details`` must be JSON-serialisable.

    >>> ProtocolError(404, "episode_not_found", "no episode 01H...")
    ProtocolError(404, 'episode_not_found', 'no episode 01H...')
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
        if not 400 <= status <= 599:
            raise ValueError(f"a protocol error needs a 4xx or 5xx status, got {status}")
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, object] = dict(details or {})
        self.headers: dict[str, str] = dict(headers or {})

    def body(self) -> dict[str, object]:
        """The JSON body: ``{"error", "message"}``, plus ``"details"`` when there are some."""
        return error_body(self.code, self.message, self.details)

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"

    def __repr__(self) -> str:
        extra = f", {self.details!r}" if self.details else ""
        return f"ProtocolError({self.status}, {self.code!r}, {self.message!r}{extra})"


def error_body(
    code: str, message: str, details: Mapping[str, object] | None = None
) -> dict[str, object]:
    """The seed's error body ``{"error": code, "message": message}``.

    A non-empty ``details`` mapping is added under ``"details"``; an empty one
    is left out so that the seed's own examples come out byte for byte.

    >>> error_body("invalid_lsn", "bad")
    {'error': 'invalid_lsn', 'message': 'bad'}
    >>> error_body("invalid_filter", "bad", {"position": 3})
    {'error': 'invalid_filter', 'message': 'bad', 'details': {'position': 3}}
    """
    body: dict[str, object] = {"error": code, "message": message}
    if details:
        body["details"] = dict(details)
    return body


def retry_after_header(seconds: float) -> str:
    """The ``Retry-After`` value for a wait of ``seconds``: whole seconds, at least 1.

    HTTP's delta-seconds are integers; rounding up means a client that waits
    exactly that long finds a token in the bucket.

    >>> retry_after_header(0.01), retry_after_header(2.0), retry_after_header(2.5)
    ('1', '2', '3')
    """
    if math.isnan(seconds):
        raise ValueError("retry-after seconds must be a number")
    return str(max(1, math.ceil(seconds)))


# --- constructors for the cases the seed spells out ------------------------------------


def invalid_request(message: str, details: Mapping[str, object] | None = None) -> ProtocolError:
    """400 ``invalid_request``: the body does not fit the verb's request shape."""
    return INVALID_REQUEST.error(message, details)


def invalid_filter(exc: FilterSyntaxError) -> ProtocolError:
    """400 ``invalid_filter`` from a filter parse error, saying where and what was expected.

    ``details`` carries ``position`` (0-based offset), ``line`` and ``column``
    (1-based), ``expected`` and ``found``.
    """
    details: dict[str, object] = {
        "position": exc.position,
        "line": exc.line,
        "column": exc.column,
        "expected": exc.expected,
        "found": exc.found,
    }
    return INVALID_FILTER.error(str(exc), details)


def invalid_lsn(raw: str) -> ProtocolError:
    """400 ``invalid_lsn``: the snapshot path parameter is not ``wall_ms.counter[.node_id]``."""
    return INVALID_LSN.error(
        f"lsn {raw[:64]!r} is not in wall_ms.counter[.node_id] form "
        "(decimal numbers, e.g. 1745251800123.0)"
    )


def snapshot_out_of_range(wall_ms: int, now_ms: int) -> ProtocolError:
    """404 ``snapshot_out_of_range``: the Lsn is in the future of the server's clock."""
    return SNAPSHOT_OUT_OF_RANGE.error(
        f"lsn wall_ms {wall_ms} is later than the server's current wall clock {now_ms}",
        {"wall_ms": wall_ms, "now_ms": now_ms},
    )


def invalid_episode_id(raw: str) -> ProtocolError:
    """400 ``invalid_episode_id``: not a 26-character Crockford base-32 ULID."""
    return INVALID_EPISODE_ID.error(
        f"episode id {raw[:64]!r} is not a 26-character Crockford base-32 ULID"
    )


def episode_not_found(episode_id: str) -> ProtocolError:
    """404 ``episode_not_found`` in the caller's tenant (other tenants' episodes look the same)."""
    return EPISODE_NOT_FOUND.error(f"no episode {episode_id} in this tenant")


def confirmation_required() -> ProtocolError:
    """428 ``confirmation_required``, with the seed's message verbatim."""
    return CONFIRMATION_REQUIRED.error(CONFIRMATION_REQUIRED_MESSAGE)


def invalid_confirmation_token(reason: str) -> ProtocolError:
    """400 ``invalid_confirmation_token``: ``"confirmation_token must be ...: <reason>"``."""
    return INVALID_CONFIRMATION_TOKEN.error(
        f"confirmation_token must be a serialized ForgetReceipt: {reason}"
    )


def unauthorized(reason: str) -> ProtocolError:
    """401 ``unauthorized`` with ``WWW-Authenticate: Bearer`` (RFC 6750).

    ``reason`` says which of missing, malformed or unknown it was; it never
    echoes the presented token.
    """
    return UNAUTHORIZED.error(reason, headers={"WWW-Authenticate": 'Bearer realm="memstore"'})


def forbidden(required_scope: str) -> ProtocolError:
    """403 ``forbidden``: the token lacks ``required_scope``."""
    return FORBIDDEN.error(
        f"this token lacks the {required_scope!r} scope this route requires",
        {"required_scope": required_scope},
    )


def rate_limited(retry_after_seconds: float) -> ProtocolError:
    """429 ``rate_limited`` with a ``Retry-After`` header in whole seconds (rounded up)."""
    header = retry_after_header(retry_after_seconds)
    return RATE_LIMITED.error(
        f"rate limit exceeded for this tenant; retry after {header} s",
        {"retry_after": int(header)},
        headers={"Retry-After": header},
    )


def payload_too_large(what: str, size: int, limit: int) -> ProtocolError:
    """413 ``payload_too_large``: ``what`` (``"request body"``, ``"content"``) is over ``limit``."""
    return PAYLOAD_TOO_LARGE.error(
        f"{what} is {size} bytes; the limit is {limit}",
        {"limit": limit, "size": size},
    )


def from_refusal(refusal: Refusal) -> ProtocolError:
    """The :class:`ProtocolError` of a request the HTTP plumbing refused (its code is in the table).

    >>> from memstore.web.refusal import FORBIDDEN_HOST
    >>> from_refusal(Refusal(403, FORBIDDEN_HOST, "no"))
    ProtocolError(403, 'forbidden_host', 'no')
    """
    kind = ERROR_KINDS.get(refusal.code)
    if kind is None or kind.status != refusal.status:
        raise ValueError(f"{refusal!r} is not in the protocol's error table")
    return kind.error(refusal.message, refusal.details, headers=refusal.headers)


def render_refusal(refusal: Refusal) -> bytes:
    """The JSON body of a refused request, in the protocol's shape (for :mod:`memstore.web`)."""
    return json_bytes(from_refusal(refusal).body())


def internal_error() -> ProtocolError:
    """500 ``internal``: a failure whose details stay in the server log."""
    return INTERNAL.error("internal error; the server log has the details")
