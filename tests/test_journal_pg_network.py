"""A PostgreSQL journal on a network that goes silent: it fails or closes, never hangs.

A silent network sends no error: without a bound, a statement waiting for its
answer waits in ``recv()`` for ever. Every connection a journal opens asks the
kernel to notice a dead peer (TCP keepalives and ``tcp_user_timeout``, read
back here from the sockets themselves), unless the DSN chose otherwise.

The silences below are made by :class:`tests.pgproxy.CuttingProxy` on
loopback. Its kernel still acknowledges every packet and keepalive probe (as a
frozen server process's would), so TCP never notices them: what ends those
waits is the journal's own doing (closing cuts its connections).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from psycopg.conninfo import make_conninfo

from memstore import Item, JournalError, Memory, Store
from tests.pgproxy import CuttingProxy
from tests.pgtest import PgPlace, postgres_module

pg = postgres_module()
PostgresJournal = pg.PostgresJournal

HANG_S = 30.0
"""The longest a test waits for what must end (a hang guard, not a threshold)."""


@contextmanager
def _socket_of(conn: object) -> Iterator[socket.socket]:
    """A handle on ``conn``'s own socket (a duplicate descriptor, closed after)."""
    handle = socket.socket(fileno=os.dup(conn.fileno()))  # type: ignore[attr-defined]
    try:
        yield handle
    finally:
        handle.close()


def _tcp(conn: object) -> dict[str, int]:
    """What the kernel applies to ``conn``'s socket."""
    tcp = socket.IPPROTO_TCP
    with _socket_of(conn) as s:
        return {
            "keepalives": s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepalives_idle": s.getsockopt(tcp, socket.TCP_KEEPIDLE),
            "keepalives_interval": s.getsockopt(tcp, socket.TCP_KEEPINTVL),
            "keepalives_count": s.getsockopt(tcp, socket.TCP_KEEPCNT),
            "tcp_user_timeout": s.getsockopt(tcp, socket.TCP_USER_TIMEOUT),
        }


def _defaults() -> dict[str, int]:
    from memstore.journal._pgconn import TCP_DEFAULTS

    return {k: int(v) for k, v in TCP_DEFAULTS.items()}


def _writer_and_reader_tcp(journal: object) -> tuple[dict[str, int], dict[str, int]]:
    db = journal._db  # type: ignore[attr-defined]
    with db.write_lock:
        writer = _tcp(db.writer())
    return writer, db.read(_tcp)


