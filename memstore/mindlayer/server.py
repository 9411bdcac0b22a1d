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
HTTP plumbing (read timeouts, connection caps, Host and Origin checks,
SIGTERM/SIGINT shutdown, SIGHUP re-reading the token file) is
:mod:`memstore.web`'s, with the same flags as the protocol server.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Final

from memstore.errors import JournalLockedError, MemstoreError
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
from memstore.web.runner import ServeConfig, serve_app, shutdown_grace
from memstore.web.settings import HttpSettings, http_settings
from memstore.web.tokens import TokensFile

__all__ = ["SEED_TOKEN_VARIABLE", "serve"]

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


def serve(args: argparse.Namespace) -> int:
    """Run the Mind Layer server until SIGTERM or SIGINT; the exit status (2: not started).

    ``args`` as ``memstore serve`` parses them: ``data``, ``embedder``,
    ``host``, ``port``, ``journal``, ``owner_token_file`` and optionally
    ``journal_schema``, ``allow_host``, ``allow_origin`` and the connection limits.
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
        # The shared flags, read as every server reads them; of these the Mind Layer
        # applies the Host and Origin policies, the connection limits and the grace
        # (memstore serve refuses its --max-body and rates: its own limits apply).
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
    # Vectors of another model, a provider down at start-up; ValueError: a --journal
    # timeout (memstore_statement_timeout=...) the journal cannot take.
    except (MemstoreError, ValueError) as e:
        if chat is not None:
            chat.close()
        if isinstance(e, JournalLockedError):  # worded by the command line, as for every command
            raise
        return _fail(e)
    app = None
    try:
        hosts = settings.hosts
        app = create_app(
            MindLayer(memory, chat=chat), token=token, hosts=hosts, origins=settings.origins
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
            f"embeddings {model}, chat {provider.chat_model if provider else None}, {hosts})",
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
