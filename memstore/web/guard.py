"""ASGI middleware: refuse requests for other hosts and from other web origins, before any route.

:class:`HostOriginGuard` applies a :class:`~memstore.web.hosts.HostPolicy`
and an :class:`~memstore.web.hosts.OriginPolicy` to every HTTP request
(health probes included: a rebinding page must not even learn that a server
is there). A request is refused, with the surface's error body, when:

- its ``Host`` is missing, repeated, malformed or not served: 403 ``forbidden_host``;
- its ``Origin`` is repeated or not accepted: 403 ``forbidden_origin``.

When the origin policy lists origins, :class:`ListedCors` adds CORS answers
(preflights, ``Access-Control-Allow-Origin``) for those origins only; with no
listed origin a server answers no CORS at all, so browsers keep other sites'
pages from reading its answers.
"""

from __future__ import annotations

from typing import Final

from memstore.web.asgi import ASGIApp, Receive, Scope, Send
from memstore.web.hosts import HostPolicy, OriginPolicy
from memstore.web.refusal import (
    FORBIDDEN_HOST,
    FORBIDDEN_ORIGIN,
    INVALID_REQUEST,
    Refusal,
    RenderRefusal,
    refusal_body,
    send_refusal,
)

__all__ = ["CORS_EXPOSED", "CORS_HEADERS", "CORS_MAX_AGE_SECONDS", "HostOriginGuard", "ListedCors"]


CORS_HEADERS: Final = ("Authorization", "Content-Type", "Accept", "Last-Event-ID")
"""Request headers a listed origin's page may send (a preflight allows these)."""
CORS_EXPOSED: Final = ("Retry-After",)
"""Answer headers a listed origin's page may read (by default)."""
CORS_MAX_AGE_SECONDS: Final = 600
"""How long a browser may cache a preflight answer."""


_HOSTS_KEPT: Final = 64
"""Most allowed ``Host`` values a guard remembers (any host policy: clients choose them)."""


def _printable(raw: bytes) -> str:
    return raw.decode("latin-1")[:100]


class HostOriginGuard:
    """The middleware; see the module documentation.

    :param render: the surface's error body for a :class:`Refusal`.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostPolicy,
        origins: OriginPolicy,
        render: RenderRefusal = refusal_body,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins
        self.render = render
        self._hosts_seen: dict[bytes, str] = {}
        """``Host`` values the policy allowed, decoded (the policies never change); a few."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.check(scope)
        if refusal is not None:
            if scope["type"] == "http":
                await send_refusal(refusal, send, self.render)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)

    def check(self, scope: Scope) -> Refusal | None:
        """Why the request of ``scope`` is refused, or None when it may go on.

        One pass over the headers; a ``Host`` value allowed once is not parsed
        again (every request of a server names one of a few hosts).
        """
        hosts: list[bytes] = []
        origins: list[bytes] = []
        for name, value in scope["headers"]:
            name = name.lower()
            if name == b"host":
                hosts.append(value)
            elif name == b"origin":
                origins.append(value)
        if len(hosts) != 1:
            said = "no Host header" if not hosts else f"{len(hosts)} Host headers"
            return Refusal(403, FORBIDDEN_HOST, f"{said}; send exactly one")
        host = self._hosts_seen.get(hosts[0])
        if host is None:
            host = hosts[0].decode("latin-1")
            if not self.hosts.allows(host):
                return Refusal(
                    403,
                    FORBIDDEN_HOST,
                    f"Host {_printable(hosts[0])!r} is not a name this server answers to "
                    "(a loopback name or an allowed host)",
                )
            if len(self._hosts_seen) < _HOSTS_KEPT:
                self._hosts_seen[hosts[0]] = host
        if len(origins) > 1:
            return Refusal(403, FORBIDDEN_ORIGIN, f"{len(origins)} Origin headers; send one")
        if origins and not self.origins.allows(origins[0].decode("latin-1"), host):
            return Refusal(
                403,
                FORBIDDEN_ORIGIN,
                f"Origin {_printable(origins[0])!r} may not call this server "
                "(only its own origin and the allowed origins)",
            )
        return None


class ListedCors:
    """ASGI middleware answering CORS for the origins an :class:`OriginPolicy` lists.

    Starlette's CORS middleware does the work: preflights (``OPTIONS`` with
    ``Access-Control-Request-Method``) are answered for ``methods`` and
    ``headers`` (default :data:`CORS_HEADERS`); ``expose`` (default
    ``Retry-After``) are the answer headers a page may read. A preflight
    asking for another method or header is 400 ``invalid_request`` in the
    surface's error body (``render``), not Starlette's plain text. With no
    listed origin this is a pass-through: no CORS at all.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        origins: OriginPolicy,
        methods: tuple[str, ...],
        headers: tuple[str, ...] = CORS_HEADERS,
        expose: tuple[str, ...] = CORS_EXPOSED,
        render: RenderRefusal = refusal_body,
    ) -> None:
        self.app = app
        if origins.listed:
            self.app = _cors(app, origins, methods, headers, expose, render)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


_ASKED = {"origin": "an origin", "method": "a method", "headers": "headers"}
"""What Starlette names in a refused preflight, as the refusal says it in English."""


def _cors(
    app: ASGIApp,
    origins: OriginPolicy,
    methods: tuple[str, ...],
    headers: tuple[str, ...],
    expose: tuple[str, ...],
    render: RenderRefusal,
) -> ASGIApp:
    """Starlette's CORS middleware over ``app``, its refused preflights answered as JSON."""
    from starlette.datastructures import Headers
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import Response

    allowed = f"methods {', '.join(methods)}; headers {', '.join(headers)}"

    class JsonCors(CORSMiddleware):
        def preflight_response(self, request_headers: Headers) -> Response:
            answer = super().preflight_response(request_headers)
            if answer.status_code < 400:
                return answer
            # "Disallowed CORS method, headers": what the page asked for that is not allowed.
            names = bytes(answer.body).decode("utf-8").removeprefix("Disallowed CORS ")
            what = " and ".join(_ASKED.get(n, n) for n in names.split(", "))
            refusal = Refusal(
                answer.status_code,
                INVALID_REQUEST,
                f"this CORS preflight asks for {what} this server does not allow ({allowed})",
            )
            kept = {
                k: v
                for k, v in answer.headers.items()
                if k not in ("content-type", "content-length")
            }
            return Response(
                render(refusal), answer.status_code, kept, media_type="application/json"
            )

    return JsonCors(
        app,
        allow_origins=["*"] if origins.any_origin else sorted(origins.origins),
        allow_methods=list(methods),
        allow_headers=list(headers),
        expose_headers=list(expose),
        max_age=CORS_MAX_AGE_SECONDS,
    )
