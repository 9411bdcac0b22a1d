"""``serve_app``: run an ASGI application on uvicorn with the plumbing's defences.

One place for what every HTTP surface needs at start-up and shutdown:

- uvicorn's HTTP/1.1 protocol wrapped in
  :class:`~memstore.web.connections.GuardedProtocol` (read timeouts,
  connection caps), keep-alive timeout from the same limits;
- the connection cap kept below the process's file-descriptor limit
  (``RLIMIT_NOFILE``), with a note on stderr when it had to be lowered;
- SIGTERM and SIGINT: the listener closes, the ``on_shutdown`` callbacks end
  the endless streams, requests in flight finish (they get
  ``graceful_shutdown_seconds``; one still running then is answered 503
  ``unavailable`` with ``Retry-After`` by
  :class:`~memstore.web.shutdown.ShutdownAnswer`, not uvicorn's bare 500),
  then :func:`serve_app` returns normally (uvicorn would re-raise the
  signal; the caller still has resources to close); every server's
  ``--shutdown-grace`` is read by :func:`shutdown_grace`;
- what was loaded before serving (the Memory's items and indexes) frozen
  out of the collector's full walks (:func:`memstore._gc.frozen_heap`),
  which otherwise paused every answer for ~0.1 s about once a second under
  load, and young collections made rarer (the requests in flight set them
  off dozens of times a second, and their promotions a full one every few
  seconds);
- SIGHUP: the ``on_hangup`` callbacks run on the event loop within a tenth
  of a second (a tokens file is re-read; never inside the signal handler,
  which could interrupt the very code it calls) and the server goes on.

No WebSockets, no access log, and no ASGI lifespan unless the app asks for one
(``ServeConfig.lifespan``); uvicorn logs warnings and up.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import uvicorn

from memstore._gc import frozen_heap
from memstore.web.connections import (
    MAX_LINGERING,
    ConnectionLimits,
    GuardedProtocol,
    guarded_protocol,
)
from memstore.web.refusal import RenderRefusal, refusal_body
from memstore.web.shutdown import DEFAULT_GRACEFUL_SHUTDOWN_SECONDS, ShutdownAnswer, shutdown_grace

__all__ = [
    "DEFAULT_GRACEFUL_SHUTDOWN_SECONDS",
    "FD_HEADROOM",
    "ServeConfig",
    "fit_to_descriptors",
    "serve_app",
    "shutdown_grace",
    "uvicorn_config",
]

_log = logging.getLogger("memstore.web")

FD_HEADROOM: Final = 64
"""Descriptors kept free of connections (journal, logs, listeners, worker threads)."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Where and how :func:`serve_app` listens."""

    host: str = "127.0.0.1"
    port: int = 8080
    sockets: Sequence[socket.socket] = ()
    """Bound already (:func:`~memstore.web.listen.listen`): served instead of ``host:port``."""
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    """Read timeouts and connection caps."""
    graceful_shutdown_seconds: float = DEFAULT_GRACEFUL_SHUTDOWN_SECONDS
    http: Literal["auto", "h11", "httptools"] = "auto"
    """uvicorn's HTTP/1.1 parser (``auto``: httptools when installed)."""
    on_hangup: Sequence[Callable[[], object]] = ()
    """Run on SIGHUP, on the event loop."""
    on_shutdown: Sequence[Callable[[], object]] = ()
    """Run once a shutdown signal arrives, on the event loop, before the server waits for
    the requests in flight: end the streams that would otherwise run until the grace
    period is over (an SSE feed of changes never ends by itself)."""
    render: RenderRefusal = refusal_body
    """The error body of the connection-level refusals (503, 408, 431) and of a request
    cut off by the shutdown (503)."""
    log_level: str = "warning"
    lifespan: bool = False
    """Run the app's ASGI lifespan (start-up and shutdown events): for an app that needs
    them, as the MCP SDK's session manager does."""


def _inner_protocol(http: str) -> Callable[..., Any]:
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol


