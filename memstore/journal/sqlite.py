"""The embedded default: a journal in one SQLite file (stdlib ``sqlite3``, WAL mode).

>>> import tempfile, os
>>> from memstore import Item, Store
>>> folder = tempfile.mkdtemp()
>>> with SqliteJournal(os.path.join(folder, "journal.db")) as journal:
...     store = Store()
...     journal.attach(store)
...     note = store.upsert(Item(kind="note", title="the deploy moved to Friday"))
>>> with SqliteJournal(os.path.join(folder, "journal.db")) as journal:
...     again = Store()
...     journal.attach(again)
...     [it.title for it in again.items()]
['the deploy moved to Friday']

One process writes a file at a time: a second writer (another process, or
another :class:`SqliteJournal` on the same path) gets
:class:`~memstore.errors.JournalLockedError` at once instead of waiting.
Readers opened with ``readonly=True`` may come and go beside the writer.

Durability: ``"full"`` (the default) syncs the write-ahead log on every
commit, so an acknowledged write survives a power loss; ``"normal"`` survives
a crash of the process but may lose the last commits on power loss; ``"off"``
leaves syncing to the operating system.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Final, Literal

from memstore.errors import (
    JournalCorruptError,
    JournalError,
    JournalFullError,
    JournalLockedError,
    JournalSchemaError,
)
from memstore.item import Item
from memstore.journal._stamps import NewestStamp
from memstore.journal._tail import PRIVATE_MARK, TailRows
from memstore.journal.base import JournalBase
from memstore.journal.hlc import Lsn
from memstore.journal.version import Row

try:  # POSIX advisory locks; elsewhere the single-writer check is skipped
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["SCHEMA_VERSION", "SqliteJournal", "backup_file"]

Durability = Literal["full", "normal", "off"]

SCHEMA_VERSION: Final = 1
"""The schema this code writes; older files are migrated forward on open."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_FETCH = 512
_CHECKPOINT_WAIT_MS = 500
"""How long close waits for a busy reader before leaving the log for the next open."""
_log = logging.getLogger(__name__)

# Each step takes the schema from version i to i + 1 (index i).
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE versions (
            id TEXT NOT NULL,
            lsn INTEGER NOT NULL,
            node INTEGER NOT NULL,
            to_lsn INTEGER,
            to_node INTEGER,
            op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
            kind TEXT NOT NULL,
            partition TEXT NOT NULL,
            shared INTEGER NOT NULL,
            item TEXT,
            PRIMARY KEY (id, lsn, node)
        )""",
        "CREATE INDEX versions_open ON versions (id) WHERE to_lsn IS NULL",
        "CREATE INDEX versions_lsn ON versions (lsn)",
        "CREATE INDEX versions_partition ON versions (partition, id, lsn)",
        "CREATE INDEX versions_shared ON versions (id, lsn) WHERE shared = 1",
    ),
)

_COLUMNS = "id, lsn, node, to_lsn, to_node, op, kind, partition, shared, item"

_FileId = tuple[int, int] | None
"""A file's ``(st_dev, st_ino)``, or ``None`` when nothing is at its path."""


LEXICON_SUFFIX: Final = ".lexicon.npz"
"""The saved lexical index beside a journal file (see :meth:`JournalBase._save_lexicon`)."""


_HEAD: Final = (
    "SELECT max(coalesce((SELECT max(lsn) FROM versions), 0), "
    "coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'high_water'), 0))"
)
"""The newest position on record: the newest stamp, or a purge's high-water mark."""

_INSERT_OPEN: Final = (
    "INSERT INTO versions (id, lsn, node, to_lsn, to_node, op, kind, partition, shared, item) "
    "VALUES (?,?,?,NULL,NULL,?,?,?,?,?)"
)
"""An open row (no ``to_lsn``, ``to_node``): see :func:`_insert_rows`."""
_CLOSE_ONE: Final = "UPDATE versions SET to_lsn = ?, to_node = ? WHERE id = ? AND to_lsn IS NULL"
_CLOSE_SET: Final = (
    "UPDATE versions SET to_lsn = ?, to_node = ? "
    "WHERE to_lsn IS NULL AND id IN (SELECT value FROM json_each(?))"
)


