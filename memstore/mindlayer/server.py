"""``memstore serve --api mindlayer``: the Mind Layer API on uvicorn, from the command line.

Start-up checks, each refusing to start (exit status 2, one line on stderr
saying what to fix) rather than serving something unsafe:

- the provider settings (:class:`~memstore.mindlayer.provider.ProviderConfig`):
  an ``http://`` URL that is not loopback, a URL with credentials, a model
  without a URL or a URL without a model;
- the owner token (:func:`~memstore.mindlayer.auth.load_owner_token`): a
  public bind needs a token of 32+ characters, from ``--owner-token-file``
  (mode 0600, re-read when it changes) or from seed 002's ``MIND_LAYER_TOKEN``
  (one or the other, never both);
- the vectors: with an embedding model, vectors stored by another model (or
  dimension) are refused (fail closed), naming both models and the way to
  re-embed (``CellStore.reembed``).

The embedder is the provider's embedding model when one is configured, else
``--embedder`` (``none``: lexical only; ``local``: the offline MiniLM model).
HTTP plumbing (read timeouts, connection caps, Host and Origin checks, the
body bound, the rate limit, SIGTERM/SIGINT shutdown, SIGHUP re-reading the
token file) is :mod:`memstore.web`'s, with the same flags as the protocol
server, read by :func:`~memstore.web.settings.http_settings`. Two defaults are
the API's own: ``--max-body`` is 1 MiB (seed 002's bound), and no rate is
limited unless ``--rate-per-second`` or ``--rate-burst`` is given
(:func:`owner_rate_limiter`).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Final

from memstore.errors import JournalError, MemstoreError
from memstore.journal import Journal
from memstore.memory import Memory
from memstore.mindlayer.app import create_app
from memstore.mindlayer.auth import OwnerTokenError, load_owner_token
from memstore.mindlayer.limits import MAX_BODY_BYTES
from memstore.mindlayer.provider import ProviderConfig, ProviderConfigError
from memstore.mindlayer.service import MindLayer
from memstore.web.batching import close_batcher
from memstore.web.journal_option import postgres_journal
from memstore.web.listen import ListenError, base_url, listening
from memstore.web.ratelimit import RateLimiter
from memstore.web.runner import ServeConfig, serve_app, shutdown_grace
from memstore.web.settings import HttpSettings, http_settings
from memstore.web.tokens import TokensFile
from memstore_index import EmbedderMismatchError, EmbeddingError

__all__ = ["SEED_TOKEN_VARIABLE", "owner_rate_limiter", "serve"]

SEED_TOKEN_VARIABLE: Final = "MIND_LAYER_TOKEN"
"""Seed 002's owner-token variable: set without ``--owner-token-file``, start-up is refused."""


def _fail(message: object) -> int:
    print(f"memstore: {message}", file=sys.stderr)
    return 2


def _journal(args: argparse.Namespace) -> Journal | str | None:
    """``--journal``: a PostgresJournal in ``--journal-schema``, else the DSN as given or None.

    :raises MemstoreError: ``--journal-schema`` without a ``postgresql://`` journal.
    """
    pg = postgres_journal(args.journal, getattr(args, "journal_schema", None))
    return pg if pg is not None else args.journal or None  # None: the folder's SQLite


def owner_rate_limiter(args: argparse.Namespace, settings: HttpSettings) -> RateLimiter | None:
    """The owner's token bucket, or None (no rate limit) when ``args`` asks for no rate.

    Off unless ``--rate-per-second`` or ``--rate-burst`` is given (the other then
    takes its default, 60 a second or a burst of 120): the Mind Layer API had no
    rate limit, and a default one would throttle an application already serving
    more than 60 requests a second. Given, it is one bucket for the server, not
    one per scope or per client: seed 002 has one caller, the owner (one token
    granting every scope; agent and user ids are namespaces the caller names,
    not identities, so a bucket per scope would be a limit a caller steps
    around by naming another), and without a token the server binds loopback
    only, its callers the local machine's.

    >>> import argparse
    >>> from memstore.web.settings import http_settings
    >>> off = argparse.Namespace(host="127.0.0.1", rate_per_second=None, rate_burst=None)
    >>> owner_rate_limiter(off, http_settings(off, max_body_bytes=1024)) is None
    True
    >>> on = argparse.Namespace(host="127.0.0.1", rate_per_second=None, rate_burst=3)
    >>> limiter = owner_rate_limiter(on, http_settings(on, max_body_bytes=1024))
    >>> limiter.rate_per_second, limiter.burst
    (60.0, 3)
    """
    given = (getattr(args, name, None) for name in ("rate_per_second", "rate_burst"))
    if all(value is None for value in given):
        return None
    return settings.rate_limiter()


