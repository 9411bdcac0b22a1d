"""A request cut off by a shutdown: answered 503 ``unavailable``, so the client sends it again.

On SIGTERM, :func:`~memstore.web.runner.serve_app` lets the requests in
flight run for the grace period; uvicorn then cancels those still running
and answers each with a bare 500 ("something broke": a client cannot tell
that the request may be sent again). :class:`ShutdownAnswer`, the outermost
layer of every served app, answers such a request instead with the
surface's 503 ``unavailable`` and ``Retry-After``
(:data:`SHUTDOWN_RETRY_AFTER`): the server is going away, send it again (to
this server once it is back, or to another replica). The cancellation is
re-raised after, so the request ends as uvicorn asked.

What the cancelled request had begun may still land (a write handed to a
worker thread runs on): a retried write must be one that is safe to send
twice (an ingest naming its episode's id, a memory naming its id), which is
what a 503 ``unavailable`` means to :mod:`memstore.client` too. A request
whose answer had started cannot be answered any more: its connection closes
and the client sees a truncated answer.
"""

from __future__ import annotations

import asyncio
from typing import Final

from memstore.web.refusal import UNAVAILABLE, Refusal, RenderRefusal, refusal_body, send_refusal
from memstore.web.started import ASGIApp, Receive, Scope, Send, StartWatch

__all__ = ["SHUTDOWN_REFUSAL", "SHUTDOWN_RETRY_AFTER", "ShutdownAnswer"]

SHUTDOWN_RETRY_AFTER: Final = 1
"""Seconds a client cut off by a shutdown is told to wait before sending again."""
SHUTDOWN_REFUSAL: Final = Refusal(
    503,
    UNAVAILABLE,
    "the server is shutting down and did not finish this request; send it again",
    headers={"Retry-After": str(SHUTDOWN_RETRY_AFTER)},
)
"""The answer to a request cancelled when the shutdown's grace period ran out."""


class ShutdownAnswer:
    """The middleware; see the module documentation.

    :param render: the surface's error body for :data:`SHUTDOWN_REFUSAL`.
    """

    def __init__(self, app: ASGIApp, *, render: RenderRefusal = refusal_body) -> None:
        self.app = app
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watched = StartWatch(send)
        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if not watched.started:
                await send_refusal(SHUTDOWN_REFUSAL, send, self.render)
            raise
