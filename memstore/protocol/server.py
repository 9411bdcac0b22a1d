"""``memstore serve``: the MemoryProtocol 0.1 server on uvicorn, with embedded defaults.

The data folder holds everything: the SQLite journal, the vectors and, when
no ``--tokens-file`` is given on a loopback address, ``tokens.json`` with a
random token made on first start (mode 0600; printed with a curl line to try
it). A non-loopback bind without a tokens file is refused: a server reachable
from the network must be given its tokens on purpose.

Replicas: with ``--journal postgresql://...`` (and ``--journal-schema`` or
the DSN's ``memstore_schema``, default ``memstore``) several servers, each
with its own ``--data`` folder, serve one memory. Give them the same tokens file: the hard-delete
confirmation key is derived from its bytes (:func:`confirmation_key`), so a
dry-run receipt sealed by one replica is redeemable on any other
(``--confirm-key-file`` names another shared secret instead). See
``docs/protocol.md`` ("Replicas").

The tokens file is re-read when it changes (checked at each request, one
``stat``) and on SIGHUP: a token removed from it fails from the next
request; a file that becomes invalid leaves the last good tokens in place,
with an error in the log. The confirmation key is derived from the file's
bytes at start-up only.

HTTP plumbing comes from :mod:`memstore.web`: read timeouts and connection
caps (``--header-timeout``, ``--body-timeout``, ``--keepalive-timeout``,
``--max-connections``, ``--max-connections-per-client``), the Host check
(on a loopback bind only loopback names and ``--allow-host``; on a public
bind ``--allow-host``, or any host when none is given) and the Origin check
(the server's own origin and ``--allow-origin``).

SIGTERM and SIGINT shut down gracefully: the listener closes, requests in
flight finish (given ``--shutdown-grace``, default
:data:`GRACEFUL_SHUTDOWN_SECONDS`; those still running then are answered 503
``unavailable`` with ``Retry-After``), then the
:class:`~memstore.memory.Memory` is closed (journal, vectors, hub).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import math
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from memstore.backup import TOKENS_FILE as _TOKENS_FILE
from memstore.journal import Journal
from memstore.journal.dsnoptions import libpq_dsn
from memstore.memory import Memory
from memstore.protocol.app import create_app
from memstore.protocol.auth import (
    SCOPES,
    Principal,
    TokensFileError,
    TokenTable,
    new_token,
    write_tokens_file,
)
from memstore.protocol.confirm import Confirmations
from memstore.protocol.errors import render_refusal
from memstore.protocol.limits import MAX_BODY_BYTES, SSE_KEEPALIVE_SECONDS
from memstore.web.batching import close_batcher
from memstore.web.hosts import is_loopback
from memstore.web.journal_option import postgres_journal
from memstore.web.listen import ListenError, base_url, listening
from memstore.web.mount import Mount
from memstore.web.runner import (
    DEFAULT_GRACEFUL_SHUTDOWN_SECONDS,
    ServeConfig,
    serve_app,
    shutdown_grace,
)
from memstore.web.settings import HttpSettings, http_settings
from memstore.web.tokens import TokensFile

__all__ = [
    "CONFIRMATION_KEY_LABEL",
    "DEFAULT_JOURNAL_SCHEMA",
    "DEFAULT_TENANT",
    "GRACEFUL_SHUTDOWN_SECONDS",
    "TOKENS_FILE",
    "confirmation_key",
    "is_loopback",
    "serve",
]

TOKENS_FILE: Final = _TOKENS_FILE
"""The tokens file made in the data folder when none is given (loopback only)."""
DEFAULT_TENANT: Final = "default"
"""The tenant of that generated token."""
GRACEFUL_SHUTDOWN_SECONDS: Final = DEFAULT_GRACEFUL_SHUTDOWN_SECONDS
"""How long requests in flight may run on after a shutdown signal unless ``--shutdown-grace``
says (:func:`~memstore.web.runner.shutdown_grace`, the same for every server)."""
DEFAULT_JOURNAL_SCHEMA: Final = "memstore"
"""The PostgreSQL schema of ``--journal postgresql://...`` unless ``--journal-schema`` or the
DSN's ``memstore_schema`` says."""
CONFIRMATION_KEY_LABEL: Final = b"memstore confirmations v1"
"""What :func:`confirmation_key` MACs with the shared secret: a key for this use only."""


