"""The streamable HTTP transport at ``/mcp``: loopback by default, bearer tokens otherwise.

On a loopback address the endpoint needs no token (as a stdio server needs
none). A server reachable from the network must be given a tokens file
(``--tokens-file``, the JSON shape of ``memstore serve``'s: a map from token to
``{"tenant": ..., "scopes": [...]}``): every request then needs
``Authorization: Bearer <token>``, the token's tenant is the partition its
calls read and write, and its scopes (``recall``, ``ingest``, ``forget``)
decide which tools it may call. The header is read as ``memstore serve``
reads it (:func:`memstore.web.bearer.bearer_token`: any case of
``Bearer``; :func:`memstore.web.headers.single_header`: sent once), the file
is parsed by the same function (:func:`memstore.web.tokens.parse_token_entries`:
what one refuses the other refuses, in the same words), and it is re-read as
``memstore serve`` re-reads its own: when it changes, and on SIGHUP (a change
that cannot be used is logged; the tokens before stay).

What the endpoint refuses itself is answered as every refusal of ``/mcp`` is,
a JSON-RPC error with ``id`` ``null`` (:func:`~memstore.mcp.gate.refuse`): a
method other than GET, POST and DELETE (405 with ``Allow``), no token (401
with ``WWW-Authenticate: Bearer``), a token it does not know (401 with
``error="invalid_token"`` in the challenge), the header twice (400), and a
GET without ``Mcp-Session-Id`` (405 with ``Allow: POST, DELETE``: no stream
without a session, and a client of the TypeScript SDK goes on only after a 405),
and a DELETE without it (400: there is no session to end). A request to any
other path is 404, in the same shape (Starlette's own was plain text); ``/mcp/``
is not another path but the endpoint itself, as a client configured with the
slash expects (Starlette answered it with a 307 to ``/mcp``).

In front of the endpoint sit the HTTP defences every memstore server shares
(:mod:`memstore.web`, configured by the same flags as ``memstore serve``'s,
read by :func:`memstore.web.settings.http_settings`): security headers on
every answer; :class:`~memstore.web.guard.HostOriginGuard` (403 for a
``Host`` the server does not answer, which defeats DNS rebinding on a
loopback bind, and for a foreign ``Origin``; ``--allow-host``,
``--allow-origin``); :class:`~memstore.web.guard.ListedCors` for the listed
origins (the MCP request headers allowed, ``Mcp-Session-Id`` exposed); then,
once a request is authenticated, its tenant's token bucket
(``--rate-per-second``, ``--rate-burst``: 429 with ``Retry-After``; without
a tokens file every request is the one tenant's) and the body limit
(``--max-body``, 413). Read timeouts and connection caps are
:func:`memstore.web.runner.serve_app`'s, around every connection. Every
refusal is a JSON-RPC error with ``id`` ``null``.

The SDK runs stateful: ``initialize`` opens a session whose id the answer
carries in ``Mcp-Session-Id``. A GET with that id opens the session's stream
of server messages (``text/event-stream``; a second one at once is 409); a GET
with an id the server does not know is 404, which the specification tells a
client to answer with a new ``initialize``. With a tokens file a session is
bound to the token that opened it (the MCP specification's security guidance:
bind a session to its user): a request carrying the id with any other token,
even one of the same tenant and scopes, gets that same 404, so it can neither
use the session, nor read its stream, nor end it, nor learn that it exists.
The same token and not the same tenant and scopes: two tokens are two clients
(or two holders), and a session's stream and its end are one client's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from memstore.errors import MemstoreError
from memstore.web.bearer import bearer_token
from memstore.web.guard import CORS_HEADERS, HostOriginGuard, ListedCors
from memstore.web.headers import single_header
from memstore.web.hosts import is_loopback
from memstore.web.ratelimit import RateLimiter, retry_after_seconds
from memstore.web.refusal import Refusal
from memstore.web.security import SecurityHeaders
from memstore.web.settings import HttpSettings
from memstore.web.tokens import ADMIN_SCOPE, TokensFile, TokensFileError, parse_token_entries

from .framing import error_reply
from .gate import gate, null_error_ids, refusal_response, refuse, render_refusal
from .toolkit import SCOPE_FORGET, SCOPE_READ, SCOPE_WRITE, Caller

__all__ = [
    "CALLER_KEY",
    "MCP_PATH",
    "TokenMap",
    "TokensError",
    "http_app",
    "is_loopback",
    "load_tokens",
    "parse_tokens",
    "quiet_hangups",
]

MCP_PATH: Final = "/mcp"
CALLER_KEY: Final = "memstore.caller"
"""Where the authenticated :class:`Caller` rides in the ASGI scope."""
_SCOPES: Final = (SCOPE_WRITE, SCOPE_READ, SCOPE_FORGET, ADMIN_SCOPE)
"""What a token may hold: ``admin`` is taken and grants nothing here (one file, every surface)."""


@dataclass(frozen=True)
class TokenMap:
    """Tokens by their SHA-256, each with the caller it authenticates."""

    by_digest: Mapping[bytes, tuple[str, Caller]]

    def caller(self, authorization: str | None) -> Caller | None:
        """The caller a request's ``Authorization`` header authenticates, or ``None``.

        >>> table = TokenMap({hashlib.sha256(b"t").digest(): ("t", Caller("acme"))})
        >>> table.caller("bearer t"), table.caller("Basic t")
        (Caller(partition='acme', scopes=None), None)
        """
        token = bearer_token(authorization)
        if token is None:
            return None
        entry = self.by_digest.get(hashlib.sha256(token.encode()).digest())
        if entry is None or not hmac.compare_digest(entry[0], token):
            return None
        return entry[1]


TokensError = TokensFileError
"""A tokens file that cannot be used (:class:`memstore.web.tokens.TokensFileError`)."""


def load_tokens(path: str | Path) -> TokensFile[TokenMap]:
    """The tokens file at ``path``, re-read when it changes (and on SIGHUP, by the server).

    A change that cannot be used is logged and the tokens read before stay.

    :raises MemstoreError: it cannot be read or used now (a server must not start).
    """
    try:
        return TokensFile(path, parse_tokens)
    except TokensError as e:
        raise MemstoreError(f"--tokens-file {path}: {e}") from None
    except (OSError, ValueError) as e:  # ValueError: bytes that are not UTF-8
        raise MemstoreError(f"--tokens-file {path}: cannot read it ({e})") from None


def parse_tokens(text: str) -> TokenMap:
    """A tokens file's text as a :class:`TokenMap`.

    Parsed as ``memstore serve`` parses its own
    (:func:`~memstore.web.tokens.parse_token_entries`), the scopes being
    ``ingest``, ``recall`` and ``forget``, and ``admin``, taken and granting
    nothing here (it shows ``memstore serve``'s inspector the server's own
    figures), so one file serves both. An entry with no scope
    authenticates a caller whose every tool call is refused; an empty map
    (``{}``) authenticates nobody, so emptying the file revokes every token
    at once, without a restart.

    >>> parse_tokens('{"t": {"tenant": "acme", "scopes": ["recall"]}}').caller("Bearer t")
    Caller(partition='acme', scopes=frozenset({'recall'}))

    :raises TokensError: not a JSON map of tokens to
        ``{"tenant": ..., "scopes": [...]}`` entries a bearer header can carry.
    """
    table: dict[bytes, tuple[str, Caller]] = {}
    for token, tenant, scopes in parse_token_entries(text, _SCOPES):
        caller = Caller(partition=tenant, scopes=scopes)
        table[hashlib.sha256(token.encode()).digest()] = (token, caller)
    return TokenMap(table)


def http_app(
    server: Server[Any, Any],
    *,
    settings: HttpSettings,
    partition: str | None,
    tokens: TokensFile[TokenMap] | None,
) -> Starlette:
    """The ASGI app serving ``server`` at :data:`MCP_PATH`, and at ``/mcp/`` alike.

    Both paths are one endpoint (its tokens, its sessions, its checks): a
    session opened at one is used, and ended, at the other. ``settings``:
    the HTTP defences (the module documentation says which applies where);
    its connection limits and shutdown grace are the server runner's.
    """
    # The SDK checks a POST's Content-Type only: Host and Origin are the guard's below,
    # as memstore serve's are (the SDK's own check knew no --allow-host, and on a public
    # bind none ran at all).
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)
    endpoint = _Endpoint(
        manager,
        Caller(partition=partition),
        tokens,
        security,
        limiter=settings.rate_limiter(),
        max_body_bytes=settings.max_body_bytes,
    )
    # Every method: _Endpoint answers a 405. ``/mcp/`` is the same endpoint, not a 307 to
    # ``/mcp`` (Starlette's answer): a client that follows a redirect of its POST may drop
    # the body or the Authorization header. One _Endpoint: one table of sessions and owners.
    routes = [Route(path, endpoint=endpoint) for path in (MCP_PATH, MCP_PATH + "/")]
    middleware = [  # the first runs first
        Middleware(SecurityHeaders),
        Middleware(
            HostOriginGuard, hosts=settings.hosts, origins=settings.origins, render=render_refusal
        ),
        Middleware(
            ListedCors,
            origins=settings.origins,
            methods=_METHODS,
            headers=_CORS_HEADERS,
            expose=_CORS_EXPOSED,
            render=render_refusal,
        ),
    ]
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: _not_found},
        lifespan=lambda app: manager.run(),
    )


async def _not_found(request: Request, exc: Exception) -> Response:
    """A path other than ``/mcp``: 404, a JSON-RPC error like every refusal of the endpoint.

    Starlette alone answered ``Not Found`` in plain text, which a client reading
    the endpoint's errors as JSON could not parse. ``memstore serve`` answers an
    unknown route 404 ``not_found`` in its own envelope; here the envelope is
    the endpoint's (:func:`~memstore.mcp.gate.refusal_response`). The path is
    quoted, cut to 200 characters; nothing else is checked first (no token:
    a 404 tells nothing about the memory).
    """
    del exc
    path = request.url.path[:200]
    return refusal_response(404, f"Not Found: no route {path}; the MCP endpoint is {MCP_PATH}")


_SDK_LOGGER: Final = "mcp.server.streamable_http"
_HANGUPS: Final = (anyio.ClosedResourceError, anyio.BrokenResourceError)


class _HangupFilter(logging.Filter):
    """Drops the SDK's traceback for a stream its client closed (nothing went wrong)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _HANGUPS)


