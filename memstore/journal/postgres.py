"""A journal in PostgreSQL: one shared record, many processes, each with its own store.

Each process keeps its working set in memory (its :class:`~memstore.store.Store`
and its own vector index) and attaches a :class:`PostgresJournal` on the same
database. Every write is committed to PostgreSQL before it is acknowledged,
exactly as with :class:`~memstore.journal.sqlite.SqliteJournal`; then it is
announced (``NOTIFY``) and every other attached process mirrors it into its
store, and into its :class:`~memstore_index.CellStore` with the vector the
writer embedded (stored beside the version), so a replica never embeds again.

.. code-block:: python

    from memstore import Item, Store
    from memstore.journal import PostgresJournal

    journal = PostgresJournal("postgresql://app@db.internal/memory")
    store = Store()
    journal.attach(store)        # restores the store, then follows the others' writes
    store.upsert(Item(kind="note", title="the deploy moved to Friday"))

How it stays consistent (details in ``docs/postgres.md``):

* **One commit order.** A commit locks the single ``head`` row, stamps its
  versions above the newest stamp on record, writes them, appends one row to
  the ``commits`` feed under the next sequence number, and commits. Stamps,
  sequence numbers and visibility therefore all follow one order.
* **Conflicts.** Two processes writing the same id: the later commit has the
  higher :class:`~memstore.journal.hlc.Hlc` and wins, everywhere; the other
  process's store takes the winner's state when it follows the feed. Under
  :meth:`PostgresJournal.atomically` (every read-then-write method of
  ``Memory``), a group that writes an id another process wrote since this
  one took it in is refused instead, and runs again once caught up.
* **Catch-up.** A follower reads the feed after the last sequence number it
  applied; a snapshot always sees a gap-free prefix of the feed (see
  :mod:`memstore.journal._pgfeed`), so a dropped connection or a paused
  process resumes exactly where it stopped.
* **Read-your-writes.** The writer's store holds its write as soon as the
  call returns; other processes see it after the replication lag, and
  :meth:`PostgresJournal.wait_for` waits for a given position.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard, TypeVar

try:
    import psycopg
except ModuleNotFoundError as e:  # pragma: no cover - exercised without the extra
    raise ModuleNotFoundError(
        'PostgresJournal needs psycopg 3: pip install "memstore-engine[postgres]"', name=e.name
    ) from None
from psycopg import sql

from memstore.config import Change
from memstore.errors import WriteConflictError
from memstore.item import Item
from memstore.journal._holding import _holding
from memstore.journal._pgapply import FeedApplier
from memstore.journal._pgconn import SYNCHRONOUS, Conn, Connections, translate, write_error
from memstore.journal._pgdeadline import NoAnswer
from memstore.journal._pgfeed import Follower
from memstore.journal._pgposition import FeedPosition
from memstore.journal._pgreads import newest_stamps, tail_rows
from memstore.journal._pgschema import SCHEMA_VERSION, allocate_node, open_schema
from memstore.journal._pgsql import Queries, ids_json, rows_json_chunks, vectors_json
from memstore.journal._pgvectors import GroupVectors, read_vectors, vector_bytes, vectors_for
from memstore.journal._stamps import NewestStamp
from memstore.journal._tail import TailRows
from memstore.journal.dsnoptions import is_schema_name
from memstore.journal.hlc import Hlc, HybridClock, InvalidLsnError, Lsn, to_lsn
from memstore.journal.version import Row

if TYPE_CHECKING:
    from memstore.store import Store
    from memstore_index import CellStore

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT_S",
    "DEFAULT_LOCK_TIMEOUT_S",
    "DEFAULT_POLL_INTERVAL_S",
    "DEFAULT_SCHEMA",
    "MAX_LOCK_TIMEOUT_S",
    "SCHEMA_VERSION",
    "FeedStatus",
    "PostgresJournal",
]

DEFAULT_SCHEMA: Final = "memstore"
"""The PostgreSQL schema a journal lives in unless told otherwise."""
DEFAULT_POLL_INTERVAL_S: Final = 2.0
"""How often a follower reads the feed when no notification came (a safety net)."""
DEFAULT_CONNECT_TIMEOUT_S: Final = 5
DEFAULT_CLOSE_TIMEOUT_S: Final = 10.0
"""How long :meth:`PostgresJournal.close` waits for work in flight before cutting connections."""
DEFAULT_LOCK_TIMEOUT_S: Final = 30.0
"""How long a commit waits for the commit lock before it fails."""
MAX_LOCK_TIMEOUT_S: Final = 2_147_483.647
"""The longest ``lock_timeout`` PostgreSQL takes (its setting is an int of milliseconds)."""
CONFLICT_ATTEMPTS: Final = 16
"""How many times :meth:`PostgresJournal.atomically` runs an operation that keeps conflicting."""
CONFLICT_WAIT_S: Final = 10.0
"""How long it waits for the follower to take in the conflicting commit before retrying."""
CONFLICT_BACKOFF_S: Final = 0.001
"""Then it pauses a random time below this, doubled at each attempt (at most 0.1 s)."""

T = TypeVar("T")

Durability = Literal["full", "normal", "off"]

_FETCH = 2000
_FOREVER_S = 365 * 24 * 3600.0 * 100
"""A wait longer than this (a century; infinity too) is a wait without a timeout."""


@dataclass(frozen=True, slots=True)
class FeedStatus:
    """Where a journal's follower stands (see :meth:`PostgresJournal.feed_status`)."""

    following: bool
    """Whether a follower thread runs (attached, with ``replicate=True``)."""
    seq: int
    """The sequence number of the last commit applied (or restored)."""
    position: Lsn
    """Its stamp: every version at or below it is in the store."""
    connects: int
    """Connections the follower made (more than one: it reconnected)."""
    batches: int
    """Batches of commits it applied."""
    read_s: float
    """Seconds it spent reading the feed from PostgreSQL."""
    apply_s: float
    """Seconds it spent applying batches to the store and the vector index."""


