"""Running one command: its exit status, and the signals that stop it cleanly."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from memstore._startup import ignore_sigint_when_done, take_back_sigint
from memstore.errors import (
    InvalidItemError,
    JournalCorruptError,
    JournalLockedError,
    MemstoreError,
)

from ._common import UsageError, utf8
from .parser import build_parser


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is so its clean-up runs as for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)


@contextlib.contextmanager
def _stoppable(command: str) -> Iterator[None]:
    """While a command runs, SIGTERM and SIGHUP unwind it as Ctrl-C does.

    Killed outright, an import into a new folder, a backup or an export to a
    file would leave its hidden staging folder or file behind; unwound, each
    removes it and the destination stays as it was. The servers keep their own
    handlers, and a signal already ignored (``nohup``) stays ignored.
    """
    if command in ("serve", "mcp"):
        yield
        return
    saved: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: nothing to install
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                saved[sig] = signal.signal(sig, _stop)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _plain_stdout() -> None:
    """Text a terminal cannot encode is printed escaped (``\\u00e9``), not a traceback."""
    out = sys.stdout
    if out is not None and isinstance(out, io.TextIOWrapper) and not utf8(out):
        out.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (see the module docs).

    Interrupted (Ctrl-C, SIGTERM, SIGHUP), a command leaves what it was
    writing as it was and exits 128 + the signal's number (130 for Ctrl-C),
    from its first moment (see :mod:`memstore._startup`) to its last.
    """
    try:
        return _run(argv)
    finally:
        ignore_sigint_when_done()


def _run(argv: Sequence[str] | None) -> int:
    """:func:`main`, up to the moment the command has finished."""
    args: argparse.Namespace | None = None
    try:
        take_back_sigint()  # from here on Ctrl-C is a KeyboardInterrupt, reported below
        args = build_parser().parse_args(argv)
        if getattr(args, "embedder", None) == "none":
            args.embedder = None
        _plain_stdout()
        with _stoppable(args.command):
            code: int = args.fn(args)
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, _Stopped) else signal.SIGINT
        print(f"memstore: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # `memstore export | head`: the reader has what it wanted. Quiet, as Unix tools are.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except JournalLockedError as e:
        print(f"memstore: {_locked(args, e)}", file=sys.stderr)
        return 1
    except (UsageError, InvalidItemError) as e:
        print(f"memstore: {_one_line(e)}", file=sys.stderr)
        return 2
    except (MemstoreError, OSError) as e:
        print(f"memstore: {_one_line(e)}{_hint(args, e)}", file=sys.stderr)
        return 1
    except ImportError as e:
        missing = _missing_extra(e)
        if not missing:
            raise
        print(f"memstore: {missing}", file=sys.stderr)
        return 1
    return code


def _missing_extra(e: ImportError) -> str:
    """An extra the command needs and the installation lacks, as one line; or ``""``.

    ``memstore serve`` and ``memstore mcp`` check their own extra before they
    start; a part they or a data command reach only for an option (psycopg for
    ``--journal postgresql://...``) fails where it is imported, with the
    ``pip install`` line in its message. A missing extra is a failure (exit
    status 1): the command line was right, the installation lacks a part.

    >>> print(_missing_extra(ModuleNotFoundError("no psycopg", name="psycopg")))
    --journal postgresql://... needs the postgres extra (psycopg is missing): pip install ...
    >>> _missing_extra(ModuleNotFoundError("No module named 'nope'", name="nope"))
    ''
    """
    if (e.name or "").partition(".")[0] == "psycopg":
        return (
            "--journal postgresql://... needs the postgres extra (psycopg is missing): "
            'pip install "memstore-engine[postgres]"'
        )
    text = _one_line(e)
    return text if 'pip install "memstore-engine[' in text else ""


def _hint(args: argparse.Namespace | None, e: BaseException) -> str:
    """What the command line offers where the engine's words name a Python call."""
    return _salvage_hint(args, e) or _embedder_hint(e)


def _embedder_hint(e: BaseException) -> str:
    """Vectors made by another embedder: the flag that reads the folder anyway.

    The engine's words name ``CellStore.reembed``; from the shell, the folder
    opens with the embedder that made its vectors, and ``--embedder none``
    reads and searches any folder by its words alone.
    """
    from memstore_index import EmbedderMismatchError  # the engine's vector index

    if not isinstance(e, EmbedderMismatchError):
        return ""
    if "@" in str(e):  # a provider's model (model@base_url): chosen in the environment
        return (
            "; from the command line: set MEMSTORE_PROVIDER_EMBEDDING_MODEL (and its base URL) "
            "to the model that made them, or start with neither and --embedder none to use "
            "words alone"
        )
    return (
        "; from the command line: give the --embedder that made them (local for "
        "all-MiniLM-L6-v2-onnx-int8, local-int8 for all-MiniLM-L6-v2-onnx-int8-rowq, hash "
        "for hash-v1-256-0), or --embedder none to use words alone"
    )


def _salvage_hint(args: argparse.Namespace | None, e: BaseException) -> str:
    """A damaged journal row: the command line's way to salvage the rest.

    The engine's words name ``export(on_corrupt=...)``, a Python call;
    ``memstore export --salvage`` is the same export from the shell.
    """
    data = getattr(args, "data", None)
    if not (isinstance(e, JournalCorruptError) and e.item_id and data):
        return ""
    return (
        f"; from the command line: memstore export --salvage --data {data} -o FILE, "
        "then memstore import FILE --data NEW_FOLDER"
    )


def _locked(args: argparse.Namespace | None, e: JournalLockedError) -> str:
    """The folder is another process's to write: what the command line offers instead.

    The engine's words end "open this one with readonly=True", a Python
    option no command takes. ``memstore serve`` has no read-only mode: a
    second server on one memory shares a PostgreSQL journal instead; a
    command that takes ``--readonly`` is pointed to it.

    >>> ns = argparse.Namespace(command="serve", data="notes")
    >>> _locked(ns, JournalLockedError("locked")).split(";")[0]
    'notes is being written by another process (a running memstore serve or memstore mcp?)'
    """
    data = getattr(args, "data", None)
    if args is None or not data:
        return _one_line(e)
    held = f"{data} is being written by another process (a running memstore serve or memstore mcp?)"
    if args.command == "serve":
        return (
            f"{held}; stop it, or give this server its own --data folder (servers that "
            "share one memory share a PostgreSQL journal: --journal postgresql://...)"
        )
    if hasattr(args, "readonly"):
        return f"{held}; stop it, or add --readonly to read it as it is"
    return f"{held}; stop it, or send the change through its HTTP API"


def _one_line(e: BaseException) -> str:
    """An error as one line: what went wrong and what to type instead."""
    text = e.reason if isinstance(e, InvalidItemError) else str(e)
    return " ".join(text.split())
