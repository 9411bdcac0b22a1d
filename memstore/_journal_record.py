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
    "postgres_record",
    "read_journal_record",
    "record_journal",
    "same_journal",
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
    return postgres_record(journal.dsn, journal.schema)


def postgres_record(dsn: str, schema: str) -> dict[str, str]:
    """What a folder records of the PostgreSQL journal at ``dsn`` (libpq's), in ``schema``."""
    from memstore.journal._pgconn import describe, dsn_fields  # psycopg: an optional extra

    record = {"journal": "postgresql", "schema": schema}
    if dsn_fields(dsn) is not None:
        record["where"] = describe(dsn)
    return record


def same_journal(recorded: dict[str, str], dsn: str, schema: str) -> bool:
    """Whether the PostgreSQL journal at ``dsn`` (libpq's), ``schema``, is the one ``recorded``.

    The same journal is the same tables: a PostgreSQL record, the same
    schema, host, port and database. The user is not part of it (a server
    may write as ``app`` and an operator read as ``admin``), nor is the
    password or any other connection setting. Host and database are compared
    as libpq reads them from the DSN (no host is ``localhost``, no port
    5432), never resolved: ``127.0.0.1`` and ``localhost`` are two names,
    told apart. When either side cannot be shown without its password (a
    record without ``where``), the schema alone is compared.

    >>> served = {"journal": "postgresql", "schema": "agents", "where": "app@db:5432/memory"}
    >>> same_journal(served, "postgresql://admin:pw@db/memory", "agents")
    True
    >>> same_journal(served, "postgresql://app@db/memory", "memstore")
    False
    >>> same_journal(served, "postgresql://app@db:5433/memory", "agents")
    False
    """
    if recorded.get("journal") != "postgresql" or recorded.get("schema") != schema:
        return False
    from memstore.journal._pgconn import describe, dsn_fields

    fields, here = dsn_fields(dsn), recorded.get("where")
    if fields is None or here is None:
        return True
    user = fields.get("user", "")
    place = describe(dsn)[len(user) + 1 if user else 0 :]  # host:port/dbname
    return here == place or here.endswith("@" + place)


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