def quiet_hangups() -> None:
    """Keep a client's ordinary goodbye out of the server's stderr.

    The MCP SDK (1.30) logs ``Error in standalone SSE writer`` with a whole
    ``ClosedResourceError`` traceback each time a client ends its session (it
    closes the session's GET stream, which is how streamable HTTP says
    goodbye), so a server with working clients would print a traceback per
    session. This filter on the SDK's logger drops those records, and only
    those: any other error of the transport is still logged. Idempotent.

    >>> quiet_hangups(); quiet_hangups()
    >>> sum(isinstance(f, _HangupFilter) for f in logging.getLogger(_SDK_LOGGER).filters)
    1
    """
    sdk = logging.getLogger(_SDK_LOGGER)
    if not any(isinstance(f, _HangupFilter) for f in sdk.filters):
        sdk.addFilter(_HangupFilter())


_METHODS: Final = ("GET", "POST", "DELETE")
_ALLOW: Final = ", ".join(_METHODS)
"""The ``Allow`` of a 405: what the streamable HTTP transport defines (as the SDK's)."""
_CORS_HEADERS: Final = (*CORS_HEADERS, "Mcp-Session-Id", "Mcp-Protocol-Version")
"""What a listed origin's page may send: the transport's own headers besides the usual."""
_CORS_EXPOSED: Final = ("Mcp-Session-Id", "WWW-Authenticate", "Retry-After")
"""What it may read of an answer: the session id above all (without it, no session)."""
_SESSION_HEADER: Final = b"mcp-session-id"
_JSON: Final = "application/json"
_GET_WITHOUT_SESSION: Final = (
    "Method Not Allowed: a GET to /mcp opens the stream of a session; "
    "without Mcp-Session-Id there is none here (POST initialize to open one)"
)
"""The message of the 405 (``Allow: POST, DELETE``) a GET without ``Mcp-Session-Id`` gets.

The streamable HTTP transport says a server MUST answer a GET to its endpoint
with either ``text/event-stream`` or 405 Method Not Allowed, and the
TypeScript SDK's client (MCP Inspector's, many agents') opens that stream with
a GET, taking only a 405 to mean "no stream here, go on with POST": to a GET
sent before the client had a session the SDK (1.30) answered 400 ``Missing
session ID`` (after opening a session for the GET and discarding it, or 503
when the sessions were all taken), and such a client stopped there. ``Allow``
leaves out GET because a GET without a session cannot succeed.
"""
_ALLOW_WITHOUT_SESSION: Final = ", ".join(m for m in _METHODS if m != "GET")
_DELETE_WITHOUT_SESSION: Final = (
    "Bad Request: a DELETE to /mcp ends a session; without Mcp-Session-Id there is none to end"
)
"""The message of the 400 a DELETE without ``Mcp-Session-Id`` gets.

The SDK (1.30) answered it 400 too, but only after opening a session for the
request (its id in the answer's ``Mcp-Session-Id``, a session that no longer
existed when the client used it) and discarding it.
"""


