"""The ASGI middleware in front of every route: auth, rate limit, body bounds, metrics.

For each ``/v1`` route of :data:`~memstore.protocol.auth.ROUTE_SCOPES`, in
this order: authenticate the bearer token (401), take a token from the
tenant's bucket (429), check the route's scope (403), then for a POST check
the media type (415) and read the body up to
:data:`~memstore.protocol.limits.MAX_BODY_BYTES` (413). Only then does the
application see the request, with the caller's
:class:`~memstore.protocol.auth.Principal` in ``request.state.principal``.
Checking here, before FastAPI parses anything, keeps the seed's order: an
unauthenticated request with a bad body is a 401, not a 400.

Every answered request is counted in :class:`~memstore.protocol.metrics.Metrics`
(when metrics are on), with its route template as the label.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from memstore.protocol.auth import ROUTE_SCOPES, Principal, TokenTable
from memstore.protocol.errors import UNSUPPORTED_MEDIA_TYPE, ProtocolError, payload_too_large
from memstore.protocol.limits import MAX_BODY_BYTES
from memstore.protocol.metrics import OTHER, Metrics
from memstore.protocol.ratelimit import RateLimiter

__all__ = ["Gate", "route_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_ROUTES: Final = (
    ("POST", re.compile(r"/v1/ingest"), "POST /v1/ingest"),
    ("POST", re.compile(r"/v1/recall"), "POST /v1/recall"),
    ("POST", re.compile(r"/v1/forget"), "POST /v1/forget"),
    ("GET", re.compile(r"/v1/snapshot/[^/]+"), "GET /v1/snapshot/{lsn}"),
    ("GET", re.compile(r"/v1/episode/[^/]+"), "GET /v1/episode/{id}"),
    ("GET", re.compile(r"/v1/events"), "GET /v1/events"),
)
_OPEN: Final = frozenset({"/healthz", "/metrics", "/openapi.json", "/docs"})


def route_of(method: str, path: str) -> str | None:
    """The key of :data:`ROUTE_SCOPES` a request is for, or None (not a gated route).

    >>> route_of("GET", "/v1/episode/01HZZZZZZZZZZZZZZZZZZZZZZZ"), route_of("GET", "/v1/ingest")
    ('GET /v1/episode/{id}', None)
    """
    for m, pattern, key in _ROUTES:
        if m == method and pattern.fullmatch(path):
            return key
    return None


def _json_media(content_type: str | None) -> bool:
    if content_type is None:  # no header: read it as JSON (curl --data-binary sends one)
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _answer(error: ProtocolError, send: Send) -> None:
    body = json.dumps(error.body(), ensure_ascii=False, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Gate:
    """The middleware; see the module documentation."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenTable,
        limiter: RateLimiter,
        metrics: Metrics | None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.limiter = limiter
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        method: str = scope["method"]
        path: str = scope["path"]
        route = route_of(method, path)
        seen: dict[str, Any] = {"status": 500, "tenant": None}

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            await send(message)

        try:
            if route is None:
                await self.app(scope, receive, counted)
                return
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            try:
                principal = self.tokens.authenticate(headers.get("authorization"))
                seen["tenant"] = principal.tenant
                self.limiter.check(principal.tenant)
                principal.require(ROUTE_SCOPES[route])
                if method == "POST":
                    receive = await self._read_body(headers, receive)
            except ProtocolError as e:
                await _answer(e, counted)
                return
            scope.setdefault("state", {})["principal"] = principal
            await self.app(scope, receive, counted)
        finally:
            if self.metrics is not None:
                label = route or (path if path in _OPEN else OTHER)
                elapsed = time.perf_counter() - start
                self.metrics.observe(label, method, seen["status"], seen["tenant"], elapsed)

    @staticmethod
    async def _read_body(headers: dict[str, str], receive: Receive) -> Receive:
        """Read a POST body whole, refusing a wrong media type or an oversized body."""
        if not _json_media(headers.get("content-type")):
            raise UNSUPPORTED_MEDIA_TYPE.error(
                f"Content-Type {headers['content-type'][:80]!r} is not application/json"
            )
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise payload_too_large("request body", int(declared), MAX_BODY_BYTES)
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise payload_too_large("request body", size, MAX_BODY_BYTES)
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(parts)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def principal_of(state: MutableMapping[str, Any]) -> Principal:
    """The principal the gate put in a request's state (a route behind the gate has one)."""
    principal = state.get("principal")
    if not isinstance(principal, Principal):
        raise RuntimeError("route reached without passing the gate")
    return principal
