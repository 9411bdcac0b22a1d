"""The Mind Layer ASGI application: :func:`create_app` over a :class:`MindLayer` service.

Starlette routes, each a thin translation of HTTP to one
:class:`~memstore.mindlayer.service.MindLayer` method, run in a worker
thread. Around them, from the outside in:

1. :class:`~memstore.web.security.SecurityHeaders`: an API answer is data, never a page;
2. :class:`~memstore.web.guard.HostOriginGuard`: a foreign ``Host`` (DNS
   rebinding) or a browser ``Origin`` other than the server's own is 403;
3. :class:`OwnerGate`: for every ``/v1`` path, the owner token (401), then
   the owner's rate (``--rate-per-second``, ``--rate-burst``: 429 with
   ``Retry-After``; no limit unless given), then for a route that takes a body
   (a POST or PUT the router knows) the media type and a ``Content-Encoding``
   other than ``identity`` (the body is read as the bytes sent; both 400, as
   seed 002 answers invalid input), the body bound (``--max-body``, 1 MiB by
   default: 413 as soon as the body passes it, never held whole) and the
   nesting check (400); any other method or path goes on to the router's 405
   or 404;
4. :class:`~memstore.web.failsafe.Failsafe`: an unexpected exception is one
   log record and a bare 500; the connection stays usable.

Errors are ``{"error": code, "message": message}``; a provider failure is a
500 whose message names nothing of the provider's answer.

>>> import tempfile
>>> from starlette.testclient import TestClient
>>> from memstore import Memory
>>> from memstore.mindlayer.service import MindLayer
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
...     client = TestClient(create_app(MindLayer(mem)))
...     scope = {"agent": "assistant", "user": "synthetic-user"}
...     _ = client.post("/v1/memories", json={"scope": scope, "id": "diet",
...                     "text": "The user is vegetarian and cooks dinner for two people."})
...     hits = client.post("/v1/search", json={"scope": scope, "query": "vegetarian dinner"})
...     refused = client.post("/v1/search", json={"scope": scope, "query": "x", "k": 2})
>>> [h["memory"]["id"] for h in hits.json()], refused.status_code, refused.json()["error"]
(['diet'], 400, 'invalid_request')
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memstore import __version__
from memstore.arguments import count
from memstore.errors import InvalidItemError, MemstoreError, OutOfRangeError
from memstore.mindlayer.auth import check_bearer
from memstore.mindlayer.errors import (
    MindLayerError,
    internal,
    invalid,
    not_found,
    out_of_range,
    payload_too_large,
    rate_limited,
    unauthorized,
)
from memstore.mindlayer.limits import MAX_BODY_BYTES, MAX_JSON_DEPTH
from memstore.mindlayer.models import (
    ContextRequest,
    IngestRequest,
    PersonalityRequest,
    SearchRequest,
    StoreRequest,
    parse_body,
    query_params,
    scope_of,
)
from memstore.mindlayer.service import MindLayer, QueryVector, SearchStage
from memstore.web.asgi import ASGIApp, Receive, Scope, Send
from memstore.web.batching import BatcherClosed, attach_batcher
from memstore.web.body import (
    ClientDisconnected,
    check_identity_encoding,
    check_json_text,
    is_json_media,
    read_body,
    replay,
)
from memstore.web.failsafe import Failsafe
from memstore.web.guard import HostOriginGuard
from memstore.web.headers import single_header
from memstore.web.hosts import HostPolicy, OriginPolicy
from memstore.web.ratelimit import RateLimiter
from memstore.web.refusal import Refusal, send_refusal
from memstore.web.security import SecurityHeaders
from memstore.web.tokens import TokensFile

__all__ = ["OWNER_BUCKET", "OwnerGate", "create_app"]

Handler = Callable[[Request], Awaitable[Any]]

_log = logging.getLogger("memstore.mindlayer")
_BODY_METHODS: Final = frozenset({"POST", "PUT"})
OWNER_BUCKET: Final = "owner"
"""The rate limiter's one key: every request that passes the owner token is the owner's."""


class OwnerGate:
    """ASGI middleware in front of the ``/v1`` routes: owner token, rate, then body bounds.

    ``token``: the token required (a :class:`~memstore.web.tokens.TokensFile`
    is asked for its current value on every request), or None: no token.
    ``body_routes``: the ``(method, path)`` pairs whose body is checked; a
    request for anything else (a wrong method, an unknown path) is left to the
    router, so it is a 405 or 404 whatever its body. ``limiter``: the token
    buckets a request takes one token from once its owner token passed (one
    key, :data:`OWNER_BUCKET`), or None: no rate limit. ``max_body_bytes``: the
    largest body read.

    The rate is checked after the token, so a caller without it (a 401) takes
    nothing from the owner's bucket and cannot starve the owner; and before the
    body, so a request over the rate costs no read.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: Callable[[], str | None],
        body_routes: frozenset[tuple[str, str]],
        limiter: RateLimiter | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.token = token
        self.body_routes = body_routes
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope["path"]).startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        try:
            authorization = single_header(scope, b"authorization")
            required = self.token()
            if required is not None and not check_bearer(required, authorization):
                denied = unauthorized("send the owner token as Authorization: Bearer <token>")
                raise Refusal(
                    denied.status,
                    denied.code,
                    denied.message,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            if self.limiter is not None:
                wait = self.limiter.acquire(OWNER_BUCKET)
                if wait > 0.0:
                    raise rate_limited(wait).refusal()
            if (scope["method"], scope["path"]) in self.body_routes:
                receive = await self._body(scope, receive)
        except Refusal as r:
            await send_refusal(r, send)
            return
        except ClientDisconnected:
            return
        await self.app(scope, receive, send)

    async def _body(self, scope: Scope, receive: Receive) -> Receive:
        content_type = single_header(scope, b"content-type")
        if content_type is None or not is_json_media(content_type):
            raise invalid("send the body as Content-Type: application/json").refusal()
        try:  # a gzip body read as text it is not, or "br" on plain JSON served as if unsaid
            check_identity_encoding(single_header(scope, b"content-encoding"))
        except Refusal as r:  # 415 in the plumbing; seed 002 answers invalid input 400
            raise Refusal(400, "invalid_request", r.message, headers=r.headers) from None
        limit = self.max_body_bytes
        try:
            body = await read_body(receive, limit, single_header(scope, b"content-length"))
        except Refusal as r:  # 413, as every memstore server answers it; in our words
            size = r.details.get("size")
            sent = size if isinstance(size, int) else limit + 1
            raise payload_too_large(sent, limit).refusal() from None
        check_json_text(body, max_depth=MAX_JSON_DEPTH)
        return replay(body, receive)


def _body_routes(routes: list[Route]) -> frozenset[tuple[str, str]]:
    """The ``(method, path)`` pairs of ``routes`` that take a JSON body (POST, PUT)."""
    return frozenset(
        (method, route.path)
        for route in routes
        for method in route.methods or ()
        if method in _BODY_METHODS
    )


def _answer(error: MindLayerError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def _endpoint(run: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A route: ``run``'s JSON, or the error it raised in the API's taxonomy."""

    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await run(request))
        except MindLayerError as e:
            return _answer(e)
        except OutOfRangeError as e:  # from the engine: its words and code
            return _answer(out_of_range(e))
        except InvalidItemError as e:
            return _answer(invalid(e.reason if hasattr(e, "reason") else str(e)))
        except MemstoreError as e:
            # Provider and embedding failures: our own words, already redacted.
            _log.warning("memstore: %s %s failed: %s", request.method, request.url.path, e)
            return _answer(internal())

    return endpoint


def create_app(
    service: MindLayer,
    *,
    token: str | TokensFile[str] | None = None,
    hosts: HostPolicy | None = None,
    origins: OriginPolicy | None = None,
    limiter: RateLimiter | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """The ASGI app serving ``service``.

    ``token``: the owner token (or a file of it re-read when it changes);
    None: no token (a loopback-only server). ``hosts``: the ``Host`` values
    answered (None: any; the server always gives a policy). ``origins``: web
    origins besides the server's own allowed to call it (None: none, so
    browser pages of other sites are refused). ``limiter``: the owner's token
    bucket (``--rate-per-second``, ``--rate-burst``; None: no rate limit, the
    default). ``max_body_bytes``: the largest request body (``--max-body``);
    a larger one is 413.

    :raises OutOfRangeError: ``max_body_bytes`` below 1 (a ``ValueError``).
    :raises InvalidItemError: ``max_body_bytes`` not a whole number.
    """
    max_body_bytes = count(max_body_bytes, "max_body_bytes", 1)

    def current() -> str | None:
        return token.current() if isinstance(token, TokensFile) else token

    async def body_of(request: Request) -> bytes:
        """The body of a POST or PUT, whose fields are all in it: a query parameter
        (``POST /v1/memories?id=diet``) is refused, not ignored."""
        query_params(request.query_params.multi_items(), ())
        return await request.body()

    async def store(request: Request) -> Any:
        req = parse_body(StoreRequest, await body_of(request))
        return await run_in_threadpool(
            service.remember, req.scope.scope(), req.text, id=req.id, session=req.session
        )

    async def batched(mode: str, query: str, run: Callable[[QueryVector | None], Any]) -> Any:
        """``run`` on the batcher's worker, given the query's vector when its mode uses one."""
        try:
            return await batcher.run(query if service.wants_vector(mode) else None, run)
        except BatcherClosed:
            raise MindLayerError(503, "unavailable", "the server is shutting down") from None

    async def staged(query: str, start: Callable[[], SearchStage[Any]]) -> Any:
        """A hybrid search on the batcher's worker: its lexical pass first, then the query's
        vector only if it still wants one (a confident lexical answer embeds nothing)."""
        try:
            return await batcher.run_staged(query, start)
        except BatcherClosed:
            raise MindLayerError(503, "unavailable", "the server is shutting down") from None

    async def search(request: Request) -> Any:
        req = parse_body(SearchRequest, await body_of(request))
        scope = req.scope.scope()
        if req.mode == "hybrid" and service.wants_vector(req.mode):
            return await staged(
                req.query,
                lambda: service.search_stage(
                    scope, req.query, limit=req.limit, min_relevance=req.min_relevance
                ),
            )
        return await batched(
            req.mode,
            req.query,
            lambda vec: service.search(
                scope,
                req.query,
                mode=req.mode,
                limit=req.limit,
                min_relevance=req.min_relevance,
                query_vector=vec,
            ),
        )

    async def context(request: Request) -> Any:
        req = parse_body(ContextRequest, await body_of(request))
        scope = req.scope.scope()
        if req.mode == "hybrid" and service.wants_vector(req.mode):
            return await staged(
                req.query,
                lambda: service.context_stage(
                    scope,
                    req.query,
                    limit=req.limit,
                    max_chars=req.max_chars,
                    min_relevance=req.min_relevance,
                ),
            )
        return await batched(
            req.mode,
            req.query,
            lambda vec: service.context(
                scope,
                req.query,
                mode=req.mode,
                limit=req.limit,
                max_chars=req.max_chars,
                min_relevance=req.min_relevance,
                query_vector=vec,
            ),
        )

    async def personality(request: Request) -> Any:
        req = parse_body(PersonalityRequest, await body_of(request))
        return await run_in_threadpool(service.set_personality, req.scope.scope(), req.personality)

    async def ingest(request: Request) -> Any:
        req = parse_body(IngestRequest, await body_of(request))
        return await run_in_threadpool(
            service.ingest, req.scope.scope(), req.text, session=req.session
        )

    async def chat(request: Request) -> Any:
        req = parse_body(SearchRequest, await body_of(request))
        return await run_in_threadpool(
            service.chat,
            req.scope.scope(),
            req.query,
            mode=req.mode,
            limit=req.limit,
            min_relevance=req.min_relevance,
        )

    async def export(request: Request) -> Any:
        params = query_params(request.query_params.multi_items(), ("agent", "user"))
        return await run_in_threadpool(service.export, scope_of(params))

    async def forget(request: Request) -> Any:
        params = query_params(request.query_params.multi_items(), ("agent", "user", "id"))
        return await run_in_threadpool(service.forget, scope_of(params), params["id"])

    async def forget_scope(request: Request) -> Any:
        params = query_params(request.query_params.multi_items(), ("agent", "user"))
        return await run_in_threadpool(service.forget_scope, scope_of(params))

    async def healthz(request: Request) -> Any:
        return {"status": "ok", "version": __version__}

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 404:
            return _answer(not_found(f"no route {request.url.path[:200]}"))
        if status == 405:  # Allow: every method of the path (two routes share /v1/memories)
            refused = _answer(
                MindLayerError(405, "method_not_allowed", f"{request.method} is not allowed here")
            )
            refused.headers["Allow"] = ", ".join(sorted(allowed.get(request.url.path, ())))
            return refused
        return _answer(MindLayerError(status, "invalid_request", "the request was refused"))

    routes = [
        Route("/healthz", _endpoint(healthz), methods=["GET"]),
        Route("/v1/memories", _endpoint(store), methods=["POST"]),
        Route("/v1/memories", _endpoint(forget), methods=["DELETE"]),
        Route("/v1/search", _endpoint(search), methods=["POST"]),
        Route("/v1/context", _endpoint(context), methods=["POST"]),
        Route("/v1/personality", _endpoint(personality), methods=["PUT"]),
        Route("/v1/ingest", _endpoint(ingest), methods=["POST"]),
        Route("/v1/chat", _endpoint(chat), methods=["POST"]),
        Route("/v1/export", _endpoint(export), methods=["GET"]),
        Route("/v1/scope", _endpoint(forget_scope), methods=["DELETE"]),
    ]
    allowed: dict[str, set[str]] = {}
    for route in routes:
        allowed.setdefault(route.path, set()).update(route.methods or ())
    failure = internal().refusal()
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(
                HostOriginGuard,
                hosts=hosts or HostPolicy(any_host=True),
                origins=origins or OriginPolicy(),
            ),
            Middleware(
                OwnerGate,
                token=current,
                body_routes=_body_routes(routes),
                limiter=limiter,
                max_body_bytes=max_body_bytes,
            ),
            Middleware(Failsafe, error=failure, logger=_log),
        ],
        exception_handlers={404: http_error, 405: http_error},
    )
    app.router.redirect_slashes = False  # "/v1/search/" is 404, not a bare 307
    # Search and context: their query embeddings batched, off the event loop
    # (memstore.web.batching); the server closes it with close_batcher.
    batcher = attach_batcher(app, service.memory)
    return app
