"""What a data folder records of the journal it is kept in, when that is not its own.

A :class:`~memstore.memory.Memory` keeps its record in the folder's
``journal.db`` unless it is given another journal (``journal=`` a
PostgreSQL DSN or a :class:`~memstore.journal.Journal`: ``memstore serve
--journal postgresql://...``, a replica). The folder then holds the
vectors and the server's tokens but no journal, and a command run on it
later (``memstore add --data DIR``) would find no memory there and quietly
start a new one in SQLite, beside the memory its server serves.

So a folder opened with another journal says which, in
:data:`JOURNAL_RECORD_FILE` (``journal.json``): the kind of journal and, for
PostgreSQL, where it is and its schema, never a password::

    {"journal": "postgresql", "where": "app@db:5432/memory", "schema": "agents"}

Opening the folder with its own ``journal.db`` again removes the record.
:func:`read_journal_record` reads it back (the command line refuses such a
folder without ``--journal``, naming what to pass).

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> record_journal(folder, {"journal": "postgresql", "where": "app@db:5432/m", "schema": "s"})
>>> read_journal_record(folder)["schema"]
's'
>>> forget_journal_record(folder); read_journal_record(folder) is None
True
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Final

from memstore._durable import move_into_place, staging_name
from memstore.journal import Journal

__all__ = [
    "JOURNAL_RECORD_FILE",
    "forget_journal_record",
    "journal_record",
    "read_journal_record",
    "record_journal",
]

JOURNAL_RECORD_FILE: Final = "journal.json"
"""The file in a data folder naming the journal it is kept in, when not its ``journal.db``."""

_log = logging.getLogger("memstore")


def journal_record(journal: Journal) -> dict[str, str]:
    """What a folder records of ``journal``: its kind and, for PostgreSQL, where (no password).

    ``where`` is ``user@host:port/dbname`` as libpq reads the DSN; it is left
    out when the DSN cannot be read safely (its fields might hold the password).
    """
    try:
        from memstore.journal.postgres import PostgresJournal  # psycopg: an optional extra
    except ImportError:  # no psycopg: no journal here is a PostgresJournal
        return {"journal": type(journal).__name__}
    if not isinstance(journal, PostgresJournal):
        return {"journal": type(journal).__name__}
    from memstore.journal._pgconn import describe, dsn_fields

    record = {"journal": "postgresql", "schema": journal.schema}
    if dsn_fields(journal.dsn) is not None:
        record["where"] = describe(journal.dsn)
    return record


def record_journal(folder: Path, record: dict[str, str]) -> None:
    """Write ``record`` into ``folder`` (made if missing), unless it says so already.

    A folder that cannot be written (read-only, full) is logged and left as
    it is: the memory opens all the same, its server serves it.
    """
    path = folder / JOURNAL_RECORD_FILE
    text = json.dumps(record, sort_keys=True) + "\n"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = staging_name(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        move_into_place(tmp, path)
    except OSError as e:
        _log.warning("memstore: cannot record the journal in %s: %s", path, e.strerror or e)
    finally:
        tmp.unlink(missing_ok=True)


def forget_journal_record(folder: Path) -> None:
    """Remove the record: ``folder`` is kept in its own ``journal.db`` again."""
    try:
        os.unlink(folder / JOURNAL_RECORD_FILE)
    except FileNotFoundError:
        pass
    except OSError as e:
        _log.warning("memstore: cannot remove %s: %s", folder / JOURNAL_RECORD_FILE, e)


def read_journal_record(folder: str | os.PathLike[str]) -> dict[str, str] | None:
    """The journal ``folder`` records being kept in, or ``None`` (its own ``journal.db``).

    A record that cannot be read as one still says the folder is kept
    elsewhere: ``{"journal": "unknown"}``.
    """
    path = Path(folder) / JOURNAL_RECORD_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError):
        return {"journal": "unknown"}
    try:
        record = json.loads(text)
    except ValueError:
        return {"journal": "unknown"}
    if not isinstance(record, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in record.items()
    ):
        return {"journal": "unknown"}
    return record
