"""A failed PostgreSQL statement's error names its cause: a lost connection, or a refusal.

psycopg raises ``OperationalError`` for a lost connection and for whole
SQLSTATE classes the server answers (53 resources, 54 limits, 57 operator
intervention, 58 system): only the first is "the connection to PostgreSQL
failed". Each error below is made for real on the test server.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from memstore import Item, JournalError, Store
from memstore.journal._pgerrors import connection_lost, translate, write_error
from tests.pgtest import PgPlace, postgres_module

pg = postgres_module()
PostgresJournal = pg.PostgresJournal

HANG_S = 30.0
"""The longest a test waits for what must end (a hang guard, not a threshold)."""


def _uncompressible(n: int) -> str:
    """``n`` four-byte UTF-8 characters no compression shrinks (an index row keeps them all)."""
    rng = random.Random(n)
    return "".join(chr(rng.randint(0x10000, 0x3FFFF)) for _ in range(n))


def _index_limit(dsn: str) -> psycopg.Error:
    """54000: an index row larger than a btree page can hold."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TEMPORARY TABLE t (k TEXT)")
        conn.execute("CREATE INDEX ON t (k)")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as caught:
            conn.execute("INSERT INTO t VALUES (%s)", [_uncompressible(1000)])
    return caught.value


def _statement_timeout(dsn: str) -> psycopg.Error:
    """57014: a statement past its statement_timeout."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET statement_timeout = 1")
        with pytest.raises(psycopg.errors.QueryCanceled) as caught:
            conn.execute("SELECT pg_sleep(60)")
    return caught.value


@contextmanager
def _waiting(dsn: str, statement: str) -> Iterator[tuple[int, Callable[[], BaseException]]]:
    """A connection running ``statement`` in a thread: its backend pid, and what it raised."""
    conn = psycopg.connect(dsn, autocommit=True)
    pid = conn.info.backend_pid
    raised: list[BaseException] = []

    def run() -> None:
        try:
            conn.execute(statement)
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    with psycopg.connect(dsn, autocommit=True) as watcher:
        for _ in range(int(HANG_S / 0.01)):
            row = watcher.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone()
            if row is not None and row[0] == "active":
                break
            threading.Event().wait(0.01)

    def outcome() -> BaseException:
        thread.join(HANG_S)
        assert not thread.is_alive() and raised, "the statement did not fail"
        return raised[0]

    try:
        yield pid, outcome
    finally:
        conn.close()


def _ended_by(dsn: str, function: str) -> psycopg.Error:
    """What a statement raises when another connection calls ``function(pid)`` on it."""
    with _waiting(dsn, "SELECT pg_sleep(60)") as (pid, outcome):
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute(f"SELECT {function}(%s)", [pid])
        e = outcome()
    assert isinstance(e, psycopg.Error)
    return e


def test_an_index_row_too_large_is_a_refusal_not_a_lost_connection(pg_place: PgPlace) -> None:
    e = _index_limit(pg_place.dsn)
    assert isinstance(e, psycopg.OperationalError)  # what the old wording keyed on
    assert not connection_lost(e)
    assert str(write_error(e, False, "upsert 'a'")).startswith(
        "upsert 'a'; nothing was changed: PostgreSQL refused the write: index row size "
    )
    assert str(translate(e, "reading")).startswith("reading: PostgreSQL refused the read: index")


def test_a_statement_timeout_is_a_refusal(pg_place: PgPlace) -> None:
    e = _statement_timeout(pg_place.dsn)
    assert str(write_error(e, False, "w")) == (
        "w; nothing was changed: PostgreSQL refused the write: "
        "canceling statement due to statement timeout"
    )
    committed = str(write_error(e, True, "w"))  # an answer to COMMIT: the outcome is kept open
    assert "PostgreSQL failed the commit" in committed
    assert "may or may not be on record" in committed
    assert "connection" not in committed


def test_a_cancelled_statement_is_a_refusal(pg_place: PgPlace) -> None:
    e = _ended_by(pg_place.dsn, "pg_cancel_backend")
    assert isinstance(e, psycopg.errors.QueryCanceled)
    assert str(translate(e, "reading")) == (
        "reading: PostgreSQL refused the read: canceling statement due to user request"
    )


def test_a_terminated_session_is_a_lost_connection(pg_place: PgPlace) -> None:
    """pg_terminate_backend answers 57P01 (FATAL), then closes: the connection is gone."""
    e = _ended_by(pg_place.dsn, "pg_terminate_backend")
    assert isinstance(e, psycopg.OperationalError)
    assert connection_lost(e)
    assert str(write_error(e, False, "w")) == (
        "w; nothing was changed: the connection to PostgreSQL failed "
        f"({str(e).strip().splitlines()[0]})"
    )
    assert "was lost while committing" in str(write_error(e, True, "w"))


def test_a_write_past_statement_timeout_says_postgresql_refused_it(pg_place: PgPlace) -> None:
    """A write waiting on the commit lock another session holds, cancelled by the server."""
    journal = PostgresJournal(
        pg_place.dsn,
        schema=pg_place.schema,
        replicate=False,
        statement_timeout=1.0,
        lock_timeout=HANG_S,  # statement_timeout ends the wait first
    )
    store = Store()
    journal.attach(store)
    try:
        head = journal.head()
        # a transaction, holding the row lock
        with pg_place.commit_lock_held(), pytest.raises(JournalError) as caught:
            store.upsert(Item(id="a", kind="note", title="held up"))
        assert str(caught.value).endswith(
            "nothing was changed: PostgreSQL refused the write: "
            "canceling statement due to statement timeout"
        )
        assert store.get("a") is None
        assert journal.head() == head
        store.upsert(Item(id="a", kind="note", title="once the lock is free"))
        assert store.get("a") is not None
    finally:
        journal.close()


def test_a_cancelled_read_says_postgresql_refused_it(pg_place: PgPlace) -> None:
    """A read waiting on a table another session locked, cancelled from a third."""
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
    journal.attach(Store())
    name = f"memstore:{pg_place.schema}:read:{journal.node_id}"
    raised: list[BaseException] = []

    def read() -> None:
        try:
            journal.matching(lambda it: True)
        except BaseException as e:
            raised.append(e)

    try:
        with psycopg.connect(pg_place.dsn) as holder:
            holder.execute(f'LOCK TABLE "{pg_place.schema}".versions IN ACCESS EXCLUSIVE MODE')
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            cancelled = False
            for _ in range(int(HANG_S / 0.01)):
                rows = pg_place.sql(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND wait_event_type = 'Lock'",
                    name,
                )
                if rows:
                    cancelled = True
                    break
                threading.Event().wait(0.01)
            assert cancelled, "the read never waited on the lock"
            reader.join(HANG_S)
        assert not reader.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], JournalError)
        assert str(raised[0]).endswith(
            "failed: PostgreSQL refused the read: canceling statement due to user request"
        )
        assert journal.matching(lambda it: True) == []  # the connection still serves
    finally:
        journal.close()