def confirmation_key(secret: bytes) -> bytes:
    """The hard-delete confirmation key of every server sharing ``secret``.

    ``secret`` is the tokens file's bytes (or ``--confirm-key-file``'s): the
    replicas of one memory share it, so each derives the same key and honours
    the others' dry-run receipts, while the key itself is never the tokens.

    >>> confirmation_key(b"{}") == confirmation_key(b"{}") != confirmation_key(b"{ }")
    True
    >>> len(confirmation_key(b"{}"))
    32
    """
    return hmac.new(secret, CONFIRMATION_KEY_LABEL, hashlib.sha256).digest()


def _tokens_path(args: argparse.Namespace) -> Path:
    """The tokens file served: ``--tokens-file``, or the data folder's own."""
    return Path(args.tokens_file) if args.tokens_file else Path(args.data) / TOKENS_FILE


def _confirmations(args: argparse.Namespace, journal: Journal | None) -> Confirmations:
    """Confirmations keyed by the shared secret (the key file, else the tokens file).

    With a PostgreSQL journal the redeemed receipts are recorded in its
    schema, so that each is good for one hard delete across the replicas.
    """
    key_file = getattr(args, "confirm_key_file", None)
    path = Path(key_file) if key_file else _tokens_path(args)
    secret = path.read_bytes()
    # A key file exists to be the secret; a tokens file is whatever it holds
    # (``{}``, which authenticates nobody, is a valid one).
    if key_file and len(secret) < 16:
        raise ValueError(f"{path}: a confirmation secret needs at least 16 bytes")
    claim = None
    if journal is not None and hasattr(journal, "schema"):
        from memstore.protocol.pgconfirm import PostgresClaims  # needs psycopg

        claim = PostgresClaims(libpq_dsn(args.journal), journal.schema)
    return Confirmations(confirmation_key(secret), claim=claim)


def _journal(args: argparse.Namespace) -> Journal | None:
    """``--journal``: a PostgresJournal in ``--journal-schema``, or None (the folder's SQLite)."""
    return postgres_journal(args.journal, getattr(args, "journal_schema", None))


def _load(path: str | Path) -> TokensFile[TokenTable]:
    """The tokens file at ``path``, re-read when it changes.

    :raises TokensFileError: it cannot be read or parsed now.
    """
    try:
        return TokensFile(path, TokenTable.from_json)
    except OSError as e:
        raise TokensFileError(f"cannot read tokens file {str(path)!r}: {e}") from None
    except ValueError as e:  # TokensFileError, or bytes that are not UTF-8
        raise TokensFileError(f"{path}: {e}") from None


def _base_url(args: argparse.Namespace) -> str:
    """The server's URL as a client writes it: an IPv6 address in brackets (``http://[::1]:8080``).

    >>> _base_url(argparse.Namespace(host="::1", port=8080)), _base_url(
    ...     argparse.Namespace(host="127.0.0.1", port=80))
    ('http://[::1]:8080', 'http://127.0.0.1:80')
    """
    return base_url(args.host, args.port)


def _tokens(args: argparse.Namespace) -> TokensFile[TokenTable] | None:
    """The tokens to serve, or None (after saying why) when the server must not start."""
    if args.tokens_file:
        return _load(args.tokens_file)
    if not is_loopback(args.host):
        print(
            f"memstore: refusing to serve on {args.host} without --tokens-file: a server "
            "reachable from the network needs tokens given on purpose "
            '(a JSON map {"<token>": {"tenant": ..., "scopes": [...]}})',
            file=sys.stderr,
        )
        return None
    path = Path(args.data) / TOKENS_FILE
    if path.exists():
        tokens = _load(path)
        print(f"memstore: tokens from {path}", file=sys.stderr)
        return tokens
    path.parent.mkdir(parents=True, exist_ok=True)
    token = new_token()
    write_tokens_file(path, {token: Principal(DEFAULT_TENANT, frozenset(SCOPES))})
    print(
        f"memstore: no --tokens-file; made a token for tenant {DEFAULT_TENANT!r} in {path} "
        "(mode 0600). Try:\n"
        f"  curl -s {_base_url(args)}/v1/recall "
        f"-H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' "
        """-d '{"query": "hello"}'""",
        file=sys.stderr,
    )
    return _load(path)


def _check_keepalive(args: argparse.Namespace) -> None:
    """Refuse a ``--sse-keepalive`` the app cannot take (the rates are
    :func:`~memstore.web.settings.http_settings`'s to check).

    Checked before anything is opened or written, so a bad flag is a one-line
    error and exit status 2 (a keep-alive of 0 s would otherwise send comments
    in a busy loop while a streamed recall runs).

    :raises ValueError: naming the flag and the value.
    """
    keepalive = getattr(args, "sse_keepalive", SSE_KEEPALIVE_SECONDS)
    if not (math.isfinite(keepalive) and keepalive > 0):
        raise ValueError(f"sse_keepalive must be a positive number, got {keepalive}")


