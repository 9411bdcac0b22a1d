"""The inspector's routes: the page at ``/ui``, its files, and its JSON API under ``/ui/api``.

:func:`install` is a :data:`~memstore.web.mount.Mount`: ``memstore serve``
calls it with the app it built, the :class:`~memstore.Memory` it serves and
its :data:`~memstore.web.mount.Authenticate`. Every ``/ui/api`` route needs
``Authorization: Bearer <token>``, the server's own tokens; a token sees its
tenant's partition (``recall`` to read, ``forget`` to forget; ``admin`` adds
the server-wide figures to the statistics:
:data:`~memstore.web.tokens.ADMIN_SCOPE`). Errors are
``{"error": code, "message": ...}``, as the rest of the server answers.

A listing's answer (``/ui/api/search``) carries ``read_at``, the journal
position it was read at: a change of the change stream (``GET /v1/events``,
each with its ``lsn``) at or before it is already in the answer, one after it
is not (:func:`memstore.ui.positions.read_at`).

The page itself and its files need no token (there is nothing in them but
code). They carry a strict Content-Security-Policy: scripts, styles and
connections from this origin only, no inline script, no framing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from importlib import resources
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from memstore.catchup import CATCH_UP_SECONDS, catch_up
from memstore.errors import MemstoreError, OutOfRangeError
from memstore.journal import Lsn
from memstore.journal.hlc import InvalidLsnError
from memstore.memory import Memory
from memstore.ui import views
from memstore.web.headers import single_header
from memstore.web.mount import Authenticate, Caller
from memstore.web.refusal import Refusal
from memstore.web.responses import NewlineJSONResponse
from memstore.web.tokens import ADMIN_SCOPE

__all__ = ["PAGE_SECURITY_HEADERS", "STATIC_FILES", "install"]

PAGE_SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
"""The headers of the page and its files (the API keeps the server's ``default-src 'none'``).

``Cross-Origin-Opener-Policy: same-origin``: a page of another site that opens
the inspector (``window.open``) gets no handle on its tab, so it cannot later
send a signed-in tab to a look-alike page asking for the token again.
"""

_MEDIA: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
STATIC_FILES: Final = (
    "index.html",
    "app.css",
    "main.js",
    "api.js",
    "dom.js",
    "events.js",
    "views.js",
    "icon.svg",
)
"""The page's files, shipped as package data in ``memstore/ui/static``."""


def _files() -> dict[str, tuple[bytes, str]]:
    root = resources.files("memstore.ui") / "static"
    out = {}
    for name in STATIC_FILES:
        suffix = name[name.rindex(".") :]
        out[name] = ((root / name).read_bytes(), _MEDIA[suffix])
    return out


def _error(
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
    details: dict[str, object] | None = None,
) -> NewlineJSONResponse:
    body: dict[str, object] = {"error": code, "message": message}
    if details:
        body["details"] = details
    return NewlineJSONResponse(body, status_code=status, headers=headers)


class _Refused(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = dict(headers or {})


def install(app: FastAPI, memory: Memory, authenticate: Authenticate) -> None:
    """Add the page at ``/ui`` (``/`` redirects there) and its API to ``app``."""
    files = _files()
    key = secrets.token_bytes(32)  # seals hard-delete previews; a restart voids them

    def caller_of(request: Request, scope: str, partition: str | None) -> tuple[Caller, str]:
        try:  # a repeated Authorization header is refused (400), as the gate does
            caller = authenticate(single_header(request.scope, b"authorization"))
        except Refusal as r:  # 401 with WWW-Authenticate, 429 with Retry-After
            raise _Refused(r.status, r.code, r.message, r.headers) from None
        if not caller.may(scope):
            raise _Refused(403, "forbidden", f"this token lacks the {scope!r} scope")
        chosen = partition or caller.partitions[0]
        if chosen not in caller.partitions:
            raise _Refused(403, "forbidden", f"this token cannot see partition {chosen[:64]!r}")
        return caller, chosen

    async def answer(fn: Callable[[], dict[str, Any]]) -> Any:
        try:
            return NewlineJSONResponse(await run_in_threadpool(fn))
        except _Refused as e:
            return _error(e.status, e.code, e.message, e.headers or None)
        except views.NotFound as e:
            return _error(404, "not_found", str(e))
        except views.ReceiptMismatch as e:
            return _error(409, "conflict", str(e))
        except InvalidLsnError as e:
            return _error(400, "invalid_request", str(e))  # it names as_of
        except OutOfRangeError as e:  # as MemoryProtocol words it: the engine's code in details
            return _error(400, "invalid_request", str(e), details={"code": e.code, **e.details()})
        except MemstoreError as e:
            return _error(400, "invalid_request", str(e))

    def moment(raw: str | None) -> Lsn | None:
        return views.parse_moment(raw) if raw and raw.strip() else None

    # The page and its files answer HEAD as well (a link checker's or a proxy's
    # health probe asks with it); Starlette sends a HEAD the GET's headers alone.
    page_methods = ["GET", "HEAD"]

    @app.api_route("/", methods=page_methods, include_in_schema=False)
    @app.api_route("/ui/", methods=page_methods, include_in_schema=False)  # as often typed
    def root() -> Response:
        return RedirectResponse("/ui", status_code=303)

    @app.api_route("/favicon.ico", methods=page_methods, include_in_schema=False)
    def favicon() -> Response:  # what a browser asks for at any address it shows
        return RedirectResponse("/ui/static/icon.svg", status_code=301)

    @app.api_route("/ui", methods=page_methods, include_in_schema=False)
    def page() -> Response:
        body, media = files["index.html"]
        return Response(body, media_type=media, headers=PAGE_SECURITY_HEADERS)

    @app.api_route("/ui/static/{name}", methods=page_methods, include_in_schema=False)
    def static(name: str) -> Response:
        found = files.get(name)
        if found is None:
            return _error(404, "not_found", f"no file {name[:64]!r}")
        return Response(found[0], media_type=found[1], headers=PAGE_SECURITY_HEADERS)

    @app.get("/ui/api/whoami", include_in_schema=False)
    async def whoami(request: Request) -> Any:
        def run() -> dict[str, Any]:
            caller, _ = caller_of(request, "recall", None)
            head = memory.journal.head() if memory.journal is not None else None
            return {
                "tenant": caller.tenant,
                "partitions": list(caller.partitions),
                "scopes": sorted(caller.scopes),
                "head": views._moment(head),
                "live": memory.hub is not None,
            }

        return await answer(run)

    @app.get("/ui/api/search", include_in_schema=False)
    async def search(
        request: Request,
        q: str = "",
        kind: str = "",
        subject: str = "",
        partition: str | None = None,
        as_of: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> Any:
        def run() -> dict[str, Any]:
            _, chosen = caller_of(request, "recall", partition)
            return views.search(
                memory,
                chosen,
                q,
                kind=kind,
                subject=subject,
                limit=limit,
                offset=offset,
                when=moment(as_of),
            )

        return await answer(run)

    async def one_item(request: Request, id: str, partition: str | None, as_of: str | None) -> Any:
        def run() -> dict[str, Any]:
            _, chosen = caller_of(request, "recall", partition)
            return views.item_view(memory, chosen, id, when=moment(as_of))

        return await answer(run)

    # The page's form: an id in the query string arrives as it is. In a path, a
    # browser resolves the segments "." and ".." (even as %2e%2e) away before sending.
    @app.get("/ui/api/item", include_in_schema=False)
    async def item_by_query(
        id: str, request: Request, partition: str | None = None, as_of: str | None = None
    ) -> Any:
        return await one_item(request, id, partition, as_of)

    # For curl: ``:path``, an id may hold "/" (``runbooks/db-failover``), sent as it
    # is or percent-encoded (the server decodes it before routing): the rest of the
    # path, slashes included, is the id.
    @app.get("/ui/api/items/{id:path}", include_in_schema=False)
    async def item(
        id: str, request: Request, partition: str | None = None, as_of: str | None = None
    ) -> Any:
        return await one_item(request, id, partition, as_of)

    @app.get("/ui/api/stats", include_in_schema=False)
    async def stats(request: Request) -> Any:
        def run() -> dict[str, Any]:
            caller, _ = caller_of(request, "recall", None)
            return views.stats(memory, caller.partitions, server=caller.may(ADMIN_SCOPE))

        return await answer(run)

    @app.post("/ui/api/forget", include_in_schema=False)
    async def forget(
        request: Request,
        id: str,
        hard: bool = False,
        confirmation: str | None = None,
        partition: str | None = None,
    ) -> Any:
        def run() -> dict[str, Any]:
            _, chosen = caller_of(request, "forget", partition)
            # Replicas: apply what the others acknowledged first, or a live item
            # written a moment ago elsewhere is answered {"removed": false} and stays.
            if not catch_up(memory):
                raise _Refused(
                    503,
                    "unavailable",
                    f"this server has not applied the other servers' latest writes within "
                    f"{CATCH_UP_SECONDS:g} s; nothing was forgotten: send the request again",
                    {"Retry-After": "1"},
                )
            return views.forget(memory, chosen, id, hard=hard, key=key, confirmation=confirmation)

        return await answer(run)