def fit_to_descriptors(limits: ConnectionLimits) -> ConnectionLimits:
    """``limits`` with ``max_connections`` lowered to fit ``RLIMIT_NOFILE``.

    What must fit: the connections, the refused ones draining
    (:data:`~memstore.web.connections.MAX_LINGERING`) and :data:`FD_HEADROOM`.

    Over the descriptor limit, ``accept()`` fails and every client waits; under
    it, the connections over the cap are answered 503 and closed at once.
    """
    try:
        import resource
    except ImportError:  # not a Unix: no descriptor limit to fit
        return limits
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    reserved = FD_HEADROOM + MAX_LINGERING
    if soft == resource.RLIM_INFINITY or limits.max_connections + reserved <= soft:
        return limits
    fitted = max(1, soft - reserved)
    print(
        f"memstore: --max-connections {limits.max_connections} is more than the descriptor "
        f"limit allows (ulimit -n {soft}); using {fitted}",
        file=sys.stderr,
    )
    return replace(
        limits,
        max_connections=fitted,
        max_connections_per_client=min(limits.max_connections_per_client, fitted),
    )


class _Server(uvicorn.Server):
    """uvicorn's server; a shutdown signal ends :func:`serve_app` normally, SIGHUP reloads."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_hangup: Sequence[Callable[[], object]],
        on_shutdown: Sequence[Callable[[], object]] = (),
    ) -> None:
        super().__init__(config)
        self._on_hangup = tuple(on_hangup)
        self._on_shutdown = tuple(on_shutdown)
        self._hangup_pending = False

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for callback in self._on_shutdown:  # before the wait for open connections
            try:
                callback()
            except Exception:  # one failing callback must not keep the server up
                _log.exception("memstore: a shutdown callback failed")
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        hangup = getattr(signal, "SIGHUP", None)
        previous = None
        if hangup is not None and threading.current_thread() is threading.main_thread():
            previous = signal.signal(hangup, self._hangup)
        try:
            with super().capture_signals():
                yield
                self._captured_signals.clear()
        finally:
            if previous is not None and hangup is not None:
                signal.signal(hangup, previous)

    def _hangup(self, sig: int, frame: object) -> None:
        # Only a flag: the callbacks may take locks the interrupted code holds.
        self._hangup_pending = True

    async def on_tick(self, counter: int) -> bool:
        if self._hangup_pending:
            self._hangup_pending = False
            for callback in self._on_hangup:
                callback()
        return await super().on_tick(counter)


def uvicorn_config(
    app: Callable[..., Any],
    config: ServeConfig,
    limits: ConnectionLimits,
    protocol: type[GuardedProtocol],
) -> uvicorn.Config:
    """uvicorn's configuration for :func:`serve_app`: ``app`` behind ``protocol``.

    h11 (the parser when httptools is not installed, as with the ``mcp`` extra
    alone) refuses a header block still incomplete past its own cap (16 KiB by
    default) with a plain-text 400; it is given ``max_header_bytes``, so that the
    guard, which refuses anything larger first, answers every header block that
    is too large (431, in the surface's error body) and serves every smaller one.
    """
    return uvicorn.Config(
        ShutdownAnswer(app, render=config.render),
        host=config.host,
        port=config.port,
        http=protocol,
        ws="none",
        lifespan="on" if config.lifespan else "off",
        log_level=config.log_level,
        access_log=False,
        timeout_keep_alive=math.ceil(limits.keepalive_timeout),
        timeout_graceful_shutdown=math.ceil(config.graceful_shutdown_seconds),
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )


def serve_app(app: Callable[..., Any], config: ServeConfig) -> type[GuardedProtocol]:
    """Serve ``app`` until SIGTERM or SIGINT; the protocol class used (its ``counter`` counts).

    :raises SystemExit: uvicorn's, when the address cannot be bound (bind it first with
        :func:`~memstore.web.listen.listen` and pass ``sockets`` to refuse that up front).
    """
    limits = fit_to_descriptors(config.limits)
    protocol = guarded_protocol(_inner_protocol(config.http), limits, render=config.render)
    uv = uvicorn_config(app, config, limits, protocol)
    with frozen_heap():  # no full-heap collection pauses in the answers: see there
        server = _Server(uv, config.on_hangup, config.on_shutdown)
        server.run(sockets=list(config.sockets) or None)
    return protocol
