"""``memstore mcp``: open the memory, pick the tools, serve them on stdio or HTTP.

:func:`serve` takes the parsed command line (``memstore mcp --help``) and runs
until the client hangs up (stdio) or the process is stopped (HTTP). Exit
status 2 when an option can never work, 1 when the memory cannot be opened
now (its journal cannot be reached, its vectors are another model's: said
by :mod:`memstore.cli` as for every command, with the flag that helps), with
the reason on stderr; stdout belongs to the protocol on stdio, so nothing
else is ever printed there.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

import anyio

from memstore.errors import JournalError, MemstoreError
from memstore.memory import Memory
from memstore.web.listen import ListenError, base_url, listening
from memstore.web.settings import HttpSettings, http_settings
from memstore_index import EmbedderMismatchError

from .gate import render_refusal
from .http import CALLER_KEY, http_app, is_loopback, load_tokens, quiet_hangups
from .limits import MAX_BODY_BYTES
from .opening import open_memory
from .server import build_server, surface
from .stdio import stdio_transport
from .toolkit import Caller

__all__ = ["serve"]


def serve(args: argparse.Namespace) -> int:
    """Run the server ``args`` describes; the exit status."""
    http = args.transport == "http"
    tokens = None
    try:  # the HTTP defences: a value they cannot take is refused before anything opens
        settings = http_settings(args, max_body_bytes=MAX_BODY_BYTES) if http else None
    except ValueError as e:
        print(f"memstore mcp: {e}", file=sys.stderr)
        return 2
    try:
        if http and args.tokens_file:
            tokens = load_tokens(args.tokens_file)
        elif http and not is_loopback(args.host):
            print(
                f"memstore mcp: refusing to serve on {args.host} without --tokens-file: an MCP "
                "endpoint reachable from the network needs tokens given on purpose "
                '(a JSON map {"<token>": {"tenant": ..., "scopes": ["recall", "ingest", '
                '"forget"]}})',
                file=sys.stderr,
            )
            return 2
        if args.partition is not None:  # a bad name is refused now, not on every call
            with Memory(embedder=None) as scratch:
                scratch.recent(1, partition=args.partition)
    except MemstoreError as e:
        print(f"memstore mcp: {e}", file=sys.stderr)
        return 2
    if settings is None:
        return _serve_on(args, tokens, [], None)
    try:  # a port in use is refused before the folder opens
        with listening(args.host, args.port) as sockets:
            return _serve_on(args, tokens, sockets, settings)
    except ListenError as e:
        print(f"memstore mcp: {e}; choose another --port or --host", file=sys.stderr)
        return 1


def _serve_on(
    args: argparse.Namespace,
    tokens: Any,
    sockets: list[socket.socket],
    settings: HttpSettings | None,
) -> int:
    """:func:`serve` once an HTTP server's address is bound (``settings``: its defences;
    ``None`` on stdio): open the memory and serve it."""
    http = settings is not None
    try:
        opened = open_memory(
            args.data,
            embedder=args.embedder,
            journal=args.journal,
            journal_schema=args.journal_schema,
            readonly=args.readonly,
        )
    except (JournalError, EmbedderMismatchError):
        raise  # cannot be done now: exit 1, as memstore serve and the data commands say it
    except (MemstoreError, ValueError) as e:  # ValueError: a --journal timeout it cannot take
        print(f"memstore mcp: {e}", file=sys.stderr)
        return 2
    try:
        s = surface(opened.memory, compat=args.compat, readonly_reason=opened.readonly_reason)
        fixed = Caller(partition=args.partition)
        holder: list[Any] = []

        def caller_of() -> Caller:
            if not http:
                return fixed
            request = holder[0].request_context.request
            found = request.scope.get(CALLER_KEY) if request is not None else None
            return found if isinstance(found, Caller) else fixed

        server = build_server(s, caller_of)
        holder.append(server)
        if settings is None:
            anyio.run(_stdio, server)
            return 0
        from memstore.web.runner import ServeConfig, serve_app  # uvicorn

        quiet_hangups()  # a client ending its session is not an error
        app = http_app(server, settings=settings, partition=args.partition, tokens=tokens)
        print(
            f"memstore mcp: serving MCP (streamable HTTP) on {base_url(args.host, args.port)}/mcp "
            f"({settings.hosts})",
            file=sys.stderr,
        )
        # memstore serve's runner: read timeouts, connection caps, SIGTERM and
        # SIGINT ending in a return (so the memory below is closed).
        config = ServeConfig(
            host=args.host,
            port=args.port,
            sockets=sockets,
            limits=settings.limits,
            lifespan=True,
            on_hangup=(tokens.reload,) if tokens is not None else (),
            render=render_refusal,  # a 503 at shutdown, a 408: JSON-RPC errors too
            graceful_shutdown_seconds=settings.shutdown_grace,
        )
        serve_app(app, config)
        return 0
    finally:
        opened.memory.close()


async def _stdio(server: Any) -> None:
    async with stdio_transport() as (read, write):
        await server.run(read, write, server.create_initialization_options())