def _unauthorized(authorization: str | None) -> tuple[str, str]:
    """The message and the ``WWW-Authenticate`` challenge of a 401 (RFC 6750, section 3).

    No credentials at all: the bare challenge. Credentials that are not a
    token this server knows (another scheme, a malformed or unknown token):
    ``error="invalid_token"``, which tells a client to stop retrying the same one.

    >>> _unauthorized(None)[1]
    'Bearer'
    >>> _unauthorized("Bearer nope")[1]
    'Bearer error="invalid_token", error_description="the token is not one this server knows"'
    """
    if authorization is None:
        return "Unauthorized: send Authorization: Bearer <token>", "Bearer"
    reason = "the token is not one this server knows"
    return f"Unauthorized: {reason}", f'Bearer error="invalid_token", error_description="{reason}"'


def _session_id(scope: Scope) -> bytes:
    """The request's ``Mcp-Session-Id`` (the first one sent), ``b""`` when it sent none.

    >>> _session_id({"headers": [(b"mcp-session-id", b"abc")]}), _session_id({"headers": []})
    (b'abc', b'')
    """
    return next((v for k, v in scope["headers"] if k.lower() == _SESSION_HEADER), b"")


_SESSION_NOT_FOUND: Final = error_reply(-32600, "Session not found")
"""The SDK's answer (404) to an id it does not know, its id made ``null`` as ours are."""