def _newest_query(n: int) -> str:
    """The newest version of each of ``n`` ids, in one statement (``_newest_stamps``).

    Per id, the primary key ``(id, lsn, node)`` walked backwards for one
    entry (covering: no table read), then that row's ``op`` by its rowid:
    one index seek per id, however long its history.
    """
    return (
        f"WITH asked(id) AS (VALUES {','.join(['(?)'] * n)}) "
        "SELECT v.id, v.lsn, v.node, v.op FROM asked JOIN versions v ON v.rowid = ("
        "SELECT rowid FROM versions WHERE id = asked.id ORDER BY lsn DESC, node DESC LIMIT 1)"
    )


def _has_json_each() -> bool:
    """Whether the SQLite library this process links has ``json_each`` (JSON1).

    Built in by default since SQLite 3.38, and in most builds before; without
    it every group takes the statement per id.
    """
    try:
        with contextlib.closing(sqlite3.connect(":memory:")) as conn:
            conn.execute("SELECT value FROM json_each('[]')").fetchall()
    except sqlite3.Error:
        return False
    return True


_JSON_EACH: Final = _has_json_each()


def _close_open_rows(conn: sqlite3.Connection, firsts: list[Row]) -> None:
    """Close the open row of each id of ``firsts`` (distinct ids) at that row's stamp.

    A write group's rows share one stamp: its ids are closed by one set-based
    statement (the ids as a JSON array, read by ``json_each``) instead of one
    statement per id. Rows of several stamps, or ids whose JSON text SQLite
    might read back otherwise (control characters, anything not printable),
    take the statement per id: the same rows change either way.
    """
    lsn, node = firsts[0].lsn, firsts[0].node
    ids = [r.id for r in firsts]
    one_stamp = all(r.lsn == lsn and r.node == node for r in firsts)
    if _JSON_EACH and len(ids) > 1 and one_stamp and "".join(ids).isprintable():
        conn.execute(_CLOSE_SET, (lsn, node, json.dumps(ids, ensure_ascii=False)))
        return
    conn.executemany(_CLOSE_ONE, ((r.lsn, r.node, r.id) for r in firsts))


def _insert_rows(conn: sqlite3.Connection, rows: Sequence[Row]) -> None:
    """``INSERT`` every row of ``rows``, binding exact ints and strings where it can.

    ``sqlite3`` binds an exact ``int`` or ``str`` as it is, but a ``None`` or a
    ``bool`` first goes through its adapter protocol: two attribute lookups
    that fail, each raising and clearing an ``AttributeError`` (about a
    quarter of a row's ``INSERT``, three per row). A new row is open (no
    ``to_lsn``, no ``to_node``: every row a write inserts), so those two are
    ``NULL`` in the statement, and ``shared`` is bound as the integer a
    ``bool`` is stored as: the same values land in the same columns. Rows of
    any other shape take the statement with every column a parameter.
    """
    values = [
        (r.id, r.lsn, r.node, r.op, r.kind, r.partition, 1 if r.shared else 0, r.item)
        for r in rows
        if r.to_lsn is None and r.to_node is None and type(r.shared) is bool
    ]
    if len(values) == len(rows):
        conn.executemany(_INSERT_OPEN, values)
        return
    conn.executemany(
        f"INSERT INTO versions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [_values(r) for r in rows],
    )