def test_every_connection_bounds_a_silent_network_by_default(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
    try:
        writer, reader = _writer_and_reader_tcp(journal)
    finally:
        journal.close()
    expected = _defaults()
    assert writer == reader == expected
    assert expected["keepalives"] == 1 and expected["tcp_user_timeout"] > 0


def test_a_dsn_keeps_its_own_keepalive_settings(pg_place: PgPlace) -> None:
    """What the DSN says wins, option by option; the rest take the defaults."""
    dsn = make_conninfo(pg_place.dsn, keepalives_idle=77, tcp_user_timeout=1234)
    journal = PostgresJournal(dsn, schema=pg_place.schema, replicate=False)
    try:
        writer, reader = _writer_and_reader_tcp(journal)
    finally:
        journal.close()
    expected = _defaults()
    expected.update(keepalives_idle=77, tcp_user_timeout=1234)
    assert writer == reader == expected


def test_a_dsn_may_turn_keepalives_off(pg_place: PgPlace) -> None:
    """``keepalives=0`` is heard, and turns ``tcp_user_timeout`` off too: libpq sets
    it only on a socket with keepalives (as docs/journal.md says)."""
    dsn = make_conninfo(pg_place.dsn, keepalives=0)
    journal = PostgresJournal(dsn, schema=pg_place.schema, replicate=False)
    store = Store()
    journal.attach(store)
    try:
        store.upsert(Item(kind="note", title="written without keepalives"))
        writer, reader = _writer_and_reader_tcp(journal)
    finally:
        journal.close()
    assert writer["keepalives"] == reader["keepalives"] == 0
    assert writer["tcp_user_timeout"] == reader["tcp_user_timeout"] == 0


# ------------------------------------------------------ closing on a silent network


class Running:
    """``fn()`` in a thread of its own: what it returned or raised, once it ended."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.outcome: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.outcome.append(fn())
        except BaseException as e:
            self.outcome.append(e)

    def ended(self, timeout: float = HANG_S) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _on_record(place: PgPlace) -> list[str]:
    rows = place.sql("SELECT item::json->>'content' FROM {s}.versions ORDER BY 1")
    return [str(content) for (content,) in rows]


def test_close_cuts_a_write_stuck_on_a_silent_network(pg_place: PgPlace) -> None:
    """A write waits for an answer that never comes; closing the Memory cuts it.

    The write holds the store's lock and the write connection, which closing
    waits for; after ``close_timeout`` the connections are cut: the write
    fails with a JournalError (the store keeps nothing of it), and the close
    ends instead of waiting for ever.
    """
    with CuttingProxy(pg_place.dsn) as proxy:
        journal = PostgresJournal(  # no follower: only the write sends anything
            proxy.dsn,
            schema=pg_place.schema,
            durability="off",
            replicate=False,
            close_timeout=0.5,
        )
        mem = Memory(journal=journal, embedder=None)
        mem.add("written before the silence", dedup=False)
        proxy.silence()
        write = Running(lambda: mem.add("never answered", dedup=False))
        assert proxy.held.wait(HANG_S), "the write sent nothing"
        assert not write.ended(0), "the write was answered through a silent proxy"
        closing = Running(mem.close)
        assert closing.ended(), "close() hung on the stuck write"
        assert write.ended(), "the stuck write was never ended"
        assert closing.outcome == [None]
        [error] = write.outcome
        assert isinstance(error, JournalError), error
        assert "nothing was changed" in str(error) and "connection was cut" in str(error)
        assert [it.content for it in mem.store.items()] == ["written before the silence"]
    assert _on_record(pg_place) == ["written before the silence"]


def test_close_cuts_the_followers_read_stuck_on_a_silent_network(pg_place: PgPlace) -> None:
    """The follower is mid-read when the network falls silent; closing still ends it."""
    with CuttingProxy(pg_place.dsn) as proxy:
        journal = PostgresJournal(
            proxy.dsn,
            schema=pg_place.schema,
            durability="off",
            poll_interval=0.05,
            close_timeout=0.5,
        )
        store = Store()
        journal.attach(store)
        follower = journal._follower
        assert follower is not None and follower.connected.wait(HANG_S)
        proxy.silence()
        assert proxy.held.wait(HANG_S), "the follower sent nothing"  # its next poll waits
        closing = Running(journal.close)
        assert closing.ended(), "close() hung on the follower's stuck read"
        assert closing.outcome == [None]
        assert not follower.is_alive()
        assert not journal.feed_status().following


def test_close_does_not_wait_for_a_read_stuck_on_a_silent_network(pg_place: PgPlace) -> None:
    """A read in flight is not waited for at close (it ends when its connection does)."""
    with CuttingProxy(pg_place.dsn) as proxy:
        journal = PostgresJournal(
            proxy.dsn, schema=pg_place.schema, replicate=False, close_timeout=0.5
        )
        store = Store()
        journal.attach(store)
        store.upsert(Item(id="kept", kind="note", title="kept"))
        proxy.silence()
        read = Running(journal.head)
        assert proxy.held.wait(HANG_S), "the read sent nothing"
        closing = Running(journal.close)
        assert closing.ended(), "close() hung on the stuck read"
        assert closing.outcome == [None]
    # The proxy closed its sockets: the read's connection is gone, and the read says so
    # (a closed journal opens no connection to read again).
    assert read.ended(), "the read outlived its connection"
    [error] = read.outcome
    assert isinstance(error, JournalError) and "closing" in str(error), error


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), float("inf"), "5", True])
def test_a_close_timeout_that_is_no_bound_is_refused(pg_place: PgPlace, seconds: Any) -> None:
    with pytest.raises(ValueError, match="close_timeout"):
        PostgresJournal(pg_place.dsn, schema=pg_place.schema, close_timeout=seconds)


# ------------------------------------------------------------ statement_timeout


def test_statement_timeout_fails_a_read_and_a_write_on_a_silent_network(
    pg_place: PgPlace,
) -> None:
    """Without closing anything: each waits statement_timeout and a grace, then fails.

    PostgreSQL's own cancel cannot come through the silence, so the client's
    bound ends the wait: a clear JournalError, nothing changed, and once the
    network speaks again the journal reconnects by itself.
    """
    with CuttingProxy(pg_place.dsn) as proxy:
        journal = PostgresJournal(
            proxy.dsn,
            schema=pg_place.schema,
            durability="off",
            replicate=False,
            statement_timeout=2.0,  # room for a loaded machine's ordinary statements
        )
        store = Store()
        journal.attach(store)
        store.upsert(Item(id="kept", kind="note", title="kept"))
        head = journal.head()
        proxy.silence()
        read = Running(journal.head)
        assert read.ended(), "the read on a silent network hung"
        write = Running(lambda: store.upsert(Item(id="lost", kind="note", title="lost")))
        assert write.ended(), "the write on a silent network hung"
        for outcome in (read.outcome, write.outcome):
            [error] = outcome
            assert isinstance(error, JournalError), error
            assert "no answer from PostgreSQL within 4s" in str(error)
        assert "nothing was changed" in str(write.outcome[0])
        assert [it.id for it in store.items()] == ["kept"]
        proxy.speak()
        assert journal.head() == head
        store.upsert(Item(id="after", kind="note", title="after"))
        assert sorted(it.id for it in journal.current()) == ["after", "kept"]
        journal.close()


def test_statement_timeout_is_postgresqls_own_and_keeps_the_connection(
    pg_place: PgPlace,
) -> None:
    """A slow statement is cancelled by the server (not cut by the client): the
    connection answers the next statement; without the option nothing is bounded."""
    import psycopg

    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, statement_timeout=1.0)
    unbounded = PostgresJournal(pg_place.dsn, schema=pg_place.schema, node_id=7)
    try:
        db = journal._db
        with db.write_lock:
            conn = db.writer()
            assert conn.execute("SHOW statement_timeout").fetchone() == ("1s",)
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("SELECT pg_sleep(30)")
            assert db.writer() is conn and conn.execute("SELECT 1").fetchone() == (1,)
        with unbounded._db.write_lock:
            shown = unbounded._db.writer().execute("SHOW statement_timeout").fetchone()
        assert shown == ("0",)
    finally:
        journal.close()
        unbounded.close()


def test_statement_timeout_leaves_the_followers_wait_alone(pg_place: PgPlace) -> None:
    """Waiting for notifications is no statement: a follower idle for longer than
    statement_timeout keeps its connection and follows the next write."""
    writer = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
    follower = PostgresJournal(
        pg_place.dsn,
        schema=pg_place.schema,
        node_id=7,
        poll_interval=30.0,
        statement_timeout=0.5,
    )
    try:
        store, followed = Store(), Store()
        writer.attach(store)
        follower.attach(followed)
        feed = follower._follower
        assert feed is not None and feed.connected.wait(HANG_S)
        # Idle, listening, past statement_timeout and the client's grace after it.
        from memstore.journal._pgdeadline import ANSWER_GRACE_S

        time.sleep(0.5 + ANSWER_GRACE_S + 0.5)
        store.upsert(Item(id="news", kind="note", title="news"))
        assert follower.wait_for(writer.head(), HANG_S)
        assert [it.id for it in followed.items()] == ["news"]
        assert follower.feed_status().connects == 1
    finally:
        writer.close()
        follower.close()


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), float("inf"), 3e6, "5", True])
def test_a_statement_timeout_postgresql_cannot_take_is_refused(
    pg_place: PgPlace, seconds: Any
) -> None:
    with pytest.raises(ValueError, match="statement_timeout"):
        PostgresJournal(pg_place.dsn, schema=pg_place.schema, statement_timeout=seconds)


def test_closing_lets_go_of_every_socket_it_held(pg_place: PgPlace) -> None:
    """The duplicate descriptors kept to cut connections are closed with them (one left
    open would keep its socket open after the connection closed)."""
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, poll_interval=0.05)
    store = Store()
    journal.attach(store)
    store.upsert(Item(kind="note", title="one"))
    assert journal.head() and journal._follower.connected.wait(HANG_S)
    held = [fd for fd, _ in journal._db._sockets._fds.values()]
    assert len(held) == 3  # the writer, a reader back in the pool, the follower
    journal.close()
    for fd in held:
        with pytest.raises(OSError):
            os.fstat(fd)