def serve(args: argparse.Namespace) -> int:
    """Run the Mind Layer server until SIGTERM or SIGINT; the exit status (2: an option it
    cannot take; a memory it cannot open now is raised, for the command line's exit 1).

    ``args`` as ``memstore serve`` parses them: ``data``, ``embedder``,
    ``host``, ``port``, ``journal``, ``owner_token_file`` and optionally
    ``journal_schema`` and the HTTP defences (``allow_host``, ``max_body``,
    ``rate_per_second``, ...: :data:`~memstore.web.settings.HTTP_OPTIONS`).
    """
    if getattr(args, "tokens_file", None):
        return _fail(
            "--tokens-file is MemoryProtocol's; the Mind Layer API takes --owner-token-file"
        )
    try:
        provider = ProviderConfig.from_env(os.environ)
        seed_token = os.environ.get(SEED_TOKEN_VARIABLE)  # seed 002's way to give it
        token = load_owner_token(
            getattr(args, "owner_token_file", None),
            args.host,
            variable=(SEED_TOKEN_VARIABLE, seed_token) if seed_token else None,
        )
        # The shared flags, read as every server reads them; the body bound's default
        # is seed 002's 1 MiB, and the rate is limited only when asked for.
        settings = http_settings(args, max_body_bytes=MAX_BODY_BYTES)
    except (ProviderConfigError, OwnerTokenError, ValueError) as e:
        return _fail(e)
    try:  # a port in use is refused before anything opens
        with listening(args.host, args.port) as sockets:
            return _serve_on(args, sockets, provider, token, settings)
    except ListenError as e:
        print(f"memstore: {e}; choose another --port or --host", file=sys.stderr)
        return 1


def _serve_on(
    args: argparse.Namespace,
    sockets: list[socket.socket],
    provider: ProviderConfig | None,
    token: TokensFile[str] | str | None,
    settings: HttpSettings,
) -> int:
    """:func:`serve` once its address is bound: open, serve, close."""
    try:
        embedder = provider.embedder() if provider is not None else None
        chat = provider.chat() if provider is not None else None
    except ImportError as e:
        return _fail(
            f'a provider needs httpx ({e.name} is missing): pip install "memstore-engine[http]"'
        )
    try:
        memory = Memory(
            args.data,
            embedder=embedder if embedder is not None else args.embedder,
            journal=_journal(args),
        )
    # Vectors of another model, a provider or a journal down at start-up, a folder another
    # process writes: it cannot be done now, worded by the command line (exit 1, with the
    # flag that helps) as for every command. ValueError: a --journal timeout
    # (memstore_statement_timeout=...) the journal cannot take, exit 2.
    except (MemstoreError, ValueError) as e:
        if chat is not None:
            chat.close()
        if isinstance(e, (JournalError, EmbedderMismatchError, EmbeddingError)):
            raise
        return _fail(e)
    app = None
    try:
        hosts = settings.hosts
        limiter = owner_rate_limiter(args, settings)
        app = create_app(
            MindLayer(memory, chat=chat),
            token=token,
            hosts=hosts,
            origins=settings.origins,
            limiter=limiter,
            max_body_bytes=settings.max_body_bytes,
        )
        config = ServeConfig(
            host=args.host,
            port=args.port,
            sockets=sockets,
            limits=settings.limits,
            on_hangup=(token.reload,) if isinstance(token, TokensFile) else (),
            graceful_shutdown_seconds=settings.shutdown_grace,
        )
        model = memory.cells.embedder.model_id if memory.cells is not None else "none"
        print(
            f"memstore: serving the Mind Layer API on {base_url(args.host, args.port)} "
            f"(data {args.data}, owner token {'required' if token else 'not required'}, "
            f"embeddings {model}, chat {provider.chat_model if provider else None}, "
            f"body at most {settings.max_body_bytes} bytes, {_rate_words(limiter)}, {hosts})",
            file=sys.stderr,
            flush=True,
        )
        serve_app(app, config)
        print("memstore: stopped", file=sys.stderr, flush=True)
        return 0
    finally:
        # The provider's clients first: a worker thread still waiting for a provider that
        # hung (its request was answered 503 already) gives up now; otherwise the process's
        # exit, which joins the worker threads, would wait for the provider's timeout.
        if chat is not None:
            chat.close()
        if embedder is not None:
            embedder.close()
        if app is not None:  # searches still queued finish before the storage closes
            close_batcher(app, shutdown_grace(args))
        memory.close()


def _rate_words(limiter: RateLimiter | None) -> str:
    """The start-up line's words for the rate limit.

    >>> _rate_words(None), _rate_words(RateLimiter(0.5, 3))
    ('no rate limit', 'rate 0.5/s, burst 3')
    """
    if limiter is None:
        return "no rate limit"
    return f"rate {limiter.rate_per_second:g}/s, burst {limiter.burst}"
