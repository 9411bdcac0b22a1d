"""Opening the memory an MCP server serves: a writer, or read-only beside one.

One process writes a data folder's SQLite journal at a time. MCP clients
start servers on their own (two editor windows on one project start two), so
a second server on a folder already being written does not fail: it opens the
journal read-only, serves every read tool, and refuses write tools with a tool
error that says why. ``--readonly`` asks for that on purpose. A PostgreSQL
journal (``--journal postgresql://...``) has no such limit: many servers on
many machines write one memory.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from memstore._memory_wiring import shown_journal
from memstore.errors import JournalError, JournalLockedError, MemstoreError
from memstore.memory import JOURNAL_FILE, Memory
from memstore.web.journal_option import DSN_SCHEMES, postgres_journal

__all__ = ["Opened", "open_memory"]


@dataclass
class Opened:
    """The memory to serve, and why writes are refused (empty: they are not)."""

    memory: Memory
    readonly_reason: str = ""


def open_memory(
    data: str | os.PathLike[str],
    *,
    embedder: str | None = "auto",
    journal: str | None = None,
    journal_schema: str | None = None,
    readonly: bool = False,
) -> Opened:
    """Open the memory in ``data`` (or on the ``journal`` DSN) for an MCP server.

    Raises :class:`~memstore.errors.MemstoreError` with what to do when the
    memory cannot be opened at all.
    """
    if os.fspath(data).startswith(DSN_SCHEMES):  # else a local folder named after it
        raise MemstoreError(
            "--data is a folder, not a PostgreSQL DSN: give the DSN as --journal "
            "(--data DIR --journal postgresql://...)"
        )
    if journal and not journal.startswith(DSN_SCHEMES):
        raise MemstoreError(f"--journal takes a postgresql:// DSN, got {shown_journal(journal)}")
    if Path(data).exists() and not Path(data).is_dir():  # as memstore serve says it
        raise MemstoreError(f"{os.fspath(data)} is a file; --data takes a folder")
    pg = postgres_journal(journal, journal_schema)
    if pg is not None:
        mem = Memory(data, embedder=embedder, journal=pg)
        return Opened(mem, "this server was started with --readonly" if readonly else "")
    if readonly:
        return Opened(_read_only(Path(data), embedder), "this server was started with --readonly")
    try:
        return Opened(Memory(data, embedder=embedder))
    except JournalLockedError:
        reason = (
            f"another memstore process is writing {data} (this server opened it read-only; "
            "stop the other one, or give each project its own --data folder)"
        )
        print(f"memstore mcp: {reason}", file=sys.stderr)
        return Opened(_read_only(Path(data), embedder), reason)


def _read_only(data: Path, embedder: str | None) -> Memory:
    """A memory restored from the folder's journal, opened for reading only.

    ``Memory(readonly=True)``: vectors are held in memory (the writer owns the
    folder's vector files), reusing those the writer stored.
    """
    path = data / JOURNAL_FILE
    if not path.is_file():  # a JournalError: not there, exit 1 as every command's "no journal"
        raise JournalError(
            f"nothing to serve read-only: {path} does not exist (start a writer on {data} first)"
        )
    return Memory(data, embedder=embedder, readonly=True)
