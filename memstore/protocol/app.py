"""The MemoryProtocol 0.1 ASGI application: :func:`create_app` over a :class:`Memory`.

FastAPI routes translate HTTP to :class:`~memstore.protocol.verbs.Verbs` and
back; the :class:`~memstore.protocol.gate.Gate` middleware authenticates,
rate-limits and bounds bodies before any route runs. Around it, from the
outside in, the shared plumbing of :mod:`memstore.web`: security headers, the
Host and Origin guard, CORS for listed origins; inside it, the failsafe
that answers an unexpected exception with a 500 and keeps the connection.
Every error is the seed's ``{error, message}`` JSON (validation failures are
400, never 422). The OpenAPI document is served at ``/openapi.json``.

>>> import tempfile
>>> from fastapi.testclient import TestClient
>>> from memstore import Memory
>>> from memstore.protocol import TokenTable
>>> tokens = TokenTable.from_json('{"tok": {"tenant": "acme", "scopes": ["ingest", "recall"]}}')
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder="hash") as mem:
...     client = TestClient(create_app(mem, tokens=tokens))
...     auth = {"Authorization": "Bearer tok"}
...     _ = client.post("/v1/ingest", headers=auth,
...                     json={"source": "fs/a.md", "content": "# Onboarding\\nAlice joined Acme."})
...     [h["heading_path"] for h in client.post("/v1/recall", headers=auth,
...                                              json={"query": "Alice"}).json()]
[['Onboarding']]
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from memstore import __version__
from memstore.arguments import count, describe, flag
from memstore.bounded import found_in
from memstore.journal import Journal, Lsn
from memstore.journal.hlc import wall_clock_ms
from memstore.memory import Memory
from memstore.protocol.auth import ROUTE_SCOPES, Principal, TokenTable
from memstore.protocol.confirm import Confirmations
from memstore.protocol.errors import (
    ERROR_KINDS,
    INTERNAL,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNAVAILABLE,
    ProtocolError,
    internal_error,
    invalid_request,
    render_refusal,
)
from memstore.protocol.fastpath import RecallFastPath
from memstore.protocol.gate import Gate, principal_of
from memstore.protocol.limits import MAX_BODY_BYTES, SSE_KEEPALIVE_SECONDS
from memstore.protocol.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from memstore.protocol.metrics import Metrics
from memstore.protocol.models import (
    EpisodeOut,
    ErrorOut,
    ForgetReceiptOut,
    ForgetRequest,
    HealthOut,
    HitOut,
    IngestOut,
    IngestRequest,
    RecallRequest,
)
from memstore.protocol.ratelimit import DEFAULT_BURST, DEFAULT_RATE_PER_SECOND, RateLimiter
from memstore.protocol.verbs import PreparedRecall, Verbs
from memstore.web.batching import BatcherClosed, attach_batcher
from memstore.web.failsafe import Failsafe
from memstore.web.guard import HostOriginGuard, ListedCors
from memstore.web.headers import accepts
from memstore.web.hosts import HostPolicy, OriginPolicy
from memstore.web.lines import line_safe
from memstore.web.mount import Authenticate, Caller, Mount
from memstore.web.refusal import Refusal
from memstore.web.responses import NewlineJSONResponse
from memstore.web.security import SecurityHeaders
from memstore.web.tokens import TokensFile

__all__ = ["NDJSON", "SSE", "applied_lsn", "create_app"]

NDJSON = "application/x-ndjson"
"""The media type of a snapshot."""
SSE = "text/event-stream; charset=utf-8"
"""The media type of a streamed recall and of /v1/events."""

_log = logging.getLogger("memstore.protocol")


def _documented(ok: Any, *statuses: int, media: str | None = None) -> dict[int | str, Any]:
    """OpenAPI ``responses``: ``ok`` for 200 (plus another media type), errors for the rest."""
    out: dict[int | str, Any] = {200: {"model": ok}}
    if media is not None:
        out[200]["content"] = {media: {}}
    for status in statuses:
        out[status] = {"model": ErrorOut}
    return out


_GATED = (401, 403, 429, 500)
_METHODS = ("GET", "POST")


def _error(e: ProtocolError) -> JSONResponse:
    return NewlineJSONResponse(e.body(), status_code=e.status, headers=e.headers)


def _json_syntax(exc: RequestValidationError) -> ProtocolError | None:
    """The refusal of a body that is not JSON, naming the line and column where it breaks.

    An empty body is one too (FastAPI reports it as a missing body, which read
    ``invalid request body: Field required``, naming no field).
    """
    errors = exc.errors()
    if (
        len(errors) == 1
        and errors[0].get("type") == "missing"
        and errors[0].get("loc") == ("body",)
    ):
        return invalid_request(
            "the body is not valid JSON: it is empty (Expecting value at line 1, column 1); "
            "send a JSON object",
            {"line": 1, "column": 1, "position": 0},
        )
    if len(errors) != 1 or errors[0].get("type") != "json_invalid":
        return None
    loc = errors[0].get("loc", ())
    pos = loc[-1] if loc and isinstance(loc[-1], int) else 0
    doc = exc.body if isinstance(exc.body, str) else ""
    line = doc.count("\n", 0, pos) + 1
    column = pos - (doc.rfind("\n", 0, pos) + 1) + 1
    reason = str((errors[0].get("ctx") or {}).get("error", "malformed JSON"))
    return invalid_request(
        f"the body is not valid JSON: {reason} at line {line}, column {column}",
        {"line": line, "column": column, "position": pos},
    )


_PLACES: Final = {"query": "query parameter", "path": "path parameter", "header": "header"}
"""Where a refused value was sent, when not in the body, as the message names it."""


def _validation_message(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    """The 400's message and ``details`` for what FastAPI refused.

    The message names where the first refused value was: a body field
    (``invalid request body: k: ...``) or, for the inspector's routes, a query
    parameter (``invalid query parameter 'limit': ...``), never calling a
    query string a body.
    """
    details, places = [], []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        places.append((loc[0], ".".join(loc[1:])) if loc and loc[0] in _PLACES else None)
        loc = [p for p in loc if p != "body"]
        details.append({"field": ".".join(loc), "problem": str(err.get("msg", ""))})
    if not details:
        return "invalid request body", []
    first = details[0]
    if places[0] is not None:
        place, name = places[0]
        return f"invalid {_PLACES[place]} {name!r}: {first['problem']}", details
    where = f"{first['field']}: " if first["field"] else ""
    return f"invalid request body: {where}{first['problem']}", details


def _sse(event: str, data: object) -> str:
    text = line_safe(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return f"event: {event}\ndata: {text}\n\n"


def applied_lsn(journal: Journal) -> Lsn:
    """The journal position whose writes are all visible in this process.

    A PostgreSQL journal reports where its follower has applied the shared
    record (this process's own writes included); any other journal is the
    only writer, so its head is applied.
    """
    feed_status = getattr(journal, "feed_status", None)
    if feed_status is not None:
        position: Lsn = feed_status().position
        return position
    return journal.head()


def create_app(
    memory: Memory,
    *,
    tokens: TokenTable | TokensFile[TokenTable],
    rate_per_second: float = DEFAULT_RATE_PER_SECOND,
    burst: int = DEFAULT_BURST,
    metrics_enabled: bool = True,
    confirmations: Confirmations | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall_ms: Callable[[], int] = wall_clock_ms,
    keepalive_seconds: float = SSE_KEEPALIVE_SECONDS,
    hosts: HostPolicy | None = None,
    origins: OriginPolicy | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    mounts: Sequence[Mount] = (),
) -> FastAPI:
    """The ASGI app serving ``memory`` (which needs a journal) to the holders of ``tokens``.

    ``tokens``: a table, or a :class:`~memstore.web.tokens.TokensFile` whose
    changes apply from the next request. ``hosts``: the ``Host`` values
    answered (None: any; ``memstore serve`` always gives a policy).
    ``origins``: the web origins besides the server's own whose pages may
    call it (with CORS); None: none.
    ``rate_per_second``/``burst``: each tenant's token bucket. ``metrics_enabled``:
    serve ``GET /metrics`` (404 otherwise). ``confirmations``: seals dry-run
    receipts (a random key by default). ``clock``: the rate limiter's
    monotonic seconds; ``wall_ms``: the wall clock a snapshot's range is checked
    against. ``keepalive_seconds``: idle time before an SSE keep-alive comment.
    ``max_body_bytes``: the largest request body (413 above it).
    ``mounts``: other surfaces' installers (:data:`~memstore.web.mount.Mount`),
    each called with the app, ``memory`` and this server's
    :data:`~memstore.web.mount.Authenticate` once the protocol's routes are in;
    their routes sit behind the same guard, headers and failsafe, and the gate
    leaves them to authenticate themselves.

    :raises ValueError: ``rate_per_second``, ``burst``, ``keepalive_seconds`` or
        ``max_body_bytes`` out of range (:class:`~memstore.errors.OutOfRangeError`
        for the last), before anything is built.
    :raises TypeError: ``tokens`` is neither a table nor a tokens file.
    :raises InvalidItemError: ``metrics_enabled`` is not a bool, ``max_body_bytes``
        not a whole number.
    """
    _check_options(tokens, metrics_enabled, keepalive_seconds, max_body_bytes)
    verbs = Verbs(memory, confirmations=confirmations, wall_ms=wall_ms)
    limiter = RateLimiter(rate_per_second, burst, clock=clock)
    current = tokens.current if isinstance(tokens, TokensFile) else (lambda: tokens)
    metrics = Metrics(lambda: current().tenants) if metrics_enabled else None
    app = FastAPI(
        title="memstore MemoryProtocol",
        version=__version__,
        summary="MemoryProtocol 0.1 (HTTP/SSE) over a memstore Memory",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served below, ending with a newline as every JSON answer
        strict_content_type=False,  # a POST without Content-Type is JSON, as the gate says
        redirect_slashes=False,  # "/v1/recall/" is an unknown route (404), not a bare 307
        default_response_class=NewlineJSONResponse,  # every JSON answer ends with a newline
    )

    async def batched(run: PreparedRecall) -> list[dict[str, Any]]:
        """A recall's hits from the batcher's one worker: it starts the searches of
        the recalls queued together (their lexical passes), embeds in one call the
        queries of those that still want a vector, then finishes each. The event
        loop only parses and answers, and no thread pool contends for the GIL."""
        try:
            if run.start is not None:
                return await batcher.run_staged(run.query, run.start)
            return await batcher.run(run.query, run.search)
        except BatcherClosed:
            raise UNAVAILABLE.error("the server is shutting down") from None

    def counted_hits(tenant: str, hits: list[dict[str, Any]]) -> None:
        if metrics is not None:
            metrics.recalled(tenant, len(hits))

    # add_middleware wraps: the last one added runs first. The first, innermost:
    # plain recalls answered without the router, behind the failsafe and the gate.
    app.add_middleware(RecallFastPath, verbs=verbs, answer=batched, count=counted_hits)
    failure = Refusal(INTERNAL.status, INTERNAL.code, internal_error().message)
    app.add_middleware(Failsafe, error=failure, logger=_log, render=render_refusal)
    app.add_middleware(
        Gate, tokens=current, limiter=limiter, metrics=metrics, max_body_bytes=max_body_bytes
    )
    if origins is not None and origins.listed:  # else no CORS at all: no layer to pass
        app.add_middleware(ListedCors, origins=origins, methods=_METHODS, render=render_refusal)
    app.add_middleware(
        HostOriginGuard,
        hosts=hosts or HostPolicy(any_host=True),
        origins=origins or OriginPolicy(),
        render=render_refusal,
    )
    app.add_middleware(SecurityHeaders)
    _no_422(app)

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_document() -> NewlineJSONResponse:
        return NewlineJSONResponse(app.openapi())

    batcher = attach_batcher(app, memory)  # recall's; memstore.web.batching.close_batcher ends it
    if metrics is not None:
        metrics.count_batcher(batcher)

    @app.exception_handler(ProtocolError)
    async def protocol_error(request: Request, exc: ProtocolError) -> JSONResponse:
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        syntax = _json_syntax(exc)
        if syntax is not None:
            return _error(syntax)
        out_of_range = found_in(exc.errors())
        if out_of_range is not None:  # the engine's words and code, as every adapter says it
            found = {"code": out_of_range.code, **out_of_range.details()}
            return _error(invalid_request(str(out_of_range), found))
        message, details = _validation_message(exc)
        return _error(invalid_request(message, {"errors": details} if details else None))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 405:  # with the router's Allow header, which a 405 must carry
            return _error(
                METHOD_NOT_ALLOWED.error(
                    f"{request.method} is not allowed here", headers=exc.headers
                )
            )
        if exc.status_code == 404:
            return _error(NOT_FOUND.error(f"no route {request.url.path[:200]}"))
        return _error(_documented_error(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.error("memstore: %s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(internal_error())

    @app.get(
        "/healthz", tags=["operations"], response_model=None, responses={200: {"model": HealthOut}}
    )
    def healthz() -> dict[str, Any]:
        """Liveness probe: no auth, no rate limit; ``lsn`` is the applied journal position."""
        return {"ok": True, "version": __version__, "lsn": str(applied_lsn(verbs.journal))}

    @app.get("/metrics", tags=["operations"], response_class=Response)
    def prometheus() -> Response:
        """Prometheus text exposition (404 when metrics are disabled)."""
        if metrics is None:
            raise NOT_FOUND.error("metrics are disabled on this server")
        return Response(metrics.exposition(), media_type=METRICS_CONTENT_TYPE)

    @app.post(
        "/v1/ingest",
        tags=["verbs"],
        response_model=None,
        responses=_documented(IngestOut, 400, 413, 415, *_GATED),
    )
    def ingest(body: IngestRequest, request: Request) -> dict[str, Any]:
        """Ingest one episode: chunked, embedded and written in one transaction."""
        tenant = principal_of(request.scope["state"]).tenant
        out = verbs.ingest(tenant, body)
        if metrics is not None:
            metrics.episodes.labels(metrics.tenant_label(tenant)).inc()
        return out

    @app.post(
        "/v1/recall",
        tags=["verbs"],
        response_model=None,
        responses=_documented(list[HitOut], 400, 413, 415, 501, *_GATED, media="text/event-stream"),
    )
    async def recall(body: RecallRequest, request: Request) -> Any:
        """Hybrid retrieval over the tenant's chunks; SSE with ``Accept: text/event-stream``."""
        tenant = principal_of(request.scope["state"]).tenant
        run = verbs.prepare_recall(tenant, body)
        if accepts(", ".join(request.headers.getlist("accept")), "text/event-stream"):
            counted = _counting(run, metrics, tenant)
            return StreamingResponse(_recall_stream(counted, keepalive_seconds), media_type=SSE)
        if body.as_of is not None:  # linear in the tenant's past chunks: its own thread
            hits = await run_in_threadpool(run)
        else:
            hits = await batched(run)
        counted_hits(tenant, hits)
        # The hits are plain JSON values already: answered as they are, without
        # FastAPI's jsonable_encoder walk over every field (the same bytes).
        return NewlineJSONResponse(hits)

    @app.post(
        "/v1/forget",
        tags=["verbs"],
        response_model=None,
        responses=_documented(ForgetReceiptOut, 400, 413, 415, 428, *_GATED),
    )
    def forget(body: ForgetRequest, request: Request) -> dict[str, Any]:
        """Soft delete, dry run, or hard delete confirmed by a dry run's receipt."""
        tenant = principal_of(request.scope["state"]).tenant
        receipt = verbs.forget(tenant, body)
        if metrics is not None and not receipt["preview"]:
            mode = "hard" if body.hard else "soft"
            removed = int(receipt["rows_written"]) + int(receipt["rows_deleted"])
            metrics.forgotten.labels(metrics.tenant_label(tenant), mode).inc(removed)
        return receipt

    @app.get(
        "/v1/snapshot/{lsn}",
        tags=["verbs"],
        response_class=StreamingResponse,
        responses={
            200: {"content": {NDJSON: {}}},
            400: {"model": ErrorOut},
            404: {"model": ErrorOut},
        },
    )
    async def snapshot(lsn: str, request: Request) -> StreamingResponse:
        """The tenant's primitives visible at ``lsn``, one JSON object per line."""
        tenant = principal_of(request.scope["state"]).tenant
        lines = verbs.snapshot(tenant, lsn)  # 400 / 404 before the stream starts
        # Read in one worker thread: a journal cursor must not hop between threads.
        rows = await run_in_threadpool(list, lines)
        return StreamingResponse(iter(rows), media_type=NDJSON)

    @app.get(
        "/v1/episode/{id}",
        tags=["verbs"],
        response_model=None,
        responses=_documented(EpisodeOut, 400, 404, *_GATED),
    )
    def episode(id: str, request: Request) -> dict[str, Any]:
        """One episode of the caller's tenant, as ingested."""
        return verbs.episode(principal_of(request.scope["state"]).tenant, id)

    @app.get("/v1/events", tags=["verbs"], response_class=StreamingResponse)
    async def events(request: Request) -> StreamingResponse:
        """The tenant's change stream as SSE, resumable with ``Last-Event-ID``."""
        tenant = principal_of(request.scope["state"]).tenant
        hub = memory.hub
        if hub is None:
            raise NOT_FOUND.error("this server has no change hub")
        from memstore_hub.sse import astream

        frames = astream(
            hub,
            last_event_id=request.headers.get("last-event-id"),
            topics={"change"},
            partition=tenant,
            shared=False,  # a tenant owns only its own items: recall's rule (owned_by)
            keepalive=keepalive_seconds,
        )
        # Subscribed now, before the answer's headers go out (the generator subscribes at its
        # first step, which a StreamingResponse takes only after sending them): a client
        # that has the headers, and shows itself live, is sent every change made after.
        first = await anext(frames)
        authorization = request.headers.get("authorization")
        still_allowed = _still_allowed(current, authorization, principal_of(request.scope["state"]))
        return StreamingResponse(_while(still_allowed, frames, first), media_type=SSE)

    authenticate = _authenticator(current, limiter)
    for mount in mounts:
        mount(app, memory, authenticate)
    return app


def _check_options(
    tokens: object, metrics_enabled: object, keepalive_seconds: object, max_body_bytes: object
) -> None:
    """Refuse the :func:`create_app` options that would fail later, request by request.

    Unchecked, ``keepalive_seconds=0`` sent keep-alive comments in a busy loop
    for as long as a streamed recall ran, ``max_body_bytes="x"`` made every POST
    a 500, and a ``tokens`` of another type failed every request; each is
    refused here, as ``memstore serve`` refuses its flags.
    """
    if not isinstance(tokens, TokenTable | TokensFile):
        raise TypeError(f"tokens must be a TokenTable or a TokensFile, got {describe(tokens)}")
    flag(metrics_enabled, "metrics_enabled")
    count(max_body_bytes, "max_body_bytes", 1)
    if (
        isinstance(keepalive_seconds, bool)
        or not isinstance(keepalive_seconds, int | float)
        or not (math.isfinite(keepalive_seconds) and keepalive_seconds > 0)
    ):
        raise ValueError(
            f"keepalive_seconds must be a positive number of seconds, "
            f"got {describe(keepalive_seconds)}"
        )


def _still_allowed(
    tokens: Callable[[], TokenTable], authorization: str | None, principal: Principal
) -> Callable[[], bool]:
    """Whether the token of an open stream still acts for its tenant with its scope.

    A stream outlives the check the gate made when it opened: a token removed
    from the tokens file (or moved to another tenant, or stripped of the scope)
    must stop receiving the tenant's changes, not keep them until it disconnects.
    """
    scope = ROUTE_SCOPES["GET /v1/events"]

    def check() -> bool:
        try:
            now = tokens().authenticate(authorization)
        except ProtocolError:
            return False
        return now.tenant == principal.tenant and scope in now.scopes

    return check


async def _while(
    allowed: Callable[[], bool], frames: AsyncGenerator[str, None], first: str
) -> AsyncIterator[str]:
    """``first``, then ``frames``, while ``allowed()`` holds, checked before each (keep-alives
    too); then the end.

    Each frame is made :func:`~memstore.web.lines.line_safe`: an item's text with a
    U+2028 in it must not split a ``data:`` line for a reader that breaks lines there.
    """
    try:
        if not allowed():
            return
        yield line_safe(first)
        async for frame in frames:
            if not allowed():
                return
            yield line_safe(frame)  # its only free text is the JSON of its data lines
    finally:
        await frames.aclose()  # unsubscribe now, not when the generator is collected


def _authenticator(tokens: Callable[[], TokenTable], limiter: RateLimiter) -> Authenticate:
    """The server's tokens and rate limit as a mount sees them: a header to a caller."""

    def authenticate(authorization: str | None) -> Caller:
        try:
            principal = tokens().authenticate(authorization)
            limiter.check(principal.tenant)
        except ProtocolError as e:
            raise Refusal(e.status, e.code, e.message, e.details, headers=e.headers) from None
        return Caller(principal.tenant, principal.scopes)

    return authenticate


def _documented_error(status: int, message: str) -> ProtocolError:
    """An HTTP error raised inside the framework, as a code of the documented table.

    The gate and the models refuse what they know first; this is the net under
    them: any other 4xx is ``invalid_request`` (or the table's code of that
    status), never a code the table lacks.
    """
    for kind in ERROR_KINDS.values():
        if kind.status == status:
            return kind.error(message)
    if 400 <= status < 500:
        return invalid_request(message)
    return internal_error()


def _no_422(app: FastAPI) -> None:
    """Drop FastAPI's default 422 answers from the OpenAPI document: this server answers 400."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _counting(
    run: Callable[[], list[dict[str, Any]]], metrics: Metrics | None, tenant: str
) -> Callable[[], list[dict[str, Any]]]:
    if metrics is None:
        return run

    def counted() -> list[dict[str, Any]]:
        hits = run()
        metrics.recalled(tenant, len(hits))
        return hits

    return counted


async def _recall_stream(
    run: Callable[[], list[dict[str, Any]]], keepalive_seconds: float
) -> AsyncIterator[str]:
    """``event: hit`` per hit then ``event: done``; keep-alive comments while the search runs."""
    task = asyncio.ensure_future(run_in_threadpool(run))
    while True:
        done, _ = await asyncio.wait({task}, timeout=keepalive_seconds)
        if done:
            break
        yield ": keep-alive\n\n"
    try:
        hits = task.result()
    except Exception:
        _log.exception("memstore: streamed recall failed")
        yield _sse("error", internal_error().body())
        return
    for hit in hits:
        yield _sse("hit", hit)
    yield _sse("done", {})
