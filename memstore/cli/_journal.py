"""The journal a command works on: the ``--data`` folder's own, or ``--journal``'s.

A folder a server serves on PostgreSQL (``memstore serve --data DIR --journal
postgresql://...``) holds the server's files (vectors, tokens) and no
``journal.db``; the engine records that in ``DIR/journal.json``
(:mod:`memstore._journal_record`). ``memstore add --data DIR`` found no
memory there and quietly made a new SQLite one beside it: writes the server
never saw, reads of an empty memory. Now such a folder is refused without
``--journal``, in words that say what to pass (:func:`kept_elsewhere`), and
with ``--journal`` every data command works on that journal as the server
does (:func:`shared_memory`), leaving the folder's files to the server. A
``--journal`` naming another journal than the folder records is refused
too, naming both (:func:`another_journal`).

The servers (``memstore serve``, ``serve --api mindlayer``, ``mcp``) open a
folder with a ``--journal`` too: a wrong one rewrote the folder's record and
served (and made) another schema, and none at all served a new SQLite memory
beside the recorded one. Every command that takes ``--data`` and
``--journal`` asks :func:`journal_refusal`, the one check, before it opens
anything.

A server given ``--journal`` on a folder that holds a SQLite memory of its own
recorded the folder as that journal's: the folder's memory was then hidden
from every command run on it (each refuses it without ``--journal``, and with
it works on the other memory), and the server's vectors took its vectors'
place. The servers ask :func:`kept_here` too, and refuse such a folder,
saying how to bring its memory into the journal.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from memstore._journal_record import postgres_record, read_journal_record, same_journal
from memstore.backup import TOKENS_FILE, VECTORS_FILE
from memstore.memory import JOURNAL_FILE, Memory
from memstore.web.journal_option import JournalOptionError, postgres_settings

__all__ = [
    "another_journal",
    "journal_refusal",
    "kept_elsewhere",
    "kept_here",
    "shared_memory",
]

_SERVER_FILES = (VECTORS_FILE, TOKENS_FILE)
"""What a server keeps in its folder beside a journal of another place."""


def journal_refusal(
    data: str, journal: str | None, schema: str | None, *, server: bool = False
) -> str:
    """Why the folder ``data`` must not be opened with ``--journal`` ``journal`` and
    ``--journal-schema`` ``schema``, or ``""``: the check of every command that takes both.

    Without ``journal`` (the folder's own ``journal.db``), :func:`kept_elsewhere`
    answers; with one, :func:`another_journal`, before anything is opened (opening
    a journal makes its schema when missing).

    ``server``: the command serves the folder (``serve``, ``mcp``), which leaves
    out :func:`kept_elsewhere`'s guess about a folder written before folders
    recorded their journal (a server makes its ``tokens.json`` before its
    journal, so a first start that failed half-way leaves such a folder, its
    own), and asks :func:`kept_here` too: a server records the journal it is
    given in the folder, a data command with ``--journal`` leaves it alone.

    >>> import tempfile, json, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "journal.json").write_text(json.dumps({"journal": "HostJournal"}))
    >>> print(journal_refusal(str(folder), "postgresql://app@db/memory", None))
    ... # doctest: +ELLIPSIS
    --journal names a PostgreSQL journal (app@db:5432/memory, schema memstore), but /.../ is ...

    :raises JournalOptionError: ``schema`` cannot go with ``journal`` (see
        :func:`~memstore.web.journal_option.postgres_settings`).
    :raises ValueError: a ``memstore_`` parameter of the DSN the journal cannot take.
    """
    if not journal:
        return kept_elsewhere(data, unrecorded=not server)
    settings = postgres_settings(journal, schema)
    if settings is None:  # no PostgreSQL DSN: the parsers refuse it, Memory too
        return ""
    dsn, options = settings
    named: str = options["schema"]
    return another_journal(data, dsn, named) or (kept_here(data, dsn, named) if server else "")


def kept_elsewhere(data: str, *, unrecorded: bool = True) -> str:
    """Why the folder ``data`` cannot be used without ``--journal``, or ``""``.

    The folder records another journal (``journal.json``), or, written before
    it did, holds a server's files but no ``journal.db`` (asked only with
    ``unrecorded``).

    >>> import tempfile, json, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> kept_elsewhere(str(folder))
    ''
    >>> _ = (folder / "journal.json").write_text(json.dumps(
    ...     {"journal": "postgresql", "where": "app@db:5432/memory", "schema": "agents"}))
    >>> print(kept_elsewhere(str(folder)))  # doctest: +ELLIPSIS
    /.../ is kept in a PostgreSQL journal (app@db:5432/memory, schema agents), not in a ...
    """
    folder = Path(data)
    if not folder.is_dir():  # missing (a new memory), or a file (refused as one)
        return ""
    record = read_journal_record(folder)
    if record is None:
        if not unrecorded or (folder / JOURNAL_FILE).is_file():
            return ""
        files = [name for name in _SERVER_FILES if (folder / name).is_file()]
        if not files:
            return ""
        return (
            f"{data}/ holds a server's files ({', '.join(files)}) but no {JOURNAL_FILE}: its "
            "memory is kept in another journal (a server run with --journal postgresql://...); "
            "give that journal as the server had it, --journal postgresql://USER@HOST/DB "
            "--journal-schema SCHEMA, or another --data folder"
        )
    if record.get("journal") != "postgresql":
        kind = record.get("journal", "unknown")
        return (
            f"{data}/ is kept in a journal of its host's own ({kind}), not in a {JOURNAL_FILE}: "
            "the command line cannot open it; use the program that serves it, or another "
            "--data folder"
        )
    schema = record.get("schema", "memstore")
    where = record.get("where")
    dsn = f"postgresql://{where}" if where else "postgresql://USER@HOST/DB"
    shown = f"{where}, schema {schema}" if where else f"schema {schema}"
    return (
        f"{data}/ is kept in a PostgreSQL journal ({shown}), not in a {JOURNAL_FILE} of "
        f"its own (a server opened it with --journal): give that journal, --journal {dsn} "
        f"--journal-schema {schema} (with its password if it needs one)"
    )


def shared_memory(args: argparse.Namespace, *, embed: bool) -> Memory:
    """The memory ``--journal`` (and ``--journal-schema``) name, as a server opens it.

    No folder is opened: the vectors the journal keeps are loaded (or made)
    in this process, so the files of a server's ``--data`` folder stay its
    own. Raises :class:`ValueError` for a schema the journal cannot take.
    """
    from memstore.journal.postgres import PostgresJournal

    schema = getattr(args, "journal_schema", None)
    why = journal_refusal(args.data, args.journal, schema)
    if why:  # refused before connecting: opening a journal makes its schema when missing
        raise JournalOptionError(why)
    settings = postgres_settings(args.journal, schema)
    if settings is None:  # pragma: no cover - the parser takes only a postgresql:// DSN
        raise ValueError("--journal takes a postgresql:// DSN")
    dsn, options = settings
    journal = PostgresJournal(dsn, **options)
    return Memory(embedder=args.embedder if embed else None, journal=journal)


def another_journal(data: str, dsn: str, schema: str) -> str:
    """Why ``--journal`` (``dsn`` as libpq reads it, in ``schema``) is not ``data``'s, or ``""``.

    A folder a server serves records the journal it was given
    (``journal.json``); a ``--journal`` naming another would read, or write,
    a memory the folder's server never sees (and opening it makes its schema
    when missing). It is the same journal when :func:`same_journal` says so:
    the same schema, host, port and database, whoever connects. A folder that
    records no PostgreSQL journal (none, its own ``journal.db``, or a record
    that cannot be read) is not asked: ``--journal`` alone names the memory.
    """
    record = read_journal_record(data) if Path(data).is_dir() else None
    if record is None or record.get("journal") == "unknown" or same_journal(record, dsn, schema):
        return ""
    named = postgres_record(dsn, schema)
    given = f"{named['where']}, schema {schema}" if "where" in named else f"schema {schema}"
    if record.get("journal") != "postgresql":
        return (
            f"--journal names a PostgreSQL journal ({given}), but {data}/ is kept in a journal "
            f"of its host's own ({record.get('journal')}): use the program that serves it, or "
            "another --data folder"
        )
    where = record.get("where")
    kept = f"{where}, schema {record.get('schema')}" if where else f"schema {record.get('schema')}"
    return (
        f"--journal names another journal ({given}) than the one {data}/ is kept in ({kept}), "
        f"which its server was given: give that journal, --journal postgresql://"
        f"{where or 'USER@HOST/DB'} --journal-schema {record.get('schema')}, or another "
        "--data folder"
    )


def kept_here(data: str, dsn: str, schema: str) -> str:
    """Why a server must not serve the folder ``data`` from the journal at ``dsn``
    (libpq's), in ``schema``, or ``""``: the folder holds a memory of its own.

    Served from the journal, the folder would record it (``journal.json``)
    and hide its own ``journal.db`` from every command run on it. A folder
    that records a journal already is :func:`another_journal`'s to judge, and
    a ``journal.db`` that holds no write (a start that stopped at once) hides
    nothing.
    """
    folder = Path(data)
    own = folder / JOURNAL_FILE
    if not own.is_file() or read_journal_record(folder) is not None or not _holds_writes(own):
        return ""
    named = postgres_record(dsn, schema)
    given = f"postgresql://{named['where']}" if "where" in named else "postgresql://..."
    return (
        f"{data}/ holds a memory of its own ({JOURNAL_FILE}): served from --journal, the "
        "folder would be recorded as that journal's and its own memory hidden from every "
        "command run on it. Give the server another --data folder (it keeps only its "
        "vectors and tokens there), or copy this memory into the journal first: memstore "
        f"export --data {data} | memstore import - --data NEWDIR --journal {given} "
        f"--journal-schema {schema}"
    )


def _holds_writes(journal_db: Path) -> bool:
    """Whether the SQLite journal ``journal_db`` holds any write.

    Read as an immutable file, which leaves no trace beside it (a read-only
    connection to a journal in WAL mode would leave its ``-shm`` and ``-wal``
    files); writes still in a write-ahead log count as writes, and a journal
    that cannot be read is taken to hold some: refusing is the side that
    loses nothing.
    """
    wal = journal_db.with_name(journal_db.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        return True
    try:
        conn = sqlite3.connect(f"{journal_db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return True
    try:
        return conn.execute("SELECT 1 FROM versions LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return True
    finally:
        conn.close()