class SqliteJournal(JournalBase):
    """A journal in one SQLite file; see the module docs.

    ``path`` is the database file (its directory must exist). ``node_id``
    goes into every stamp (0..65535); ``wall`` supplies milliseconds (tests
    inject a clock). ``max_bytes`` caps the file: a write that would grow it
    beyond fails with :class:`~memstore.errors.JournalFullError` and changes
    nothing. ``readonly=True`` opens for reading only (no lock, no attach).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "full",
        node_id: int = 0,
        wall: Callable[[], int] | None = None,
        max_bytes: int | None = None,
        readonly: bool = False,
    ) -> None:
        super().__init__(node_id=node_id, wall=wall)
        if durability not in ("full", "normal", "off"):
            raise ValueError(f"durability must be 'full', 'normal' or 'off', got {durability!r}")
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise ValueError(
                f"max_bytes must be a whole number of bytes above 0, got {max_bytes!r}"
            )
        if not isinstance(path, str | os.PathLike):
            raise ValueError(f"path must be a file path, got {type(path).__name__} {path!r:.40}")
        if type(readonly) is not bool:  # readonly="no" must not open read-only
            raise ValueError(f"readonly must be True or False, got {readonly!r}")
        self.path = os.fspath(path)
        self.readonly = readonly
        self._durability = durability
        self._lockfile: int | None = None
        self._wlock = threading.RLock()
        self._readers: list[sqlite3.Connection] = []
        self._rlock = threading.Lock()
        self._files: tuple[_FileId, _FileId] | None = None
        _check_file(self.path)
        if not readonly:
            self._lockfile = _take_lock(self.path)
        try:
            self._conn = self._connect(self.path, readonly)
            self._open_schema()
            if max_bytes is not None:
                page = self._conn.execute("PRAGMA page_size").fetchone()[0]
                self._conn.execute(f"PRAGMA max_page_count = {max(1, max_bytes // page)}")
            if not readonly:  # the files this writer's connection holds open, from now on
                self._files = self._file_ids()
        except BaseException:
            self._release_lock()
            raise

    # ------------------------------------------------------------ opening

    def _connect(self, path: str, readonly: bool) -> sqlite3.Connection:
        try:
            if readonly:
                # A file: URI, percent-encoded: a path with '#', '?' or '%' in it
                # must name the same file, not a truncated one.
                uri = Path(path).absolute().as_uri() + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
        except sqlite3.Error as e:
            raise _translate(e, f"cannot open journal {path!r}") from e
        return conn

    def _open_schema(self) -> None:
        conn = self._conn
        try:
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            version = 0
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None or not str(row[0]).isdigit():
                    raise JournalCorruptError(f"{self.path}: the journal has no schema version")
                version = int(row[0])
            elif tables:
                raise JournalSchemaError(
                    f"{self.path} is an SQLite database but not a memstore journal "
                    f"(it has tables {sorted(tables)[:5]})"
                )
            if version > SCHEMA_VERSION:
                raise JournalSchemaError(
                    f"{self.path} has journal schema {version}, newer than this memstore "
                    f"understands ({SCHEMA_VERSION}): upgrade memstore to open it"
                )
            if self.readonly:
                if version < SCHEMA_VERSION:
                    raise JournalSchemaError(
                        f"{self.path} needs a migration (schema {version}); "
                        "open it for writing once"
                    )
                return
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._durability.upper()}")
            if version < SCHEMA_VERSION:
                self._migrate(version)
            else:  # touch every page of the record once: a damaged file fails here
                check = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
                if check != "ok":
                    raise JournalCorruptError(f"{self.path} is damaged: {check}")
        except sqlite3.Error as e:
            raise _translate(e, f"cannot open journal {self.path!r}") from e

    def _migrate(self, version: int) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            for step in _MIGRATIONS[version:]:
                for statement in step:
                    conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a Ctrl-C may land after BEGIN failed or COMMIT ended it
                conn.execute("ROLLBACK")
            raise

    # ------------------------------------------------------ the files on disk

    def _file_ids(self) -> tuple[_FileId, _FileId]:
        """Which files ``path`` and its write-ahead log name now: ``(device, inode)`` each."""
        return _file_id(self.path), _file_id(self.path + "-wal")

    def _same_files(self) -> bool:
        """Whether ``path`` still names the files this writer holds open (a reader: never)."""
        return self._files is not None and self._file_ids() == self._files

    def _check_files(self, what: str) -> None:
        """Refuse ``what`` unless ``path`` still names the files this writer holds open.

        A journal file (or its ``-wal`` log) deleted, renamed or replaced while
        open leaves SQLite writing on: in WAL mode it does not notice, and every
        commit would land in a file that no later open finds (the next
        :class:`SqliteJournal` on ``path`` opens another file, or an empty new
        one). An acknowledged write would be lost, so the write is refused
        before it commits. One ``stat`` of each file: nothing beside a commit's sync.
        """
        if self.readonly or self._same_files():
            return
        raise JournalError(
            f"{what}: the journal file {self.path!r} (or its -wal log) was deleted, moved "
            "or replaced while this journal had it open, and nothing written now would be "
            "found there again. Close this journal (closing folds what it committed into "
            "the file it has open) and open the file that is at that path now, or restore "
            "a backup"
        )

    # ---------------------------------------------------------- rows: write

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed if the block returns, rolled back if it raises.

        A SQLite failure becomes the :class:`JournalError` it means, saying
        ``what`` failed and that nothing was changed. So does a journal file
        replaced under this writer (:meth:`_check_files`, just before the commit).
        """
        self._writable()
        with self._wlock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    self._check_files(f"{what} failed; nothing was changed")
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise _translate(e, f"{what} failed; nothing was changed") from e

    def _commit_rows(self, rows: Sequence[Row], *, purge: Collection[str] = ()) -> Lsn:
        firsts: dict[str, Row] = {}
        for r in rows:
            firsts.setdefault(r.id, r)
        with self._transaction("the journal write") as conn:
            if purge:
                # Keep the newest stamp ever issued: erasing the newest
                # rows must not let a later write reuse their positions.
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) SELECT 'high_water', "
                    "CAST(max(lsn) AS TEXT) FROM versions HAVING max(lsn) IS NOT NULL "
                    "AND max(lsn) > coalesce((SELECT CAST(value AS INTEGER) FROM meta "
                    "WHERE key = 'high_water'), 0)"
                )
                conn.executemany("DELETE FROM versions WHERE id = ?", ((i,) for i in purge))
            if firsts:
                _close_open_rows(conn, list(firsts.values()))
            if rows:
                _insert_rows(conn, rows)
        # A purge stamps nothing: the head, which this single writer knows,
        # is a position from which on the purge is in effect.
        return Lsn.unpack(rows[-1].lsn) if rows else self.head()

    def _import_rows(self, rows: Sequence[Row]) -> Lsn:
        ids = sorted({r.id for r in rows})
        with self._transaction("the import") as conn:
            conn.executemany(
                f"INSERT OR IGNORE INTO versions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (_values(r) for r in rows),
            )
            for id in ids:
                stamps = conn.execute(
                    "SELECT lsn, node FROM versions WHERE id = ? ORDER BY lsn, node", (id,)
                ).fetchall()
                nxt = [*stamps[1:], (None, None)]
                conn.executemany(
                    "UPDATE versions SET to_lsn = ?, to_node = ? "
                    "WHERE id = ? AND lsn = ? AND node = ?",
                    ((b[0], b[1], id, a[0], a[1]) for a, b in zip(stamps, nxt, strict=True)),
                )
        # Imported versions keep their stamps: the head is now the newest of
        # them or the head before, whichever is newer.
        return max(self.head(), *(Lsn.unpack(r.lsn) for r in rows))

    def _writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise JournalError(f"{self.path} was opened read-only")

    # ----------------------------------------------------------- rows: read

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection of the read pool: reads run beside the writer (WAL).

        A writer whose file was replaced (:meth:`_check_files`) refuses to read
        too: a new connection would read whatever file is at the path now.
        """
        self._check_files(f"reading journal {self.path!r} failed")
        with self._rlock:
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = self._connect(self.path, readonly=True)
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with self._rlock:
                if self._closed:
                    conn.close()
                else:
                    self._readers.append(conn)

    def _select(self, sql: str, params: Sequence[object]) -> Iterator[Row]:
        """Stream rows of one consistent read (one transaction, batches of rows)."""
        self._check_open()
        with self._reader() as conn:
            try:
                conn.execute("BEGIN")
                cur = conn.execute(sql, params)
                while True:
                    batch = cur.fetchmany(_FETCH)
                    if not batch:
                        break
                    for r in batch:
                        yield Row(*r)
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise _translate(e, f"reading journal {self.path!r} failed") from e

    def _read_head(self) -> Lsn:
        try:
            with self._wlock:
                row = self._conn.execute(_HEAD).fetchone()
        except sqlite3.Error as e:
            raise _translate(e, f"reading journal {self.path!r} failed") from e
        return Lsn(0, 0) if row is None or not row[0] else Lsn.unpack(row[0])

    def head(self) -> Lsn:
        """The newest position on record (a read-only journal looks again each time)."""
        if self.readonly:
            self._check_open()
            return self._read_head()
        return super().head()

    def _current_rows(self) -> Iterator[Row]:
        return self._select(
            f"SELECT {_COLUMNS} FROM versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id",
            (),
        )

    def _rows_as_of(self, lsn: Lsn, partition: str | None) -> Iterator[Row]:
        at = lsn.packed()
        live = "lsn <= ? AND (to_lsn IS NULL OR to_lsn > ?) AND op = 'upsert'"
        if partition is None:
            return self._select(
                f"SELECT {_COLUMNS} FROM versions WHERE {live} ORDER BY id", (at, at)
            )
        # Two index walks (the partition's rows, then shared rows of others)
        # rather than one scan of every row with an OR.
        return self._select(
            f"SELECT {_COLUMNS} FROM versions WHERE partition = ? AND {live} "
            f"UNION ALL SELECT {_COLUMNS} FROM versions "
            f"WHERE shared = 1 AND partition != ? AND {live} ORDER BY id",
            (partition, at, at, partition, at, at),
        )

    def _current_items(self) -> Iterator[str]:
        self._check_open()
        with self._reader() as conn:
            try:
                cur = conn.execute(
                    "SELECT item FROM versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id"
                )
                while batch := cur.fetchmany(4096):
                    for (text,) in batch:
                        yield text
            except sqlite3.Error as e:
                raise _translate(e, f"reading journal {self.path!r} failed") from e

    def _restore_items(self) -> list[Item]:
        """The live items, parsed a batch of rows at a time (what :meth:`current` yields).

        The same parse and the same refusal of a damaged row as
        :meth:`~memstore.journal.base.JournalBase.current`, without two
        generators resumed per item: a restore parses 100k rows here.

        The head is read in the same read transaction (``_restored_at``): a
        reader beside a running writer names the state it restored exactly.
        """
        self._check_open()
        parse = Item.__pydantic_validator__.validate_json
        out: list[Item] = []
        with self._reader() as conn:
            try:
                conn.execute("BEGIN")
                cur = conn.execute(
                    "SELECT item FROM versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id"
                )
                while batch := cur.fetchmany(4096):
                    out.extend(map(parse, map(_first, batch)))
                head = conn.execute(_HEAD).fetchone()
                conn.execute("COMMIT")
                self._restored_at = Lsn.unpack(head[0]) if head and head[0] else Lsn(0, 0)
            except sqlite3.Error as e:
                raise _translate(e, f"reading journal {self.path!r} failed") from e
            except ValueError:  # found by text alone: look the row up to name it
                raise self._corrupt_current() from None
        return out

    def _rows_of(self, ids: Collection[str] | None, partition: str | None) -> Iterator[Row]:
        order = " ORDER BY id, lsn, node"
        if ids is not None:
            ids = list(ids)
            if len(ids) == 1:
                return self._select(f"SELECT {_COLUMNS} FROM versions WHERE id = ?" + order, ids)
            return self._rows_of_many(ids)
        if partition is not None:
            return self._select(
                f"SELECT {_COLUMNS} FROM versions WHERE partition = ?" + order, [partition]
            )
        return self._select(f"SELECT {_COLUMNS} FROM versions" + order, ())

    def _export_rows(self, partition: str | None) -> Iterator[Lsn | Row]:
        # One read transaction: the head first (a deferred transaction's
        # snapshot starts at its first read), then one statement for the rows
        # (read as the ids, then their rows in chunks, a group committed
        # between two reads would be exported in part).
        if partition is None:
            query, params = f"SELECT {_COLUMNS} FROM versions ORDER BY id, lsn, node", []
        else:
            query = (
                f"SELECT {_COLUMNS} FROM versions WHERE id IN (SELECT id FROM versions "
                "WHERE to_lsn IS NULL AND partition = ?) ORDER BY id, lsn, node"
            )
            params = [partition]
        self._check_open()
        with self._reader() as conn:
            try:
                conn.execute("BEGIN")
                head = conn.execute(_HEAD).fetchone()
                yield Lsn.unpack(head[0]) if head and head[0] else Lsn(0, 0)
                cur = conn.execute(query, params)
                while batch := cur.fetchmany(_FETCH):
                    for r in batch:
                        yield Row(*r)
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise _translate(e, f"reading journal {self.path!r} failed") from e

    def _tail_rows(self, id: str, limit: int) -> TailRows:
        # One statement: the window aggregates read the id's every row in the
        # database (the primary key's range), and only ``limit`` rows come back.
        query = (
            f"SELECT {_COLUMNS}, COUNT(*) OVER (), MIN(partition) OVER (), "
            "MAX(partition) OVER (), MAX(op = 'upsert' AND instr(item, ?) > 0) OVER () "
            "FROM versions WHERE id = ? ORDER BY lsn DESC, node DESC LIMIT ?"
        )
        self._check_open()
        with self._reader() as conn:
            try:
                found = conn.execute(query, [PRIVATE_MARK, id, limit]).fetchall()
            except sqlite3.Error as e:
                raise _translate(e, f"reading journal {self.path!r} failed") from e
        if not found:
            return [], 0, None, None, False
        total, low, high, private = found[0][-4:]
        return [Row(*r[:-4]) for r in found], total, low, high, bool(private)

    def _newest_stamps(self, ids: list[str]) -> list[NewestStamp]:
        query = _newest_query(len(ids))
        self._check_open()
        with self._reader() as conn:
            try:
                return conn.execute(query, ids).fetchall()
            except sqlite3.Error as e:
                raise _translate(e, f"reading journal {self.path!r} failed") from e

    def _rows_of_many(self, ids: list[str]) -> Iterator[Row]:
        for start in range(0, len(ids), 500):
            chunk = sorted(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            yield from self._select(
                f"SELECT {_COLUMNS} FROM versions WHERE id IN ({marks}) ORDER BY id, lsn, node",
                chunk,
            )

    # -------------------------------------------------------------- close

    def _lexicon_path(self) -> str | None:
        """``journal.db.lexicon.npz`` beside the file: the store's saved lexical index."""
        return f"{self.path}{LEXICON_SUFFIX}"

    def _save_lexicon(self) -> None:
        # A reader never writes beside the writer's file; nor does a writer whose
        # file was replaced (the index would sit beside another journal).
        if self._same_files():
            super()._save_lexicon()

    def _close_backend(self) -> None:
        """Close the readers, fold the write-ahead log into the file, close the writer.

        The order matters: SQLite checkpoints only from a connection that may
        write, and a read connection still open keeps the log's frames in
        use. Closed this way, ``journal.db`` alone holds every committed
        write (a copy of that one file is a whole journal) and the ``-wal``
        file is emptied. A reader still busy in another thread shortens the
        checkpoint (the log then stays and is folded in on the next open),
        which loses nothing.
        """
        with self._rlock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        with self._wlock:
            if not self.readonly:
                self._checkpoint()
            self._conn.close()
        self._release_lock()

    def _checkpoint(self) -> None:
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as e:  # every commit is already durable in the log
            _log.warning("memstore: could not checkpoint journal %r on close (%s)", self.path, e)

    def _release_lock(self) -> None:
        if self._lockfile is not None:
            os.close(self._lockfile)  # closing the descriptor releases the lock
            self._lockfile = None


