"""The ASGI middleware in front of every route: auth, rate limit, body bounds, metrics.

For each ``/v1`` route of :data:`~memstore.protocol.auth.ROUTE_SCOPES`, in
this order: refuse a repeated ``Authorization`` header (400), authenticate
the bearer token (401) against the tokens as they are now (a
:class:`~memstore.web.tokens.TokensFile` re-reads a changed file), take a
token from the tenant's bucket (429), check the route's scope (403), refuse
a query parameter (400: no route of the protocol reads one, so
``POST /v1/recall?k=1`` must not be answered as if it asked for ten), then
for a POST check the media type and coding (415), read the body up to
:data:`~memstore.protocol.limits.MAX_BODY_BYTES` (413) and check that it is
UTF-8 nested at most :data:`~memstore.protocol.limits.MAX_JSON_DEPTH` deep
and names no key twice in one object (400); the parsed body is left in
``request.state`` (:data:`JSON_BODY`) for the recall fast path. A client
that goes away while its body is read is answered nothing. Only then does the
application see the request, with the caller's
:class:`~memstore.protocol.auth.Principal` in ``request.state.principal``.
Checking here, before FastAPI parses anything, keeps the seed's order: an
unauthenticated request with a bad body is a 401, not a 400.

Every answered request is counted in :class:`~memstore.protocol.metrics.Metrics`
(when metrics are on), with its route template as the label.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, MutableMapping
from typing import Any, Final
from urllib.parse import parse_qsl

from memstore.protocol.auth import ROUTE_SCOPES, Principal, TokenTable
from memstore.protocol.errors import ProtocolError, from_refusal, invalid_request
from memstore.protocol.limits import MAX_BODY_BYTES, MAX_JSON_DEPTH
from memstore.protocol.metrics import OTHER, Metrics
from memstore.protocol.ratelimit import RateLimiter
from memstore.web.asgi import ASGIApp, Message, Receive, Scope, Send
from memstore.web.body import (
    NOT_JSON,
    ClientDisconnected,
    check_identity_encoding,
    check_json_media,
    check_json_text,
    parse_unique_keys,
    read_body,
    replay,
)
from memstore.web.headers import headers_named, one_header
from memstore.web.refusal import Refusal, json_bytes, send_json

__all__ = ["JSON_BODY", "Gate", "route_of"]


_ROUTES: Final = (
    ("POST", re.compile(r"/v1/ingest"), "POST /v1/ingest"),
    ("POST", re.compile(r"/v1/recall"), "POST /v1/recall"),
    ("POST", re.compile(r"/v1/forget"), "POST /v1/forget"),
    ("GET", re.compile(r"/v1/snapshot/[^/]+"), "GET /v1/snapshot/{lsn}"),
    ("GET", re.compile(r"/v1/episode/[^/]+"), "GET /v1/episode/{id}"),
    ("GET", re.compile(r"/v1/events"), "GET /v1/events"),
)
_FIXED: Final = {(m, p.pattern): key for m, p, key in _ROUTES if re.escape(p.pattern) == p.pattern}
"""The routes of :data:`_ROUTES` whose path is fixed, by method and path: found without a regex."""
_OPEN: Final = frozenset({"/healthz", "/metrics", "/openapi.json", "/docs"})
_READ_HEADERS: Final = frozenset(
    {b"authorization", b"content-type", b"content-encoding", b"content-length"}
)
"""The headers the gate reads (each must come at most once), found in one pass."""
JSON_BODY: Final = "json_body"
"""The key of ``request.state`` holding a POST body the gate parsed (absent if not JSON)."""


def route_of(method: str, path: str) -> str | None:
    """The key of :data:`ROUTE_SCOPES` a request is for, or None (not a gated route).

    >>> route_of("GET", "/v1/episode/01HZZZZZZZZZZZZZZZZZZZZZZZ"), route_of("GET", "/v1/ingest")
    ('GET /v1/episode/{id}', None)
    """
    key = _FIXED.get((method, path))
    if key is not None:
        return key
    for m, pattern, key in _ROUTES:
        if m == method and pattern.fullmatch(path):
            return key
    return None


def _no_query(route: str, query_string: bytes) -> None:
    """Pass for a request without query parameters: no route of the protocol reads any.

    A parameter would otherwise be ignored, and the caller answered as if it
    had not sent it (``POST /v1/recall?k=1`` with ten hits, ``POST
    /v1/ingest?id=...`` under another id). An empty query string (a bare
    ``?``) is no parameter.

    >>> _no_query("POST /v1/recall", b"&")
    >>> try:
    ...     _no_query("POST /v1/recall", b"k=1")
    ... except ProtocolError as e:
    ...     print(e.status, e.message)
    400 unknown query parameter 'k': POST /v1/recall takes none (its fields go in the body)
    """
    if not query_string:
        return
    params = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    if params:
        name = params[0][0][:64]
        where = " (its fields go in the body)" if route.startswith("POST") else ""
        raise invalid_request(f"unknown query parameter {name!r}: {route} takes none{where}")


async def _answer(error: ProtocolError, send: Send) -> None:
    await send_json(send, error.status, json_bytes(error.body()), error.headers)


class Gate:
    """The middleware; see the module documentation."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Callable[[], TokenTable],
        limiter: RateLimiter,
        metrics: Metrics | None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.limiter = limiter
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        method: str = scope["method"]
        path: str = scope["path"]
        route = route_of(method, path)
        status = 500  # what the metrics count: the answer's status, once it starts
        tenant: str | None = None

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if route is None:
                await self.app(scope, receive, counted)
                return
            try:
                found = headers_named(scope, _READ_HEADERS)
                authorization = one_header(found.get(b"authorization"), b"authorization")
                principal = self.tokens().authenticate(authorization)
                tenant = principal.tenant
                self.limiter.check(tenant)
                principal.require(ROUTE_SCOPES[route])
                _no_query(route, scope.get("query_string", b""))
                if method == "POST":
                    receive = await self._read_body(scope, receive, found)
            except Refusal as r:
                await _answer(from_refusal(r), counted)
                return
            except ProtocolError as e:
                await _answer(e, counted)
                return
            except ClientDisconnected:
                status = 499  # nginx's "client closed request", for the metrics only
                return
            scope.setdefault("state", {})["principal"] = principal
            await self.app(scope, receive, counted)
        finally:
            if self.metrics is not None:
                label = route or (path if path in _OPEN else OTHER)
                elapsed = time.perf_counter() - start
                self.metrics.observe(label, method, status, tenant, elapsed)

    async def _read_body(
        self, scope: Scope, receive: Receive, found: dict[bytes, list[bytes]]
    ) -> Receive:
        """Read a POST body whole, refusing a wrong media type or a compressed, oversized or
        non-JSON text body, or one that repeats a key. ``found``: the request's headers of
        :data:`_READ_HEADERS` (:func:`~memstore.web.headers.headers_named`).

        :raises Refusal: 415, 413 or 400.
        :raises ClientDisconnected: the client went away first.
        """
        check_json_media(one_header(found.get(b"content-type"), b"content-type"))
        check_identity_encoding(one_header(found.get(b"content-encoding"), b"content-encoding"))
        length = one_header(found.get(b"content-length"), b"content-length")
        body = await read_body(receive, self.max_body_bytes, length)
        check_json_text(body, max_depth=MAX_JSON_DEPTH)
        parsed = parse_unique_keys(body)  # 400 for {"k": 1, "k": 100}
        if parsed is not NOT_JSON:
            scope.setdefault("state", {})[JSON_BODY] = parsed
        return replay(body, receive)


def principal_of(state: MutableMapping[str, Any]) -> Principal:
    """The principal the gate put in a request's state (a route behind the gate has one)."""
    principal = state.get("principal")
    if not isinstance(principal, Principal):
        raise RuntimeError("route reached without passing the gate")
    return principal
