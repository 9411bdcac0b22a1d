"""Security headers on every answer: what a browser must not do with an API's responses.

An API answer is data, never a page: :data:`DEFAULT_SECURITY_HEADERS` tells a
browser not to sniff it into HTML (``nosniff``), not to frame it, not to run
anything it might contain (a CSP allowing nothing), not to leak the URL
in a ``Referer``, and not to keep it (``Cache-Control: no-store``): an answer
holds a tenant's memory, which must not wait in a browser's disk cache or a
proxy for the next user of the machine to read. A surface that serves pages
(a browser UI) passes its own CSP and caching. Headers the application set
itself are left as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from memstore.web.asgi import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DEFAULT_SECURITY_HEADERS", "SecurityHeaders"]


DEFAULT_SECURITY_HEADERS: Final[Mapping[str, str]] = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""The headers of an API that serves no pages."""


class SecurityHeaders:
    """ASGI middleware adding ``headers`` to every HTTP response that lacks them."""

    def __init__(self, app: ASGIApp, *, headers: Mapping[str, str] = DEFAULT_SECURITY_HEADERS):
        self.app = app
        self._headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
        ]
        self._names = frozenset(k for k, _ in self._headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra, names = self._headers, self._names

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                for k, _ in headers:
                    if k.lower() in names:  # the answer set one itself: only the others
                        present = {k.lower() for k, _ in headers}
                        headers += [(k, v) for k, v in extra if k not in present]
                        break
                else:  # the usual answer: every one is added
                    headers += extra
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