def backup_file(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> int:
    """Copy the SQLite database ``source`` to the new file ``target``, consistently, online.

    SQLite's online backup API (:meth:`sqlite3.Connection.backup`) copies
    every page in one step under one read transaction: the copy is the
    database as of one commit, even while another connection or process
    writes (WAL lets the writer go on meanwhile). ``source`` is opened
    read-only and never changed; ``target`` must not exist. The copy is
    checked (``PRAGMA quick_check``) and closed, so it is one self-contained
    file. Returns its size in bytes. Raises
    :class:`~memstore.errors.JournalError` (a subclass for a damaged source).
    """
    src_path, dst_path = Path(source), Path(target)
    if dst_path.exists():
        raise JournalError(f"{str(dst_path)!r} exists; a backup is written to a new file")
    _check_file(os.fspath(src_path))
    uri = src_path.absolute().as_uri() + "?mode=ro"
    src: sqlite3.Connection | None = None
    dst: sqlite3.Connection | None = None
    try:
        src = sqlite3.connect(uri, uri=True)
        src.execute("PRAGMA busy_timeout = 5000")
        dst = sqlite3.connect(dst_path)
        src.backup(dst)  # pages=-1: the whole database in one step, one snapshot
        check = dst.execute("PRAGMA quick_check(1)").fetchone()[0]
        if check != "ok":
            raise JournalCorruptError(f"the backup of {str(src_path)!r} is damaged: {check}")
    except sqlite3.Error as e:
        raise _translate(e, f"backing up {str(src_path)!r} failed") from e
    finally:
        for conn in (dst, src):
            if conn is not None:
                conn.close()
    return dst_path.stat().st_size


_first = itemgetter(0)


def _file_id(path: str) -> _FileId:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _values(r: Row) -> tuple[object, ...]:
    return (r.id, r.lsn, r.node, r.to_lsn, r.to_node, r.op, r.kind, r.partition, r.shared, r.item)


def _check_file(path: str) -> None:
    """Refuse, before SQLite touches it, a file that is not an SQLite database."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise JournalError(
                f"cannot create journal {path!r}: {folder!r} is not a directory"
            ) from None
        return
    except IsADirectoryError:
        raise JournalError(f"{path!r} is a directory; give the journal a file path") from None
    except OSError as e:
        raise JournalError(f"cannot read journal {path!r}: {e.strerror}") from e
    if head and head != _SQLITE_MAGIC:
        raise JournalCorruptError(f"{path!r} is not an SQLite database (left untouched)")


def _take_lock(path: str) -> int | None:
    """Take the single-writer lock beside ``path`` (``path + '.lock'``)."""
    if fcntl is None:  # pragma: no cover
        return None
    lock_path = path + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise JournalError(f"cannot open journal {path!r}: {e.strerror} ({lock_path})") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise JournalLockedError(
            f"journal {path!r} is open for writing elsewhere (another process or journal "
            "object holds it); close that one, or open this one with readonly=True"
        ) from None
    return fd


def _translate(e: sqlite3.Error, what: str) -> JournalError:
    """The journal error a SQLite failure means, with SQLite's words kept."""
    text = str(e)
    code = getattr(e, "sqlite_errorname", "")
    if code == "SQLITE_FULL" or "full" in text:
        return JournalFullError(f"{what}: the disk or the journal's size cap is full ({text})")
    if (
        code in ("SQLITE_CORRUPT", "SQLITE_NOTADB")
        or "malformed" in text
        or "not a database" in text
    ):
        return JournalCorruptError(f"{what}: the file is damaged ({text})")
    if code in ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM"):
        return JournalError(f"{what}: {text} (is the file or its directory read-only?)")
    return JournalError(f"{what}: {text}")