def _token_digest(authorization: str | None) -> bytes:
    """The SHA-256 of the request's bearer token (a session's owner, the token never kept)."""
    return hashlib.sha256((bearer_token(authorization) or "").encode()).digest()


class _Endpoint:
    """The ``/mcp`` ASGI endpoint: authenticate, rate-limit, gate, then hand over to the SDK.

    With tokens, ``owners`` maps each open session's id to the digest of the
    token that opened it, filled from the answer that carries a new id, and
    emptied as sessions end: at a DELETE answered 200, at a 404 of the SDK (a
    session it ended itself, idle or crashed), and, against the SDK's table
    of open sessions, whenever a new one opens (one its client left for good).
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        fixed: Caller,
        tokens: TokensFile[TokenMap] | None,
        security: TransportSecuritySettings,
        *,
        limiter: RateLimiter,
        max_body_bytes: int,
    ) -> None:
        self.manager, self.fixed, self.tokens = manager, fixed, tokens
        self.security = security
        self.limiter, self.max_body_bytes = limiter, max_body_bytes
        self.owners: dict[bytes, bytes] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        send = null_error_ids(send)
        if scope["method"] not in _METHODS:
            message = f"Method Not Allowed: {MCP_PATH} takes {_ALLOW}"
            await refuse(scope, receive, send, 405, message, {"Allow": _ALLOW})
            return
        caller = self.fixed
        authorization: str | None = None
        if self.tokens is not None:
            try:
                authorization = single_header(scope, b"authorization")
            except Refusal as r:  # the header twice: which one would a proxy have read?
                await refuse(scope, receive, send, r.status, r.message, r.headers)
                return
            found = self.tokens.current().caller(authorization)
            if found is None:
                message, challenge = _unauthorized(authorization)
                await refuse(scope, receive, send, 401, message, {"WWW-Authenticate": challenge})
                return
            caller = found
        wait = self.limiter.acquire(caller.partition or "")  # the tenant's bucket, as serve's
        if wait > 0.0:
            seconds = retry_after_seconds(wait)
            message = f"Too Many Requests: over this tenant's rate; retry after {seconds} s"
            await refuse(scope, receive, send, 429, message, {"Retry-After": str(seconds)})
            return
        passed = await gate(scope, receive, send, self.security, self.max_body_bytes)
        if passed is None:  # refused (a JSON-RPC error), or a notification dropped
            return
        if scope["method"] in ("GET", "DELETE") and not _session_id(scope):
            if scope["method"] == "GET":
                headers = {"Allow": _ALLOW_WITHOUT_SESSION}
                await refuse(scope, receive, send, 405, _GET_WITHOUT_SESSION, headers)
            else:
                await refuse(scope, receive, send, 400, _DELETE_WITHOUT_SESSION)
            return
        scope[CALLER_KEY] = caller
        if self.tokens is not None:
            await self._owned(scope, passed, send, _token_digest(authorization))
            return
        await self.manager.handle_request(scope, passed, send)

    async def _owned(self, scope: Scope, receive: Receive, send: Send, token: bytes) -> None:
        """Hand a request to the SDK if its session (if any) is ``token``'s, else 404."""
        session = _session_id(scope)
        if session:
            owner = self.owners.get(session)
            if owner is None or not hmac.compare_digest(owner, token):
                response = Response(json.dumps(_SESSION_NOT_FOUND), 404, media_type=_JSON)
                await response(scope, receive, send)
                return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                if not session and status < 400:
                    opened = dict(message.get("headers", [])).get(_SESSION_HEADER)
                    if opened:
                        self._forget_ended()
                        self.owners[opened] = token
                elif session and (status == 404 or (scope["method"] == "DELETE" and status < 300)):
                    self.owners.pop(session, None)  # ended now, or by the SDK before
            await send(message)

        await self.manager.handle_request(scope, receive, watch)

    def _forget_ended(self) -> None:
        """Drop the owners of sessions the SDK no longer has (when there are more owners)."""
        open_now = getattr(self.manager, "_server_instances", None)  # the SDK's own table
        if isinstance(open_now, dict) and len(self.owners) >= len(open_now):
            ended = [s for s in self.owners if s.decode("latin-1") not in open_now]
            for s in ended:
                del self.owners[s]