def serve(args: argparse.Namespace, *, mounts: Sequence[Mount] = ()) -> int:
    """Run the server until SIGTERM or SIGINT; the exit status (2 when it cannot start).

    ``args``: ``data``, ``embedder``, ``host``, ``port``, ``tokens_file``,
    ``journal``, ``metrics_disabled`` and optionally ``journal_schema``,
    ``confirm_key_file``, ``sse_keepalive`` and the HTTP defences
    (:data:`~memstore.web.settings.HTTP_OPTIONS`: ``allow_host``,
    ``rate_per_second``, ``max_body``, ...), as ``memstore serve`` parses them.
    ``mounts``: other surfaces added to the app (see :func:`~memstore.protocol.app.create_app`).
    """
    try:
        settings = http_settings(args, max_body_bytes=MAX_BODY_BYTES)
        _check_keepalive(args)
        if Path(args.data).exists() and not Path(args.data).is_dir():
            raise ValueError(f"{args.data} is a file; --data takes a folder")
    except ValueError as e:
        print(f"memstore: {e}", file=sys.stderr)
        return 2
    if not args.tokens_file and not is_loopback(args.host):
        _tokens(args)  # says why it refuses, before anything is opened
        return 2
    try:  # a port in use is refused before anything is made
        with listening(args.host, args.port) as sockets:
            return _serve_on(args, sockets, mounts, settings)
    except ListenError as e:
        print(f"memstore: {e}; choose another --port or --host", file=sys.stderr)
        return 1


def _serve_on(
    args: argparse.Namespace,
    sockets: list[socket.socket],
    mounts: Sequence[Mount],
    settings: HttpSettings,
) -> int:
    """:func:`serve` once its address is bound: open, authenticate, serve, close."""
    try:
        journal = _journal(args)
    except ValueError as e:
        print(f"memstore: {e}", file=sys.stderr)
        return 2
    try:
        # A confirmation key file is checked before a tokens.json is made, so
        # a start refused for it leaves no token behind; without one, the
        # tokens file is the secret and has to exist first.
        keyed = getattr(args, "confirm_key_file", None)
        confirmations = _confirmations(args, journal) if keyed else None
        tokens = _tokens(args)
        if confirmations is None:
            confirmations = _confirmations(args, journal)
    except (OSError, ValueError) as e:  # TokensFileError is a ValueError
        if journal is not None:
            journal.close()
        print(f"memstore: {e}", file=sys.stderr)
        return 2
    if tokens is None:  # pragma: no cover - refused above, before the journal opened
        if journal is not None:
            journal.close()
        return 2
    memory = Memory(
        args.data,
        embedder=args.embedder,
        journal=journal if journal is not None else args.journal or None,
        hub=True,
    )
    app = None
    try:
        app = create_app(
            memory,
            tokens=tokens,
            rate_per_second=settings.rate_per_second,
            burst=settings.rate_burst,
            metrics_enabled=not args.metrics_disabled,
            confirmations=confirmations,
            keepalive_seconds=getattr(args, "sse_keepalive", SSE_KEEPALIVE_SECONDS),
            hosts=settings.hosts,
            origins=settings.origins,
            max_body_bytes=settings.max_body_bytes,
            mounts=mounts,
        )
        config = ServeConfig(
            host=args.host,
            port=args.port,
            sockets=sockets,
            limits=settings.limits,
            graceful_shutdown_seconds=settings.shutdown_grace,
            on_hangup=(tokens.reload,),
            # The change feeds (/v1/events) end at once: a client on one would
            # otherwise hold the shutdown for the whole grace period.
            on_shutdown=(memory.hub.close,) if memory.hub is not None else (),
            render=render_refusal,
        )
        print(
            f"memstore: serving MemoryProtocol 0.1 on {_base_url(args)} "
            f"(data {args.data}, {len(tokens.current())} token(s), {settings.hosts})",
            file=sys.stderr,
            flush=True,
        )
        serve_app(app, config)
        print("memstore: stopped", file=sys.stderr, flush=True)
        return 0
    finally:
        if app is not None:  # recalls still queued finish before the storage closes
            close_batcher(app, shutdown_grace(args))
        memory.close()
