"""Following a PostgreSQL journal: LISTEN for commits, read what changed, hand it over.

A :class:`Follower` is one thread with one connection of its own. It LISTENs
on the journal's channel, and whenever a notification arrives (or
``poll_interval`` passes, or it has just connected) it reads the ``commits``
feed after the last sequence number its :class:`FeedSink` applied, together
with the current version of every id those commits touched, in one
``REPEATABLE READ`` snapshot, and hands that :class:`FeedBatch` over.

Why this never skips a commit: every writer takes the lock on the ``head``
row before it assigns its sequence number and holds it until its COMMIT has
finished, and PostgreSQL makes a commit visible before it releases the
transaction's locks. So the commit numbered ``n + 1`` starts only after
``n`` is visible, and any snapshot sees a gap-free prefix ``1..P`` of the
feed: reading ``seq > applied`` in sequence order can never pass over a
commit that becomes visible later. A dropped connection loses nothing
either: after reconnecting it LISTENs first, then reads from the same
position.

Why nothing is applied twice: a batch carries the *current* state of each id
(not the operations), applying it is idempotent (an unchanged id is not
touched), and the position moves past a batch only once it was applied.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Final, Protocol

import psycopg
from psycopg import IsolationLevel, sql

from memstore.errors import JournalCorruptError, JournalError
from memstore.item import Item
from memstore.journal._pgconn import Conn, Connections
from memstore.journal._pgsql import Queries, ids_json
from memstore.journal._pgvectors import Vector, read_vectors
from memstore.journal.version import TABLE

__all__ = ["BATCH_COMMITS", "FeedBatch", "FeedSink", "Follower", "followed_item"]

BATCH_COMMITS: Final = 1000
"""Commits read per snapshot while catching up..."""
BATCH_IDS: Final = 10_000
"""...and at most this many ids (a single larger commit still comes whole)."""
RETRY_MIN_S: Final = 0.05
"""First pause before reconnecting (it doubles up to :data:`RETRY_MAX_S`)."""
RETRY_MAX_S: Final = 2.0

_log = logging.getLogger("memstore")


@dataclass(frozen=True, slots=True)
class Commit:
    """One row of the feed."""

    seq: int
    node: int
    lsn: int
    op: str
    ids: tuple[str, ...]


@dataclass(slots=True)
class FeedBatch:
    """What changed after a position, as of one snapshot."""

    commits: list[Commit]
    top: int
    """The newest sequence number in the snapshot (the state read includes 1..top)."""
    more: bool
    """Whether the feed may hold more commits after this batch."""
    items: dict[str, str | None] = field(default_factory=dict)
    """Each id to bring up to date (in the order of the last commit that touched it):
    its current item JSON, ``None`` if it is gone."""
    vectors: dict[tuple[str, str], Vector] = field(default_factory=dict)
    """``(id, text_hash)`` to the vector stored with it (for the sink's model)."""

    @property
    def last(self) -> Commit:
        return self.commits[-1]


class FeedSink(Protocol):
    """The journal side of a follower."""

    def feed_position(self) -> int:
        """The sequence number of the last commit applied."""
        ...

    def feed_acked(self, seq: int) -> bool:
        """Whether ``seq`` is this process's own acknowledged commit (its ids need no read)."""
        ...

    def feed_model(self) -> tuple[str, int] | None:
        """The embedding model and dimension whose vectors to read, if any."""
        ...

    def feed_apply(self, batch: FeedBatch) -> None:
        """Apply a batch and move the position past it (or raise, keeping the position)."""
        ...


class Follower(threading.Thread):
    """The thread that keeps a sink up to date with the feed; see the module docs."""

    def __init__(
        self,
        db: Connections,
        queries: Queries,
        channel: str,
        sink: FeedSink,
        *,
        poll_interval: float,
        name: str,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._db = db
        self._conn: Conn | None = None
        self._q = queries
        self._channel = channel
        self._sink = sink
        self._poll = poll_interval
        self._stop_event = threading.Event()
        self._woken = False
        self._healthy = False
        self._wake_r, self._wake_w = os.pipe()
        self.connects = 0
        """Connections made so far (more than one: it reconnected)."""
        self.batches = 0
        """Batches applied so far."""
        self.read_s = 0.0
        """Seconds spent reading the feed (and the state it names) from PostgreSQL."""
        self.apply_s = 0.0
        """Seconds spent applying batches to the store (parsing, indexing, vectors)."""
        self.connected = threading.Event()
        """Set once the first connection is listening and caught up."""

    # --------------------------------------------------------------- control

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to finish and wait for it (at most ``timeout`` seconds).

        A thread still reading after the connections' ``close_timeout`` (a
        read on a network gone silent) has its connection cut, which fails
        that read at once.
        """
        self._stop_event.set()
        with contextlib.suppress(OSError):  # the pipe is gone already
            os.write(self._wake_w, b"x")
        if self.is_alive() and threading.current_thread() is not self:
            grace = min(timeout, self._db.close_timeout)
            self.join(grace)
            conn = self._conn
            if self.is_alive() and conn is not None:
                self._db.cut(conn)
            self.join(timeout - grace)
            if self.is_alive():  # pragma: no cover - a sink blocked on the store's lock
                _log.warning("memstore: the journal follower did not stop within %ss", timeout)
                return
        os.close(self._wake_r)
        os.close(self._wake_w)

    def run(self) -> None:
        pause = RETRY_MIN_S
        while not self._stop_event.is_set():
            conn: Conn | None = None
            self._healthy = False
            try:
                conn = self._conn = self._db.connect("follow")
                conn.add_notify_handler(self._on_notify)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self.connects += 1
                self._follow(conn)
            except JournalCorruptError as e:  # a damaged row: say so, apply nothing past it
                _log.error("memstore: journal follower stopped at a damaged row: %s", e)
            except (psycopg.Error, JournalError) as e:  # the connection: try again
                if not self._stop_event.is_set():
                    _log.warning("memstore: journal follower lost its connection (%s)", e)
            except Exception:
                _log.exception("memstore: journal follower failed to apply a batch; retrying")
            finally:
                self._conn = None
                if conn is not None:
                    self._db.release(conn)
            if self._healthy:  # it followed for a while: reconnect at once
                pause = RETRY_MIN_S
            self._stop_event.wait(pause)
            pause = min(pause * 2, RETRY_MAX_S)

    # ------------------------------------------------------------- following

    def _on_notify(self, _: psycopg.Notify) -> None:
        self._woken = True

    def _follow(self, conn: Conn) -> None:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        while not self._stop_event.is_set():
            self._woken = False
            self._catch_up(conn)
            self._healthy = True
            self.connected.set()
            if self._woken:  # a notification came in while reading: read again
                continue
            ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], self._poll)
            if self._wake_r in ready:
                return

    def _catch_up(self, conn: Conn) -> None:
        clock = time.perf_counter
        while not self._stop_event.is_set():
            t0 = clock()
            batch = self._read(conn)
            t1 = clock()
            self.read_s += t1 - t0
            if batch is None:
                return
            self._sink.feed_apply(batch)
            self.apply_s += clock() - t1
            self.batches += 1
            if not batch.more:
                return

    def _read(self, conn: Conn) -> FeedBatch | None:
        """The commits after the sink's position and the current state they touched."""
        q = self._q
        sink = self._sink
        with conn.transaction():
            rows = conn.execute(
                q.commits_after, {"after": sink.feed_position(), "limit": BATCH_COMMITS}
            ).fetchall()
            if not rows:
                return None
            commits: list[Commit] = []
            # The ids to read, in the order of the last commit that touched
            # each: applied (and published to subscribers) in commit order.
            need: dict[str, str | None] = {}
            for r in rows:
                own = sink.feed_acked(r[0])
                if commits and not own and len(need) + len(r[4]) > BATCH_IDS:
                    break
                commits.append(Commit(r[0], r[1], r[2], r[3], tuple(r[4])))
                if not own:
                    for id in r[4]:
                        need.pop(id, None)
                        need[id] = None
            top = conn.execute(q.head).fetchone()
            assert top is not None
            more = len(commits) < len(rows) or len(rows) == BATCH_COMMITS
            batch = FeedBatch(commits, top[0], more)
            if not need:
                return batch
            batch.items = need
            for id, text in conn.execute(q.current_of, {"ids": ids_json(batch.items)}):
                batch.items[id] = text
            model = sink.feed_model()
            if model is not None:
                batch.vectors = read_vectors(conn, q, model, batch.items)
        return batch


def followed_item(id: str, text: str | None) -> Item | None:
    """The current state another process recorded for ``id`` (``None``: it is gone).

    A row that cannot be read raises :class:`JournalCorruptError` naming it;
    the follower logs it and retries, and applies nothing of that batch
    rather than skip the damaged item.
    """
    if text is None:
        return None
    try:
        return Item.model_validate_json(text)
    except ValueError as e:
        raise JournalCorruptError(
            f"journal row {TABLE}(id={id!r}, the current version) written by another "
            f"process is unreadable ({str(e).splitlines()[0][:200]}); this process does "
            "not follow past it until it is repaired (docs/journal.md, 'A damaged row')",
            table=TABLE,
            item_id=id,
        ) from None
