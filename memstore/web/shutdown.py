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

The operator reads one line per request cut off, on the ``memstore.web``
logger (a warning), naming the request and what its client got::

    memstore: shutting down: POST /v1/ingest was still running when the grace period ran
    out; answered 503 unavailable (Retry-After 1)

uvicorn alone logged an ``ERROR: Exception in ASGI application`` with a
whole ``CancelledError`` traceback for each, and an ``ERROR: Cancel N running
task(s)`` before them: what a crash looks like. :func:`quiet_reported_cancellations`
(installed by :class:`ShutdownAnswer`) drops those two records from uvicorn's
logger, and only those: an exception the application raises is still logged
with its traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Final

from memstore.web.asgi import ASGIApp, Receive, Scope, Send
from memstore.web.refusal import UNAVAILABLE, Refusal, RenderRefusal, refusal_body, send_refusal
from memstore.web.started import StartWatch

__all__ = [
    "DEFAULT_GRACEFUL_SHUTDOWN_SECONDS",
    "SHUTDOWN_REFUSAL",
    "SHUTDOWN_RETRY_AFTER",
    "ShutdownAnswer",
    "quiet_reported_cancellations",
    "shutdown_grace",
]

_log = logging.getLogger("memstore.web")

DEFAULT_GRACEFUL_SHUTDOWN_SECONDS: Final = 10.0
"""How long requests in flight and open streams may run on after a shutdown signal."""
SHUTDOWN_RETRY_AFTER: Final = 1
"""Seconds a client cut off by a shutdown is told to wait before sending again."""
SHUTDOWN_REFUSAL: Final = Refusal(
    503,
    UNAVAILABLE,
    "the server is shutting down and did not finish this request; send it again",
    headers={"Retry-After": str(SHUTDOWN_RETRY_AFTER)},
)
"""The answer to a request cancelled when the shutdown's grace period ran out."""

_UVICORN_LOGGER: Final = "uvicorn.error"
_REPORTED: Final = "_memstore_reported"
"""Set on a cancellation :class:`ShutdownAnswer` has logged its own line for."""
_CANCEL_SUMMARY: Final = "Cancel %s running task(s)"
"""How uvicorn's (0.30 and later) count of the requests it cancels at shutdown begins."""


class ShutdownAnswer:
    """The middleware; see the module documentation.

    :param render: the surface's error body for :data:`SHUTDOWN_REFUSAL`.
    """

    def __init__(self, app: ASGIApp, *, render: RenderRefusal = refusal_body) -> None:
        self.app = app
        self.render = render
        quiet_reported_cancellations()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watched = StartWatch(send)
        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError as cancelled:
            if watched.started:
                outcome = "its answer had begun, so its connection closes"
            else:
                await send_refusal(SHUTDOWN_REFUSAL, send, self.render)
                outcome = f"answered 503 {UNAVAILABLE} (Retry-After {SHUTDOWN_RETRY_AFTER})"
            _log.warning(
                "memstore: shutting down: %s %s was still running when the grace period ran "
                "out; %s",
                scope.get("method", "?"),
                scope.get("path", "?"),
                outcome,
            )
            setattr(cancelled, _REPORTED, True)
            raise


class _ReportedFilter(logging.Filter):
    """Drops uvicorn's records about cancellations :class:`ShutdownAnswer` has reported."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(_CANCEL_SUMMARY):
            return False  # each request it cancels gets its own line
        exc = record.exc_info[1] if record.exc_info else None
        return not getattr(exc, _REPORTED, False)


def quiet_reported_cancellations() -> None:
    """Keep uvicorn's traceback for a request cut off by the shutdown out of the logs.

    A filter on uvicorn's ``uvicorn.error`` logger drops the record of an
    exception :class:`ShutdownAnswer` has logged a line for already (a
    cancellation it marked), and uvicorn's count of the requests it is
    cancelling; every other record, a real error's traceback among them,
    passes. Idempotent.

    >>> quiet_reported_cancellations(); quiet_reported_cancellations()
    >>> sum(isinstance(f, _ReportedFilter) for f in logging.getLogger(_UVICORN_LOGGER).filters)
    1
    """
    uvicorn_log = logging.getLogger(_UVICORN_LOGGER)
    if not any(isinstance(f, _ReportedFilter) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_ReportedFilter())


def shutdown_grace(args: argparse.Namespace) -> float:
    """A server's ``--shutdown-grace``: how long requests in flight may run on after SIGTERM.

    The one reading of the option for every server (``memstore serve``, its
    Mind Layer API, ``memstore mcp --transport http``): the seconds given, or
    :data:`DEFAULT_GRACEFUL_SHUTDOWN_SECONDS` when the option was not (the
    command line refuses a number that is not positive). It becomes
    :attr:`ServeConfig.graceful_shutdown_seconds
    <memstore.web.runner.ServeConfig.graceful_shutdown_seconds>`; a request
    still running when it is over gets :data:`SHUTDOWN_REFUSAL`.

    >>> shutdown_grace(argparse.Namespace(shutdown_grace=0.5))
    0.5
    >>> shutdown_grace(argparse.Namespace(shutdown_grace=None))
    10.0
    """
    grace: float | None = getattr(args, "shutdown_grace", None)
    return DEFAULT_GRACEFUL_SHUTDOWN_SECONDS if grace is None else grace