class PostgresJournal(FeedApplier):
    """A journal in a PostgreSQL schema, shared by every process attached to it.

    ``dsn``: a libpq connection string or ``postgresql://`` URI. ``schema``:
    the schema holding the tables (created on first open). ``node_id``: this
    process's node in every stamp; by default one is allocated from the
    database, unique among the processes holding the journal open.
    ``durability``: ``"full"`` (``synchronous_commit = on``: acknowledged
    writes survive a server crash) or ``"normal"``/``"off"``
    (``synchronous_commit = off``: much faster, the server may lose its last
    fraction of a second on a crash). ``replicate``: follow other processes'
    writes once attached. ``poll_interval``: seconds between reads of the feed
    when no notification arrives. ``lock_timeout``: seconds a commit waits for
    another process's commit before failing, rounded to whole milliseconds
    and at least one (PostgreSQL would read 0 as "wait for ever"), at most
    :data:`MAX_LOCK_TIMEOUT_S`. ``connect_timeout``: whole seconds to wait
    for the server, at least 1 (libpq would read 0 or less as "wait for
    ever"). ``close_timeout``: seconds :meth:`close` lets a write (or the
    follower's read) in flight end before it cuts the connections, failing
    whatever still waits on them, so that closing never hangs on a network
    gone silent. Every connection also asks for TCP keepalives and a
    ``tcp_user_timeout`` (a dead peer noticed in about 30 s), unless the DSN
    sets its own (``docs/journal.md``). ``statement_timeout``: seconds a
    statement may take (``None``, the default: no bound), cancelled by
    PostgreSQL past it; an answer that still has not come a little later
    (the network or the server stalled) fails the statement and drops its
    connection. It bounds every statement, a restore's or an export's batch
    too: leave room for them. An option of the wrong type (``replicate="no"``,
    ``poll_interval="2"``, ``node_id=True``) raises :class:`ValueError`
    before anything connects.

    Raises :class:`~memstore.errors.JournalError` when the server cannot be
    reached and :class:`~memstore.errors.JournalSchemaError` for a schema
    written by a newer memstore (or holding foreign tables).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        node_id: int | None = None,
        wall: Callable[[], int] | None = None,
        durability: Durability = "full",
        replicate: bool = True,
        poll_interval: float = DEFAULT_POLL_INTERVAL_S,
        connect_timeout: int = DEFAULT_CONNECT_TIMEOUT_S,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT_S,
        statement_timeout: float | None = None,
    ) -> None:
        super().__init__(node_id=node_id if node_id is not None else 0, wall=wall)
        if not isinstance(dsn, str):
            raise ValueError(f"dsn must be a postgresql:// DSN string, got {type(dsn).__name__}")
        if not is_schema_name(schema):
            raise ValueError(
                f"schema must be a plain identifier (letters, digits, _), got {schema!r}"
            )
        if durability not in SYNCHRONOUS:
            raise ValueError(f"durability must be 'full', 'normal' or 'off', got {durability!r}")
        if type(replicate) is not bool:  # replicate="no" must not follow the feed
            raise ValueError(f"replicate must be True or False, got {replicate!r}")
        if not _is_number(poll_interval) or not poll_interval > 0:  # NaN fails too
            raise ValueError(f"poll_interval must be positive, got {poll_interval!r}")
        if type(connect_timeout) is not int or connect_timeout < 1:
            raise ValueError(
                f"connect_timeout must be a whole number of seconds >= 1, got {connect_timeout!r}"
            )
        for name, seconds, limit in (
            ("lock_timeout", lock_timeout, MAX_LOCK_TIMEOUT_S),  # an int of ms in PostgreSQL
            ("statement_timeout", statement_timeout, MAX_LOCK_TIMEOUT_S),  # None: no bound
            ("close_timeout", close_timeout, _FOREVER_S),
        ):
            if (seconds is not None or name != "statement_timeout") and not (
                _is_number(seconds) and 0 < seconds <= limit
            ):
                raise ValueError(
                    f"{name} must be positive and at most {limit} seconds, got {seconds!r}"
                )
        self.dsn = dsn
        self.schema = schema
        self._replicate = replicate
        self._poll = poll_interval
        self._q = Queries(sql.Identifier(schema))
        self._cells: CellStore | None = None
        self._follower: Follower | None = None
        self._position = FeedPosition()
        self._restored = (0, 0)
        self._db = Connections(
            dsn,
            schema,
            durability=durability,
            connect_timeout=connect_timeout,
            # Rounded, not truncated, and never 0: PostgreSQL's lock_timeout
            # = 0 is no timeout at all, the opposite of a very short one.
            lock_timeout_ms=max(1, round(lock_timeout * 1000)),
            close_timeout=float(close_timeout),
            statement_timeout=None if statement_timeout is None else float(statement_timeout),
        )
        try:
            with self._db.write_lock:
                conn = self._db.writer()
                open_schema(conn, schema)
                if node_id is None:
                    self._node_id = allocate_node(conn, schema)
                    self._db.held = True
                self._db.set_node(self._node_id)
        except psycopg.Error as e:
            self._db.close()
            raise translate(e, f"cannot open journal {self._db.where}", "request") from e
        except BaseException:
            self._db.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresJournal({self._db.where}, schema={self.schema!r}, node={self._node_id})"

    @property
    def node_id(self) -> int:
        """This process's node id (in every stamp it writes)."""
        return self._node_id

    # ---------------------------------------------------------- rows: write

    def _on_commit(self, changes: Sequence[Change]) -> None:
        cells = self._cells
        special = getattr(self._tls, "special", None) is not None
        if cells is not None and (not special or getattr(self._tls, "special_versions", False)):
            self._tls.vectors = vectors_for(changes, cells)
        try:
            super()._on_commit(changes)
        finally:
            self._tls.vectors = None

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (reads of the attached store, then one write group) on the current state.

        Each process reads its own store, which follows the others' writes a
        few milliseconds late. Under ``atomically``, a group that writes an id
        another process wrote since this process took it in is refused at
        commit (:class:`~memstore.errors.WriteConflictError`, nothing written);
        this process then waits for its follower to apply that commit and runs
        ``fn`` again, at most :data:`CONFLICT_ATTEMPTS` times. So of two
        processes deleting one item, one deletes it and the other finds it
        gone, and two updates of one item both land, one after the other.
        Only the ids the group writes are checked: an id ``fn`` merely reads
        may have been changed by another process meanwhile, and the group
        still commits.

        Outside it, and inside a ``store.batch()`` opened before it (whose
        group commits later), a write replaces what is on record, the later
        commit winning. Without a follower (``replicate=False``) ``fn`` just runs.
        A caller holding ``store.lock`` gets the conflict at once: the
        follower cannot apply anything until the lock is released.
        """
        store = self._store
        if store is None or self._follower is None or getattr(self._tls, "checked", False):
            return fn()
        if store.in_batch():  # in a group opened outside: it commits later
            return fn()
        attempt = 1
        while True:
            self._tls.checked = True
            try:
                return fn()
            except WriteConflictError as e:
                if attempt >= CONFLICT_ATTEMPTS or store.holds_lock():
                    raise  # holding the store's lock, the follower could never catch up
                # The store caught up: its listeners need not have (this may be one).
                if not self._position.wait_for(e.position.packed(), CONFLICT_WAIT_S):
                    raise
            finally:
                self._tls.checked = False
            # Processes that lost to each other do not all come back at once.
            time.sleep(random.uniform(0, min(CONFLICT_BACKOFF_S * 2**attempt, 0.1)))
            attempt += 1

    def _refuse_unseen(self, conn: Conn, ids: Sequence[str]) -> None:
        """Raise :class:`WriteConflictError` if another process wrote ``ids`` unseen by this one.

        Run holding the commit lock: every commit on record is visible.
        """
        after = self._position.seq
        found = conn.execute(self._q.touched_after, {"after": after, "ids": ids_json(ids)})
        commits = [(int(seq), int(lsn), tuple(touched)) for seq, lsn, touched in found]
        unseen = self._position.unseen([(seq, touched) for seq, _, touched in commits], ids)
        if not unseen:
            return
        newest = max(lsn for _, lsn, touched in commits if unseen.intersection(touched))
        names = ", ".join(repr(id) for id in sorted(unseen)[:3])
        raise WriteConflictError(
            f"another process wrote {names}{' and more' if len(unseen) > 3 else ''} after this "
            "process read it; nothing was written (run the operation again once this process "
            f"has caught up with {Lsn.unpack(newest)})",
            ids=sorted(unseen),
            position=Lsn.unpack(newest),
        )

    def _commit_rows(self, rows: Sequence[Row], *, purge: Collection[str] = ()) -> Lsn:
        self._check_open()
        vectors: GroupVectors | None = getattr(self._tls, "vectors", None)
        ids = list(dict.fromkeys([*(r.id for r in rows), *purge]))
        checked = bool(rows) and getattr(self._tls, "checked", False)
        last = 0

        def write(conn: Conn, seq: int, head: int) -> None:
            nonlocal last
            if checked:
                self._refuse_unseen(conn, [r.id for r in rows])
            if not rows:  # a purge alone: a stamp of its own still moves the head on
                last = self._stamp_above(head)
            else:
                if rows[0].lsn <= head:  # another process stamped past us meanwhile
                    clock = self._ensure_clock()
                    clock.observe(Lsn.unpack(head))
                    _restamp(rows, clock)
                last = rows[-1].lsn
            chunks = rows_json_chunks(rows)
            params = self._write_params(purge, vectors, seq, last, ids)
            if len(chunks) == 1:  # the common case: one statement, one round trip
                conn.execute(self._q.write, {"rows": chunks[0], **params})
            else:
                self._stage(conn, chunks)
                conn.execute(self._q.write_staged, params)
            # Own before the COMMIT: the follower may read the commit the
            # moment it is on record, and must not take it for another
            # process's (it would wait for the store's lock to apply it,
            # which a writer waiting for this very commit may hold).
            acked.append(seq)
            self._position.acknowledge(seq, ids)

        acked: list[int] = []
        try:
            self._locked_write("the journal write failed", write)
        except BaseException:
            for seq in acked:  # not on record: the number may go to another's commit
                self._position.retract(seq)
            raise
        return Lsn.unpack(last)  # the commit's own stamp, in the feed: others wait_for it

    def _locked_write(self, what: str, body: Callable[[Conn, int, int], None]) -> int:
        """Run ``body(conn, seq, head)`` in one transaction holding the commit lock; ``seq``.

        ``seq`` is this commit's sequence number, ``head`` the newest stamp on
        record. A write connection found dead before the lock was taken, or
        lost while it was being opened again, is opened again once (nothing was
        sent, so nothing can be on record); a second loss fails the write.
        """
        with self._db.write_lock:
            retried = False
            while True:
                conn: Conn | None = None
                locked = committing = False
                try:
                    conn = self._db.writer()  # its set-up statements can fail too
                    with conn.transaction():
                        seq, head = self._lock_head(conn)
                        locked = True
                        body(conn, seq + 1, head)
                        committing = True
                    return seq + 1
                except psycopg.Error as e:
                    if self._db.closing:  # cut by close(): waiting on a silent network
                        raise self._db.cut_error(e, committing, what) from e
                    # Before the lock nothing was sent: the connection (dead, or
                    # lost while it was opened again) is opened once more.
                    stalled = isinstance(e, NoAnswer)  # another try would stall as long
                    if not locked and not retried and not stalled and (conn is None or conn.broken):
                        retried = True
                        continue
                    raise write_error(e, committing, what) from e

    def _stamp_above(self, lsn: int) -> int:
        """A fresh stamp above ``lsn``: every commit moves the head, so positions order them all."""
        clock = self._ensure_clock()
        clock.observe(Lsn.unpack(lsn))
        return clock.tick().lsn.packed()

    def _lock_head(self, conn: Conn) -> tuple[int, int]:
        """Take the commit lock (the ``head`` row); the last sequence number and stamp."""
        row = conn.execute(self._q.lock_head).fetchone()
        assert row is not None, "the head row is missing"
        return int(row[0]), int(row[1])

    def _stage(self, conn: Conn, chunks: Sequence[str]) -> None:
        """Send rows too large for one parameter, chunk by chunk, into this transaction's
        temporary table (:data:`~memstore.journal._pgsql.MAX_ROWS_JSON_CHARS`)."""
        conn.execute(self._q.stage_table)
        for chunk in chunks:
            conn.execute(self._q.stage_rows, {"rows": chunk})

    def _write_params(
        self,
        purge: Collection[str],
        vectors: GroupVectors | None,
        seq: int,
        last: int,
        ids: list[str],
    ) -> dict[str, Any]:
        gone = [*purge, *(vectors.deleted if vectors is not None else ())]
        return {
            "purge": ids_json(purge),
            "unvec": ids_json(gone),
            "vectors": vectors_json(vectors.puts if vectors is not None else ()),
            **self._log_params(seq, last, "purge" if purge else "write", ids),
        }

    def _log_params(self, seq: int, last: int, op: str, ids: list[str]) -> dict[str, Any]:
        return {
            "seq": seq,
            "me": self._node_id,
            "last": last,
            "cop": op,
            "ids": ids_json(ids),
            "channel": self.schema,
            "payload": json.dumps({"seq": seq, "node": self._node_id, "lsn": last}),
        }

    def _import_rows(self, rows: Sequence[Row]) -> Lsn:
        self._check_open()
        ids = sorted({r.id for r in rows})
        last = 0

        def write(conn: Conn, seq: int, head: int) -> None:
            nonlocal last
            last = self._stamp_above(max(head, *(r.lsn for r in rows)))
            chunks = rows_json_chunks(rows)
            if len(chunks) == 1:
                conn.execute(self._q.import_rows, {"rows": chunks[0]})
            else:
                self._stage(conn, chunks)
                conn.execute(self._q.import_staged)
            conn.execute(self._q.relink, {"ids": ids_json(ids)})
            conn.execute(self._q.log_commit, self._log_params(seq, last, "import", ids))

        self._locked_write("the import failed", write)
        # Not acknowledged as this process's own: the store took the import's
        # newest state, which a concurrent writer may have overtaken; the
        # follower reads these ids back from the record.
        return Lsn.unpack(last)

    # ----------------------------------------------------------- rows: read

    def _select(self, query: sql.Composed, params: Mapping[str, object]) -> Iterator[Row]:
        """Stream rows of one consistent read (a server-side cursor, batches of rows)."""
        self._check_open()
        try:
            for rec in self._db.stream(query, params, itersize=_FETCH):
                yield Row(*rec)
        except psycopg.Error as e:
            raise translate(e, f"reading journal {self._db.where} failed") from e

    def _read_head(self) -> Lsn:
        try:
            row = self._db.read(lambda conn: conn.execute(self._q.head).fetchone())
        except psycopg.Error as e:
            raise translate(e, f"reading journal {self._db.where} failed") from e
        assert row is not None
        return Lsn.unpack(int(row[1]))

    def head(self) -> Lsn:
        """The newest position on record, whichever process wrote it."""
        self._check_open()
        lsn = self._read_head()
        self._ensure_clock().observe(lsn)
        return lsn

    def _current_rows(self) -> Iterator[Row]:
        return self._select(self._q.current_rows, {})

    def _current_items(self) -> Iterator[str]:
        for row in self._select(self._q.current_rows, {}):
            yield row.item or ""

    def _restore_items(self) -> list[Item]:
        """The live items and the feed position they reflect, from one snapshot."""

        def read(conn: Conn) -> tuple[tuple[Any, ...] | None, list[str]]:
            head = conn.execute(self._q.head).fetchone()
            return head, [str(t) for (t,) in conn.execute(self._q.current_items)]

        try:
            head, texts = self._db.read(read)
        except psycopg.Error as e:
            raise translate(e, f"reading journal {self._db.where} failed") from e
        assert head is not None
        self._restored = (int(head[0]), int(head[1]))
        parse = Item.model_validate_json
        try:
            return [parse(t) for t in texts]
        except ValueError:  # a damaged row: refuse to open, naming it (see JournalBase.current)
            raise self._corrupt_current() from None

    def _rows_as_of(self, lsn: Lsn, partition: str | None) -> Iterator[Row]:
        at = lsn.packed()
        if partition is None:
            return self._select(self._q.as_of, {"at": at})
        return self._select(self._q.as_of_partition, {"at": at, "part": partition})

    def _rows_of(self, ids: Collection[str] | None, partition: str | None) -> Iterator[Row]:
        if ids is not None:
            return self._select(self._q.rows_of_ids, {"ids": ids_json(sorted(set(ids)))})
        if partition is not None:
            return self._select(self._q.rows_of_partition, {"part": partition})
        return self._select(self._q.rows_all, {})

    def _tail_rows(self, id: str, limit: int) -> TailRows:
        return tail_rows(self._db, self._q, id, limit)

    def _newest_stamps(self, ids: list[str]) -> list[NewestStamp]:
        return newest_stamps(self._db, self._q, ids)

    def _export_rows(self, partition: str | None) -> Iterator[Lsn | Row]:
        # The head row, then the rows, in one repeatable-read transaction.
        if partition is None:
            query, params = self._q.rows_all, {}
        else:
            query, params = self._q.rows_last_in, {"part": partition}
        self._check_open()
        try:
            recs = self._db.stream(query, params, itersize=_FETCH, first=self._q.head)
            head = next(recs)
            yield Lsn.unpack(int(head[1]))
            for rec in recs:
                yield Row(*rec)
        except psycopg.Error as e:
            raise translate(e, f"reading journal {self._db.where} failed") from e

    # --------------------------------------------------------- attach, follow

    def attach(self, store: Store) -> None:
        """Restore ``store`` from the record, record its writes, follow the others' writes.

        As :meth:`JournalBase.attach`; then, with ``replicate=True``, a
        follower thread applies every commit other processes make.
        """
        self._position.track(self._replicate)
        try:
            super().attach(store)
        except BaseException:
            self._position.track(False)
            raise
        self._position.start_at(*self._restored)
        if self._replicate:
            follower = Follower(
                self._db,
                self._q,
                self.schema,
                self,
                poll_interval=self._poll,
                name=f"memstore-follow-{self.schema}-{self._node_id}",
            )
            self._follower = follower
            follower.start()

    def detach(self) -> None:
        """Stop following and recording (the store keeps its items)."""
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()
        super().detach()
        self._position.track(False)
        self._cells = None

    def attach_cells(self, cells: CellStore) -> None:
        """Keep ``cells`` in step with the attached store, with vectors shared through PostgreSQL.

        Call it after :meth:`attach`, instead of ``cells.attach(store)``.
        The vectors stored for the current items are loaded instead of
        embedded (only items without one are embedded, and their vectors
        stored); from then on each write stores the vectors it embedded in its
        own transaction, and the follower hands other processes' vectors to
        ``cells`` so that it never embeds them again.
        """
        from memstore_index import embed_text, text_hash
        from memstore_index.entry import embeddable

        store = self._attached()
        model = (str(cells.embedder.model_id), cells.dim)
        with _holding(store):
            wanted = {
                it.id: text_hash(embed_text(it)) for it in store.items_locked() if embeddable(it)
            }
            try:
                stored = self._db.read(
                    lambda conn: read_vectors(conn, self._q, model, list(wanted))
                )
            except psycopg.Error as e:
                raise translate(e, f"reading vectors from {self._db.where} failed") from e
            have = {k: v for k, v in stored.items() if wanted.get(k[0]) == k[1]}
            self._cells = cells
            with cells.offered(have):
                cells.attach(store)
            missing = [id for id, h in wanted.items() if (id, h) not in have and id in cells]
            self._store_vectors(model, [(id, wanted[id], cells.vector(id)) for id in missing])

    def _store_vectors(self, model: tuple[str, int], rows: Sequence[tuple[str, str, Any]]) -> None:
        """Store vectors nobody stored yet (never overwriting one a writer stored)."""
        if not rows:
            return
        name, dim = model
        with self._db.write_lock:
            try:
                conn = self._db.writer()
                with conn.transaction():
                    # Under the commit lock, as writers store vectors: two
                    # transactions inserting the same keys in another order
                    # could otherwise deadlock, and fail a writer.
                    self._lock_head(conn)
                    puts = ((id, name, h, dim, vector_bytes(v)) for id, h, v in rows)
                    conn.execute(self._q.fill_vectors, {"vectors": vectors_json(puts)})
            except psycopg.Error as e:
                raise write_error(e, False, "storing vectors failed") from e

    def store_position(self) -> Lsn | None:
        """The position whose record the store holds, exactly; call it under the store's lock.

        The follower's position (it applies a batch and advances past it in
        one hold of the lock), unless the store holds an own commit the
        follower has not passed yet (another process's commit before it may
        be missing) or part of a batch: then ``None`` (:meth:`wait_for` the
        :meth:`head`, and ask again). Without ``replicate`` the store holds
        only this process's writes on top of its restore: the last of them,
        as :meth:`JournalBase.store_position`.
        """
        if not self._replicate:
            return super().store_position()
        self._check_open()
        packed = self._position.prefix()
        return None if packed is None else Lsn.unpack(packed)

    def feed_status(self) -> FeedStatus:
        """Where the follower stands: position, connections made, batches applied."""
        follower = self._follower
        return FeedStatus(
            following=follower is not None and follower.is_alive(),
            seq=self._position.seq,
            position=Lsn.unpack(self._position.lsn),
            connects=follower.connects if follower is not None else 0,
            batches=follower.batches if follower is not None else 0,
            read_s=follower.read_s if follower is not None else 0.0,
            apply_s=follower.apply_s if follower is not None else 0.0,
        )

    def wait_for(self, lsn: Lsn | Hlc | str, timeout: float | None = None) -> bool:
        """Wait until every commit up to ``lsn`` is in the store and heard; whether it got there.

        Heard: the store's after-commit listeners (vector index, change hub)
        were told of it, as a write of this process's is before it returns.

        ``lsn`` is typically another process's :meth:`last_lsn` (read your
        writes across processes) or :meth:`head` (everything written so far):
        an :class:`Lsn`, an :class:`Hlc`, or the text ``"wall_ms.counter"``
        that HTTP answers carry. Anything else (a datetime too: a moment is
        not a commit) raises :class:`InvalidLsnError`. ``timeout``: seconds,
        ``None`` (or infinity) to wait for ever; a NaN, a negative number, a
        ``bool`` or a string raises :class:`ValueError` (NaN never ran out).
        """
        if not isinstance(lsn, Lsn | Hlc | str):
            raise InvalidLsnError(
                "wait_for takes a log position (an Lsn, an Hlc or 'wall_ms.counter'), "
                f"got {lsn!r:.60}"
            )
        if timeout is not None and (not _is_number(timeout) or not timeout >= 0):
            raise ValueError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
        if timeout is not None and timeout > _FOREVER_S:  # the clock's range; inf included
            timeout = None
        end = None if timeout is None else time.monotonic() + timeout
        if not self._position.wait_for(to_lsn(lsn, "lsn").packed(), timeout):
            return False
        store = self._store  # in the store: now heard by its listeners too
        left = None if end is None else max(0.0, end - time.monotonic())
        return store is None or store._await_all_published(left)

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Detach, close every connection and refuse further calls; never hangs.

        Closing waits for a write group in flight (it holds the store's lock
        and the write connection). If it has not ended within
        ``close_timeout`` seconds (waiting on a network gone silent), every
        connection is cut: what waited on one fails with
        :class:`~memstore.errors.JournalError`, and the close goes on.
        """
        if self._closed:
            return
        watchdog = threading.Timer(self._db.close_timeout, self._db.cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            super().close()
        finally:
            watchdog.cancel()

    def _close_backend(self) -> None:
        self._db.close()


# ---------------------------------------------------------------- helpers


def _is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is an int or a float (a ``bool`` or a numeric string is not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _restamp(rows: Sequence[Row], clock: HybridClock) -> None:
    """Give a group one fresh stamp (above everything observed), as it had before."""
    h = clock.tick()
    for r in rows:
        r.lsn, r.node, r.to_lsn, r.to_node = h.lsn.packed(), h.node_id, None, None
